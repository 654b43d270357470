"""A citation shown where it stands: real PDFs from ../shared/data/documents ingested through the
keyed gateway, their chunks located on their pages (GetChunk's regions) and drawn (GetChunkVisual,
GET /v1/chunks/{id}/visual, `ragstack visualize`)."""

from __future__ import annotations

import asyncio
import io
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image

from ragstack.page_layout import PageLayout, regions
from ragstack.stores.originals import Originals
from ragstack.stores.vectors import VectorStore
from services.retrieve import page_picture
from tests.conftest import SHARED, make_config, start_with

PDFS = SHARED / "data" / "documents" / "pdf"
PAPER, MANY_PAGES = "2305.03393v1-pg9.pdf", "multi_page.pdf"
KEYS = [
    {"name": "admin", "key": "adm-7d1c0e5f9a3b2c46", "role": "admin", "libraries": ["*"]},
    {"name": "reader", "key": "rdr-2b8e4f6a0c1d3e57", "role": "reader", "libraries": ["pics"]},
    {
        "name": "legal",
        "key": "lgl-9f0a1b2c3d4e5f68",
        "role": "reader",
        "libraries": ["pics"],
        "groups": ["legal"],
    },
]
H = {k["name"]: {"x-api-key": k["key"]} for k in KEYS}


@dataclass
class World:
    http: httpx.AsyncClient
    data_dir: Path
    dimension: int
    config: Path


def _events(text: str) -> list[tuple[str, str]]:
    return re.findall(r"event: (\w+)\r?\ndata: (.*)", text)


async def _ingest(
    http: httpx.AsyncClient, files: list[tuple[str, bytes, str]], groups: tuple[str, ...] = ()
) -> None:
    parts = [("files", f) for f in files]
    r = await http.post(
        "/v1/ingest", data={"library": "pics", "groups": list(groups)}, files=parts, headers=H["admin"]
    )
    assert r.status_code == 200, r.text
    summary = [d for k, d in _events(r.text) if k == "summary"]
    assert summary and '"failed": 0' in summary[-1].replace('"failed":0', '"failed": 0'), r.text


@pytest.fixture(scope="module")
async def world(tmp_path_factory: pytest.TempPathFactory, resources: Any) -> AsyncIterator[World]:
    data_dir = tmp_path_factory.mktemp("pictures") / "data"
    cfg = make_config(data_dir, gateway={"api_keys": KEYS}, ingest={"graph": False})
    stack = await start_with(cfg, resources)
    async with httpx.AsyncClient(base_url=stack.gateway_url, timeout=120) as http:
        await _ingest(
            http,
            [
                (PAPER, (PDFS / PAPER).read_bytes(), "application/pdf"),
                (MANY_PAGES, (PDFS / MANY_PAGES).read_bytes(), "application/pdf"),
                (
                    "notes.md",
                    b"# Notes\n\nThe harbour crane lifts forty tonnes on calm days.\n",
                    "text/markdown",
                ),
            ],
        )
        await _ingest(
            http, [("sealed.pdf", (PDFS / PAPER).read_bytes(), "application/pdf")], groups=("legal",)
        )
        yield World(http, data_dir, resources.embedder.dimension, data_dir.parent / f"{data_dir.name}.yaml")
    await stack.stop()


async def _documents(w: World) -> dict[str, dict[str, Any]]:
    r = await w.http.get("/v1/documents", params={"library": "pics"}, headers=H["admin"])
    return {Path(d["source"]).name: d for d in r.json()["documents"]}


async def _chunk(w: World, chunk_id: str, who: str = "admin") -> httpx.Response:
    return await w.http.get(f"/v1/chunks/{chunk_id}", params={"library": "pics"}, headers=H[who])


async def test_every_pdf_chunk_is_located_on_its_own_pages(world: World) -> None:
    docs = await _documents(world)
    for name in (PAPER, MANY_PAGES):
        doc = docs[name]
        for position in range(doc["chunk_count"]):
            body = (await _chunk(world, f"{doc['document_id']}:{position}")).json()
            assert body["regions"], f"{name} chunk {position} was not located"
            for r in body["regions"]:
                assert r["page"] in body["pages"]
                assert 0 <= r["left"] < r["right"] <= 1 and 0 <= r["top"] < r["bottom"] <= 1


async def test_the_regions_cover_the_chunk_text(world: World) -> None:
    """The lines inside a chunk's regions hold nearly all of its letters: the boxes are the chunk,
    not a page's worth of neighbours (checked on the stored layout, against the stored chunks)."""
    store = VectorStore(world.data_dir / "lancedb", world.dimension)
    originals = Originals(store.connection())
    pdfs = [
        d["document_id"] for d in (await _documents(world)).values() if d["media_type"] == "application/pdf"
    ]
    chunks = [c for d in pdfs for c in store.chunks_of("pics", d)]
    assert len(chunks) >= 5
    for chunk in chunks:
        layout = originals.layout("pics", chunk.document_id)
        assert layout is not None
        found = regions(layout, chunk.text, chunk.pages)
        inside = _letters(" ".join(ln.text for ln in layout.lines if any(_within(ln, r) for r in found)))
        own = _letters(chunk.text)
        assert len(own) and _coverage(own, inside) >= 0.8, (chunk.chunk_id, chunk.text[:80])
        assert len(inside) <= 1.6 * len(own) + 200, chunk.chunk_id


def _letters(text: str) -> str:
    return re.sub(r"[\W_]+", "", text).lower()


def _within(line: Any, r: Any) -> bool:
    return line.page == r.page and line.top >= r.top - 1e-4 and line.bottom <= r.bottom + 1e-4


