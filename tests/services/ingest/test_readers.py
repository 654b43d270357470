from __future__ import annotations

import pytest

from ragstack.errors import UnsupportedFormat
from services.ingest.readers import parse


def test_markdown_title_is_the_first_h1() -> None:
    p = parse("notes/guide.md", b"intro\n# The Guide\n\ntext")
    assert p.title == "The Guide" and p.media_type == "text/markdown"


def test_text_title_is_the_file_name_and_hashes_stay_text() -> None:
    p = parse("/var/log/app-server.log", b"# not a heading\nERROR x\n")
    assert p.title == "app server" and p.media_type == "text/plain"
    assert p.markdown.startswith("\\# not a heading")


@pytest.mark.parametrize(
    ("name", "data", "message"),
    [
        ("a.exe", b"MZ", "unsupported format .exe"),
        ("README", b"hi", "no extension"),
        ("empty.md", b"  \n", "empty file"),
        ("bin.txt", b"\x00\x01\x02", "binary content"),
    ],
)
def test_bad_files_fail_with_a_reason(name: str, data: bytes, message: str) -> None:
    with pytest.raises(UnsupportedFormat, match=message):
        parse(name, data)


def test_latin1_is_decoded() -> None:
    assert "café" in parse("x.txt", "café".encode("latin-1")).markdown
