"""RAGStack shared kernel: config, contract stubs, model runtimes, stores, RPC plumbing, telemetry, CLI.

`from ragstack import RAG` (or `AsyncRAG`): RAGStack embedded in your program (ragstack/rag.py)."""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"
__all__ = ["RAG", "AsyncRAG", "__version__"]


def __getattr__(name: str) -> Any:
    # Loaded on first use: `ragstack --help` and the image's model export import this package bare.
    if name in ("RAG", "AsyncRAG"):
        from ragstack import rag

        return getattr(rag, name)
    raise AttributeError(f"module 'ragstack' has no attribute {name!r}")