def _coverage(own: str, inside: str) -> float:
    """Share of the chunk's 12-letter shingles found inside the regions."""
    grams = {own[i : i + 12] for i in range(0, max(1, len(own) - 11), 6)}
    return sum(g in inside for g in grams) / len(grams)


async def test_the_page_picture_shows_the_region(world: World) -> None:
    doc = (await _documents(world))[PAPER]
    chunk_id = f"{doc['document_id']}:1"
    located = (await _chunk(world, chunk_id)).json()["regions"]
    r = await world.http.get(
        f"/v1/chunks/{chunk_id}/visual", params={"library": "pics", "width": 600}, headers=H["reader"]
    )
    assert r.status_code == 200 and r.headers["content-type"] == "image/png"
    image = Image.open(io.BytesIO(r.content)).convert("RGB")
    assert image.width == 600 and abs(image.height - 600 * 792 / 612) <= 1  # a US letter page
    w, h = image.size
    outline = page_picture.OUTLINE[:3]
    region = located[0]
    # The outline is drawn along the region's left edge, and nowhere far outside every region.
    x = round(region["left"] * w) - 2
    column = [image.getpixel((x, y)) for y in range(round(region["top"] * h), round(region["bottom"] * h))]
    assert sum(_near(p, outline) for p in column) > 0.8 * len(column)
    far = [(5, 5), (w - 5, h - 5), (w // 2, 3)]
    assert not any(_near(image.getpixel(p), outline) for p in far)


def _near(pixel: tuple[int, int, int], colour: tuple[int, ...]) -> bool:
    return all(abs(a - b) <= 40 for a, b in zip(pixel, colour, strict=True))


async def test_pages_width_and_formats_are_checked(world: World) -> None:
    docs = await _documents(world)
    pdf = docs[MANY_PAGES]
    last = (await _chunk(world, f"{pdf['document_id']}:{pdf['chunk_count'] - 1}")).json()
    page = last["pages"][-1]
    r = await world.http.get(
        f"/v1/chunks/{last['chunk_id']}/visual", params={"library": "pics", "page": page}, headers=H["admin"]
    )
    assert r.status_code == 200 and r.headers["x-page"] == str(page)
    assert Image.open(io.BytesIO(r.content)).width == page_picture.DEFAULT_WIDTH
    wrong = await world.http.get(
        f"/v1/chunks/{last['chunk_id']}/visual", params={"library": "pics", "page": 999}, headers=H["admin"]
    )
    assert wrong.status_code == 400 and "not on page 999" in wrong.json()["error"]["message"]
    narrow = await world.http.get(
        f"/v1/chunks/{last['chunk_id']}/visual", params={"library": "pics", "width": 50}, headers=H["admin"]
    )
    assert narrow.status_code == 400 and "100 to 2000" in narrow.json()["error"]["message"]
    notes = f"{docs['notes.md']['document_id']}:0"
    assert (await _chunk(world, notes)).json()["regions"] == []
    text = await world.http.get(f"/v1/chunks/{notes}/visual", params={"library": "pics"}, headers=H["admin"])
    assert text.status_code == 412 and "only PDF pages have pictures" in text.json()["error"]["message"]
    unknown = await world.http.get("/v1/chunks/nope:0/visual", params={"library": "pics"}, headers=H["admin"])
    assert unknown.status_code == 404


async def test_a_hidden_document_has_no_picture(world: World) -> None:
    sealed = (await _documents(world))["sealed.pdf"]
    chunk_id = f"{sealed['document_id']}:0"
    for who, status in (("reader", 404), ("legal", 200), ("admin", 200)):
        r = await world.http.get(f"/v1/chunks/{chunk_id}/visual", params={"library": "pics"}, headers=H[who])
        assert r.status_code == status, (who, r.text)
    # The same answer as for a chunk that does not exist: nothing about the hidden document.
    hidden = await world.http.get(
        f"/v1/chunks/{chunk_id}/visual", params={"library": "pics"}, headers=H["reader"]
    )
    assert hidden.json()["error"]["message"] == f"chunk {chunk_id!r} not found in library 'pics'"
    assert (await _chunk(world, chunk_id, "reader")).status_code == 404


async def test_the_cli_draws_the_same_picture(world: World, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from ragstack.cli import main

    doc = (await _documents(world))[PAPER]
    chunk_id = f"{doc['document_id']}:1"
    over_http = await world.http.get(
        f"/v1/chunks/{chunk_id}/visual", params={"library": "pics"}, headers=H["admin"]
    )
    out = tmp_path / "chunk.png"
    # The config's ports are 0: the command starts its own retrieve service on the same stores.
    result = await asyncio.to_thread(
        CliRunner().invoke,
        main.cli,
        ["--config", str(world.config), "visualize", chunk_id, str(out), "--library", "pics"],
    )
    assert result.exit_code == 0, result.output
    assert out.read_bytes() == over_http.content
    assert "page 1" in result.output


async def test_a_deleted_document_takes_its_pdf_along(world: World) -> None:
    docs = await _documents(world)
    doc = docs[MANY_PAGES]
    originals = Originals(VectorStore(world.data_dir / "lancedb", world.dimension).connection())
    assert originals.data("pics", doc["document_id"]) == (PDFS / MANY_PAGES).read_bytes()
    r = await world.http.delete(
        f"/v1/documents/{doc['document_id']}", params={"library": "pics"}, headers=H["admin"]
    )
    assert r.status_code == 200
    assert originals.data("pics", doc["document_id"]) is None
    assert isinstance(originals.layout("pics", docs[PAPER]["document_id"]), PageLayout)
