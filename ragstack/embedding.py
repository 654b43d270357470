"""Sentence embeddings with ONNX Runtime. No torch.

Loads a sentence-transformers model exported with optimum (`ragstack models install`): `model.onnx` plus
`tokenizer.json`. Exports that output `sentence_embedding` are used as they are; exports that
output `last_hidden_state` are mean-pooled and L2-normalised here.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ragstack import onnx


class Embedder:
    def __init__(
        self,
        model_dir: Path,
        provider: str = "auto",
        batch_size: int = 32,
        max_length: int = 256,
        threads: int = 0,
        file: str = "model.onnx",
    ) -> None:
        """`file`: the model in `model_dir` to run (model.int8.onnx: its int8 weights)."""
        self._model = onnx.load(
            model_dir,
            provider,
            max_length,
            "`ragstack models install` exports the bundled all-MiniLM-L6-v2 there (once, offline)",
            threads,
            file,
        )
        # Chunk sizes are counted in full: the model's tokenizer stops at `max_length`.
        self._counter = self._model.tokenizer.from_str(self._model.tokenizer.to_str())
        self._counter.no_truncation()
        self.providers = self._model.providers
        self._pooled = "sentence_embedding" in self._model.outputs
        self._output = "sentence_embedding" if self._pooled else self._model.outputs[0]
        self.batch_size = batch_size
        self.name = model_dir.name if file == "model.onnx" else f"{model_dir.name}/{file}"
        self.dimension = 0
        self.dimension = int(self.embed(["dimension probe"]).shape[1])

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-length float32 vectors, one row per text, in input order."""
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        encodings = self._model.tokenizer.encode_batch(list(texts))
        rows: list[np.ndarray] = [np.empty(0)] * len(texts)
        for idx, result, mask in self._model.run(encodings, self.batch_size, self._output):
            for i, vector in zip(idx, result if self._pooled else _mean_pooled(result, mask), strict=True):
                rows[i] = vector
        return np.stack(rows).astype(np.float32)

    def count_tokens(self, text: str) -> int:
        """Word pieces in `text` (without truncation), for chunk sizing."""
        return len(self._counter.encode(text, add_special_tokens=False).ids) if text else 0


def _mean_pooled(tokens: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Unit-length means of each row's token vectors, padding left out."""
    pooled = (tokens * mask[:, :, None]).sum(axis=1) / np.maximum(mask.sum(axis=1, keepdims=True), 1)
    return np.asarray(pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12))
