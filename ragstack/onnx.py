"""What the ONNX model runtimes share: loading a session and its tokenizer, and padding a batch.

CUDA execution provider when onnxruntime has it (and `provider` allows), CPU otherwise.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
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
    rows_alone: bool = False  # a row's output depends on the rows run beside it (batch_dependent)
    # For rows run alone: the same model on one thread, and a thread per core to run it on, so
    # several rows run at once instead of one after another on the session's threads (lanes).
    single: Any = None
    lanes: ThreadPoolExecutor | None = None

    def batches(self, encodings: Sequence[Any], batch_size: int) -> list[list[int]]:
        """Indices of the rows to run together: of similar length, or each alone when the model's
        output for a row would depend on its batch-mates."""
        if self.rows_alone:
            return [[i] for i in range(len(encodings))]
        return by_length(encodings, batch_size)

    def run(
        self, encodings: Sequence[Any], batch_size: int, output: str
    ) -> list[tuple[list[int], np.ndarray, np.ndarray]]:
        """Each batch (`batches`): its row indices, the model's `output` for them and their
        attention mask. Rows run alone go on the lanes when there are several (one lone row keeps
        the session's threads: a single search is not slowed)."""
        groups = self.batches(encodings, batch_size)

        def one(idx: list[int], session: Any) -> tuple[list[int], np.ndarray, np.ndarray]:
            feed = pad([encodings[i] for i in idx], self.inputs)
            return idx, np.asarray(session.run([output], feed)[0]), feed["attention_mask"]

        if self.lanes is None or len(groups) < 2:
            return [one(idx, self.session) for idx in groups]
        return list(self.lanes.map(lambda idx: one(idx, self.single), groups))


def load(
    model_dir: Path,
    provider: str,
    max_length: int,
    missing_hint: str,
    threads: int = 0,
    file: str = "model.onnx",
) -> OnnxModel:
    """Loads `file` (model.onnx) and `tokenizer.json` from `model_dir`; ModelMissing names `missing_hint`."""
    model_path, tok = model_dir / file, model_dir / "tokenizer.json"
    if not model_path.exists() or not tok.exists():
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
    session = ort.InferenceSession(str(model_path), sess_options=opts, providers=providers)
    inputs = {i.name for i in session.get_inputs()}
    outputs = [o.name for o in session.get_outputs()]
    alone = batch_dependent(session, tokenizer, inputs, outputs[0])
    model = OnnxModel(session, tokenizer, providers, inputs, outputs, alone)
    cores = threads or os.cpu_count() or 1
    if alone and cores > 1 and providers == ["CPUExecutionProvider"]:
        opts.intra_op_num_threads = 1
        single = ort.InferenceSession(str(model_path), sess_options=opts, providers=providers)
        if same_outputs(session, single, tokenizer, inputs, outputs[0]):
            model.single = single
            model.lanes = ThreadPoolExecutor(cores, thread_name_prefix=f"onnx-{model_dir.name}")
    return model


# Two texts of different lengths: the longer one's activations set a shared scale if there is one.
_PROBES = ("a short probe", "a longer probe sentence, 12 words or so, whose activations outweigh the first's")


def batch_dependent(session: Any, tokenizer: Any, inputs: set[str], output: str) -> bool:
    """Whether a row's output changes with the rows run beside it. A dynamically quantized (int8)
    model scales each matrix product's input by the range of the whole batch, so a search query's
    vector, and its hits, would depend on the queries that happened to share its batch (SciFact's
    queries alone and in batches of eight: cosine 0.984 at worst, `ragstack bench embed`). Such a
    model runs one row at a time. fp32 moves by nothing on this CPU and at most by rounding
    elsewhere: a relative difference of 1% tells the two apart (int8's was 5% or more)."""
    short, long = tokenizer.encode_batch(list(_PROBES))
    alone = np.asarray(session.run([output], pad([short], inputs))[0])[0]
    try:
        beside = np.asarray(session.run([output], pad([short, long], inputs))[0])[0]
    except Exception:  # ONNX Runtime's own error types: a model exported for one row at a time
        return True
    if alone.ndim == 2:  # one vector a token: the padded positions are not the row's
        beside = beside[: len(alone)]
    scale = float(np.abs(alone).max()) or 1.0
    return float(np.abs(alone - beside).max()) / scale > 0.01


def same_outputs(session: Any, other: Any, tokenizer: Any, inputs: set[str], output: str) -> bool:
    """Whether two sessions of one model (on different thread counts) give exactly the same
    output, so a row's result does not depend on which one ran it (they matched bit for bit here on
    all 809 SciFact training queries; a CPU whose kernels split sums by thread count would not)."""
    feed = pad(tokenizer.encode_batch(list(_PROBES[1:])), inputs)
    return bool(np.array_equal(session.run([output], feed)[0], other.run([output], feed)[0]))


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
