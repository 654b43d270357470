"""What the ONNX model runtimes share: loading a session and its tokenizer, and padding a batch.

CUDA execution provider when onnxruntime has it (and `provider` allows), CPU otherwise.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ragstack.errors import ModelMissing


def pick_providers(preference: str, available: Sequence[str]) -> list[str]:
    """ONNX Runtime providers for `auto`, `cpu` or `cuda`; `cuda` without CUDA is an error."""
    if preference == "cpu":
        return ["CPUExecutionProvider"]
    has_cuda = "CUDAExecutionProvider" in available
    if preference == "cuda" and not has_cuda:
        raise ModelMissing("models.provider is cuda but onnxruntime has no CUDAExecutionProvider")
    return ["CUDAExecutionProvider", "CPUExecutionProvider"] if has_cuda else ["CPUExecutionProvider"]


@dataclass
class OnnxModel:
    session: Any
    tokenizer: Any
    providers: list[str]
    inputs: set[str]
    outputs: list[str]


def load(
    model_dir: Path,
    provider: str,
    max_length: int,
    missing_hint: str,
    threads: int = 0,
    file: str = "model.onnx",
) -> OnnxModel:
    """Loads `file` (model.onnx) and `tokenizer.json` from `model_dir`; ModelMissing names `missing_hint`."""
    model, tok = model_dir / file, model_dir / "tokenizer.json"
    if not model.exists() or not tok.exists():
        raise ModelMissing(f"no model in {model_dir} (needs {file} and tokenizer.json): {missing_hint}")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import onnxruntime as ort
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(tok))
    tokenizer.enable_truncation(max_length=max_length)
    tokenizer.no_padding()
    opts = ort.SessionOptions()
    if threads:
        opts.intra_op_num_threads = threads
    opts.log_severity_level = 3
    # No spin-waiting: on small machines idle spinning threads starve the gRPC and event-loop threads.
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    providers = pick_providers(provider, ort.get_available_providers())
    session = ort.InferenceSession(str(model), sess_options=opts, providers=providers)
    return OnnxModel(
        session,
        tokenizer,
        providers,
        {i.name for i in session.get_inputs()},
        [o.name for o in session.get_outputs()],
    )


def pad(encodings: Sequence[Any], inputs: set[str]) -> dict[str, np.ndarray]:
    """The model's feed for a batch: ids, attention mask and (when the model takes them) type ids,
    right-padded to the longest sequence."""
    width = max(len(e.ids) for e in encodings)
    ids = np.zeros((len(encodings), width), dtype=np.int64)
    mask = np.zeros_like(ids)
    types = np.zeros_like(ids)
    for row, e in enumerate(encodings):
        n = len(e.ids)
        ids[row, :n] = e.ids
        mask[row, :n] = 1
        types[row, :n] = e.type_ids
    feed = {"input_ids": ids, "attention_mask": mask}
    if "token_type_ids" in inputs:
        feed["token_type_ids"] = types
    return feed


def by_length(encodings: Sequence[Any], batch_size: int) -> list[list[int]]:
    """Indices grouped into batches of similar length, so a batch wastes little padding."""
    order = sorted(range(len(encodings)), key=lambda i: len(encodings[i].ids))
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
