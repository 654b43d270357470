"""The analysis tool: Python run in a sandbox over a library's documents (runner): programs an LLM
writes (programs) and deterministic analyses that need no LLM (analyses), all seeing the documents as
Markdown files and their tables as CSV files (tables)."""

from services.agent.sandbox.analyses import Analysis, analyse, program
from services.agent.sandbox.programs import Attempt, Written, write_and_run
from services.agent.sandbox.questions import across_files
from services.agent.sandbox.runner import Limits, Outcome, SandboxUnavailable, run, unavailable_reason
from services.agent.sandbox.tables import Doc, Library, library, markdown_tables

__all__ = [
    "Analysis",
    "Attempt",
    "Doc",
    "Library",
    "Limits",
    "Outcome",
    "SandboxUnavailable",
    "Written",
    "across_files",
    "analyse",
    "library",
    "markdown_tables",
    "program",
    "run",
    "unavailable_reason",
    "write_and_run",
]
