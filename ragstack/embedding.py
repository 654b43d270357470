"""Sentence embeddings with ONNX Runtime: CUDA provider when present, CPU otherwise. No torch.

Loads a sentence-transformers model exported with optimum (`make models`): `model.onnx` plus
`tokenizer.json`. Exports that output `sentence_embedding` are used as they are; exports that
output `last_hidden_state` are mean-pooled and L2-normalised here.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
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


class Embedder:
    def __init__(
        self,
        model_dir: Path,
        provider: str = "auto",
        batch_size: int = 32,
        max_length: int = 256,
        threads: int = 0,
    ) -> None:
        model = model_dir / "model.onnx"
        tok = model_dir / "tokenizer.json"
        if not model.exists() or not tok.exists():
            raise ModelMissing(
                f"embedder not found in {model_dir} (needs model.onnx and tokenizer.json); "
                "run `make models` to export the bundled all-MiniLM-L6-v2"
            )
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        import onnxruntime as ort
        from tokenizers import Tokenizer

        self._tokenizer = Tokenizer.from_file(str(tok))
        self._tokenizer.enable_truncation(max_length=max_length)
        self._tokenizer.no_padding()
        opts = ort.SessionOptions()
        if threads:
            opts.intra_op_num_threads = threads
        opts.log_severity_level = 3
        # No spin-waiting: on small machines the idle spinning threads starve the gRPC and event-loop threads.
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.providers = pick_providers(provider, ort.get_available_providers())
        self._session = ort.InferenceSession(str(model), sess_options=opts, providers=self.providers)
        self._inputs = {i.name for i in self._session.get_inputs()}
        outputs = [o.name for o in self._session.get_outputs()]
        self._pooled = "sentence_embedding" in outputs
        self._output = "sentence_embedding" if self._pooled else outputs[0]
        self.batch_size = batch_size
        self.name = model_dir.name
        self.dimension = int(self.embed(["dimension probe"]).shape[1])

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-length float32 vectors, one row per text, in input order.

        Texts are batched by length so a batch wastes little padding.
        """
        if not texts:
            return np.zeros((0, getattr(self, "dimension", 0)), dtype=np.float32)
        encodings = self._tokenizer.encode_batch(list(texts))
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        out: list[np.ndarray | None] = [None] * len(texts)
        for start in range(0, len(order), self.batch_size):
            idx = order[start : start + self.batch_size]
            vecs = self._run([encodings[i] for i in idx])
            for i, v in zip(idx, vecs, strict=True):
                out[i] = v
        return np.stack(out).astype(np.float32)  # type: ignore[arg-type]

    def _run(self, encodings: Sequence[Any]) -> np.ndarray:
        width = max(len(e.ids) for e in encodings)
        ids = np.zeros((len(encodings), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        for row, e in enumerate(encodings):
            n = len(e.ids)
            ids[row, :n] = e.ids
            mask[row, :n] = 1
        feed = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feed["token_type_ids"] = np.zeros_like(ids)
        result = self._session.run([self._output], feed)[0]
        if self._pooled:
            return np.asarray(result)
        summed = (result * mask[:, :, None]).sum(axis=1)
        pooled = summed / np.maximum(mask.sum(axis=1, keepdims=True), 1)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return np.asarray(pooled / np.maximum(norms, 1e-12))

    def count_tokens(self, text: str) -> int:
        """Word pieces in `text` (without truncation), for chunk sizing."""
        return len(self._tokenizer.encode(text, add_special_tokens=False).ids) if text else 0
