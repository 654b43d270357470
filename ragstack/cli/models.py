"""`ragstack models ...`: which models the commands need, where they are, and checks that an
installed one loads."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ragstack.config import Config
from ragstack.extras import EXTRAS
from ragstack.models import QUANTIZED, InstallError, ModelInfo, folder_info, package_info
from ragstack.nlp import SPACY_MODEL


def catalogue(cfg: Config) -> list[ModelInfo]:
    """Every model RAGStack may load, for this config."""
    return [
        folder_info(
            "embedder",
            "all-MiniLM-L6-v2 sentence embedder, ONNX",
            "ingest, retrieve, verify",
            cfg.models.embedder_dir,
            "ragstack models install",
        ),
        folder_info(
            "cross-encoder",
            "reranker, ONNX (optional: none ships offline)",
            "retrieve, when retrieve.reranker is cross-encoder",
            cfg.retrieve.reranker_dir,
            "ragstack models install cross-encoder --from DIR",
        ),
        package_info(
            "spacy",
            f"{SPACY_MODEL}: parser and NER, inside its package",
            "agent (instructions in documents), ingest (the knowledge graph)",
            SPACY_MODEL,
            "pip install ragstack (a base dependency)",
        ),
        package_info(
            "ocr",
            "RapidOCR's detection and recognition models, inside its package",
            "ingest of scans and PDF pages without text",
            EXTRAS["ocr"],
            "pip install 'ragstack[ocr]'",
        ),
    ]


def check_embedder(cfg: Config) -> Callable[[Path], None]:
    def check(folder: Path) -> None:
        from ragstack.embedding import Embedder

        try:
            embedder = Embedder(folder, cfg.models.provider, cfg.models.batch_size, cfg.models.max_length)
        except Exception as err:  # any failure to load is the message
            raise InstallError(f"the model in {folder} does not load as a sentence embedder: {err}") from None
        if embedder.dimension < 8:
            raise InstallError(f"the model in {folder} gives {embedder.dimension}-dimensional vectors")
        if (folder / QUANTIZED).is_file():  # queries embedded by it must land near their fp32 vectors
            probe = ["a question about dense retrieval", "Installation instructions for the library"]
            int8 = Embedder(
                folder, cfg.models.provider, cfg.models.batch_size, cfg.models.max_length, 1, QUANTIZED
            )
            if float((int8.embed(probe) * embedder.embed(probe)).sum(axis=1).min()) < 0.95:
                raise InstallError(f"{folder / QUANTIZED} does not agree with model.onnx: install again")

    return check


def check_cross_encoder(cfg: Config) -> Callable[[Path], None]:
    def check(folder: Path) -> None:
        from ragstack.reranking import CrossEncoder

        files = ["model.onnx", *([QUANTIZED] if (folder / QUANTIZED).is_file() else [])]
        for file in files:  # model.int8.onnx, which retrieve.rerank_precision may pick, loads too
            try:
                ce = CrossEncoder(folder, cfg.models.provider, file=file)
                scores = ce.score("a question", ["a passage"])
            except Exception as err:
                raise InstallError(f"{folder / file} does not load as a cross-encoder: {err}") from None
            if scores.shape != (1,):
                raise InstallError(f"{folder / file} gives no single relevance score per passage")

    return check
