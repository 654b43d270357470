"""OCR with RapidOCR (its ONNX models ship inside the package: nothing is downloaded)."""

from __future__ import annotations

import functools
import io
from collections.abc import Iterator
from typing import Any

import numpy as np

from ragstack.errors import UnsupportedFormat
from services.ingest.budgets import Budgets, OverBudget


@functools.cache
def _engine() -> Any:
    from rapidocr import RapidOCR

    return RapidOCR(params={"Global.log_level": "warning"})


def read(image: np.ndarray) -> list[tuple[str, float, float]]:
    """(text, top, bottom) of each text line in an RGB image, in pixels from the top, top to bottom."""
    result = _engine()(image)
    boxes = result.boxes if result.boxes is not None else []
    lines = []
    for box, text in zip(boxes, result.txts or (), strict=False):
        ys = [float(y) for _, y in box]
        if text.strip():
            lines.append((" ".join(text.split()), min(ys), max(ys)))
    return sorted(lines, key=lambda line: line[1])


def image_frames(data: bytes, budgets: Budgets) -> Iterator[np.ndarray]:
    """The frames of an image file as RGB arrays (one for PNG/JPEG, each page of a TIFF), each
    checked against the frame and pixel budgets before it is decoded."""
    from PIL import Image, ImageSequence, UnidentifiedImageError

    try:
        image = Image.open(io.BytesIO(data))
        budgets.check_frames(getattr(image, "n_frames", 1))
        for frame in ImageSequence.Iterator(image):
            budgets.check_frame(*frame.size)
            yield np.asarray(frame.convert("RGB"))
    except Image.DecompressionBombError as err:  # PIL's own cap, past ours when ours is raised
        raise OverBudget(f"cannot read image: {err}") from None
    except (UnidentifiedImageError, OSError) as err:
        raise UnsupportedFormat(f"cannot read image: {err}") from None
