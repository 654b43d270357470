"""What the CLI prints from documents is text, never console markup: rich would drop "[docling]"
from a message and turn "[link=...]" in a document into a terminal hyperlink."""

from __future__ import annotations

import io

from rich.console import Console

from ragstack import domain as d
from ragstack.cli.output import _print_answer

ANSWER = "Install it with pip install 'kettle[steam]' [1]. [link=https://evil.example]Read more[/link]"


def test_an_answer_and_its_claims_print_as_written() -> None:
    claim = d.Claim("c1", "pip install 'kettle[steam]'", ("1",), d.Verdict.SUPPORTED, 0.9, "[bold]ok[/bold]")
    done = d.DoneEvent("t", ANSWER, (), 0.9, False, "extractive", d.Manifest((claim,), 1.0, "offline"))
    out = io.StringIO()
    _print_answer(Console(file=out, width=300, color_system=None), done)
    text = out.getvalue()
    assert ANSWER in text
    assert "kettle[steam]'" in text.split("Verification", 1)[1]
    assert "[bold]ok[/bold]" in text


def test_a_cut_answer_says_which_limit_cut_it() -> None:
    manifest = d.Manifest((), 1.0, "offline")
    done = d.DoneEvent("t", "Night scenes [1].", (), 0.9, False, "llm:x", manifest, cut_by="llm.timeout_s")
    out = io.StringIO()
    _print_answer(Console(file=out, width=300, color_system=None), done)
    assert "answer delivered, the LLM's draft cut at llm.timeout_s;" in out.getvalue()
