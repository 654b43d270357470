"""Every store of shared state, as each service's factory declares it (`STATE`: modules with a
STORE name and their MIGRATIONS), for `ragstack migrate`. Imported lazily like serve.py does."""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from types import ModuleType

from ragstack.config import SERVICE_NAMES


def state_stores(services: Sequence[str] = SERVICE_NAMES) -> list[ModuleType]:
    """The stores `services` open (a service's image may lack the others' packages)."""
    found: dict[str, ModuleType] = {}
    for name in services:
        factory = importlib.import_module(f"services.{name}.factory")
        for module in getattr(factory, "STATE", ()):
            found.setdefault(module.STORE, module)
    return sorted(found.values(), key=lambda m: m.STORE)
