"""The analysis tool: Python run in a sandbox over a library's documents (runner), and deterministic
analyses that need no LLM (analyses), both seeing the documents as Markdown files and their tables as
CSV files (tables)."""

from services.agent.sandbox.analyses import Analysis, analyse, program
from services.agent.sandbox.runner import Limits, Outcome, SandboxUnavailable, run, unavailable_reason
from services.agent.sandbox.tables import Doc, Library, library, markdown_tables

__all__ = [
    "Analysis",
    "Doc",
    "Library",
    "Limits",
    "Outcome",
    "SandboxUnavailable",
    "analyse",
    "library",
    "markdown_tables",
    "program",
    "run",
    "unavailable_reason",
]
