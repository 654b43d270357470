"""Cross-encoder reranking with ONNX Runtime: any Hugging Face sequence-classification model a user
exports with optimum (`scripts/export_cross_encoder.sh`): `model.onnx` plus `tokenizer.json`.

Each (query, passage) pair is encoded together and scored by the model's logit (the last one when
the head has several classes). CUDA provider when present, CPU otherwise; pairs are batched by
length.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ragstack.embedding import pick_providers
from ragstack.errors import ModelMissing


class CrossEncoder:
    def __init__(
        self, model_dir: Path, provider: str = "auto", batch_size: int = 32, max_length: int = 512
    ) -> None:
        model = model_dir / "model.onnx"
        tok = model_dir / "tokenizer.json"
        if not model.exists() or not tok.exists():
            raise ModelMissing(
                f"cross-encoder not found in {model_dir} (needs model.onnx and tokenizer.json); export one "
                "with scripts/export_cross_encoder.sh"
            )
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        import onnxruntime as ort
        from tokenizers import Tokenizer

        self._tokenizer = Tokenizer.from_file(str(tok))
        self._tokenizer.enable_truncation(max_length=max_length)
        self._tokenizer.no_padding()
        opts = ort.SessionOptions()
        opts.log_severity_level = 3
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.providers = pick_providers(provider, ort.get_available_providers())
        self._session = ort.InferenceSession(str(model), sess_options=opts, providers=self.providers)
        self._inputs = {i.name for i in self._session.get_inputs()}
        self._output = self._session.get_outputs()[0].name
        self.batch_size = batch_size
        self.name = f"cross-encoder:{model_dir.name}"

    def score(self, query: str, passages: Sequence[str]) -> np.ndarray:
        """One relevance logit per passage, in input order (higher is more relevant)."""
        if not passages:
            return np.zeros(0, dtype=np.float32)
        encodings = self._tokenizer.encode_batch([(query, p) for p in passages])
        order = sorted(range(len(passages)), key=lambda i: len(encodings[i].ids))
        out = np.zeros(len(passages), dtype=np.float32)
        for start in range(0, len(order), self.batch_size):
            idx = order[start : start + self.batch_size]
            out[idx] = self._run([encodings[i] for i in idx])
        return out

    def _run(self, encodings: Sequence[object]) -> np.ndarray:
        width = max(len(e.ids) for e in encodings)  # type: ignore[attr-defined]
        ids = np.zeros((len(encodings), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        types = np.zeros_like(ids)
        for row, e in enumerate(encodings):
            n = len(e.ids)  # type: ignore[attr-defined]
            ids[row, :n] = e.ids  # type: ignore[attr-defined]
            mask[row, :n] = 1
            types[row, :n] = e.type_ids  # type: ignore[attr-defined]
        feed = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feed["token_type_ids"] = types
        logits = np.asarray(self._session.run([self._output], feed)[0])
        return logits[:, -1] if logits.ndim == 2 else logits
