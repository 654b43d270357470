"""RAGStack shared kernel: config, contract stubs, model runtimes, stores, RPC plumbing, telemetry, CLI."""

__version__ = "0.1.0"
