"""`ragstack bench sources`: how long a change to a folder source takes to become searchable, for 1
file and for 1,000 files changed at once, with the folder watched (inotify, the default) and with
polling only. The files are the first 1,000 documents of a BEIR corpus, one Markdown file each; the
source is synced once before the clock starts, so every case measures changes, not a first ingest.

Searchable means what a user sees: the retrieve service (a process of the same stack) finds the
changed text by a word planted in it. For 1,000 files the clock stops when the catalog holds every
file's new content and a sample of the planted words is found."""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ragstack import domain as d
from ragstack.cli.session import embedded_config
from ragstack.config import Config, SourceConfig
from ragstack.resources import Resources
from ragstack.rpc.clients import IngestClient, RetrieveClient, open_channel
from ragstack.serve import start_stack

LIBRARY = "bench-sources"


def _docs(corpus: Path, n: int) -> list[str]:
    out = []
    with corpus.open(encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            out.append(f"# {row.get('title') or row['_id']}\n\n{row['text']}\n")
            if len(out) == n:
                break
    return out


def _write(folder: Path, i: int, text: str, token: str) -> str:
    body = f"{text}\n{token}\n"
    (folder / f"doc{i:05d}.md").write_text(body, encoding="utf-8")
    return hashlib.sha256(body.encode()).hexdigest()


async def _until(check: Callable[[], Any], limit_s: float) -> float:
    """Seconds until `check()` holds (looked at every 50 ms)."""
    start = time.perf_counter()
    while not await check():
        if time.perf_counter() - start > limit_s:
            raise TimeoutError(f"not searchable after {limit_s:.0f} s")
        await asyncio.sleep(0.05)
    return time.perf_counter() - start


async def _case(
    cfg: Config,
    res: Resources,
    root: Path,
    texts: list[str],
    watch: bool,
    interval_s: float,
    say: Callable[[str], None],
) -> dict[str, Any]:
    folder = root / ("watched" if watch else "polled")
    folder.mkdir()
    for i, text in enumerate(texts):
        _write(folder, i, text, f"basev{i}")
    local = cfg.model_copy(deep=True)
    local.ingest.source_polling = True
    local.ingest.source_watch = watch
    local.ingest.source_tick_s = 0.1
    local.sources = [
        SourceConfig(name="bench", kind="folder", url=str(folder), library=LIBRARY, interval_s=interval_s)
    ]
    local.data_dir = root / f"data-{folder.name}"
    own = Resources(local)  # the services read their config from their resources
    own.__dict__["embedder"] = res.embedder  # loaded once for both cases
    own.__dict__["query_embedder"] = res.query_embedder
    stack = await start_stack(local, services=("ingest", "retrieve"), gateway=False, resources=own)
    ingest_ch = open_channel(stack.peers["ingest"], token=local.services.token)
    retrieve_ch = open_channel(stack.peers["retrieve"], token=local.services.token)
    ingest = IngestClient(ingest_ch, 600)
    retrieve = RetrieveClient(retrieve_ch, 60)

    async def found(token: str) -> bool:
        hits, _ = await retrieve.search(token, LIBRARY, 3, d.SearchMode.LEXICAL)
        return any(token in h.chunk.text for h in hits)

    async def holds(expected: dict[str, str]) -> bool:
        docs = {Path(x.source).name: x.fingerprint for x in await ingest.list_documents(LIBRARY)}
        return all(docs.get(name) == fp for name, fp in expected.items())

    try:
        say(f"{folder.name}: first sync of {len(texts)} files")
        first = await _until(lambda: found(f"basev{len(texts) - 1}"), 1800)
        singles = []
        for n in range(5):
            token = f"onechange{n}x{int(time.time())}"
            i = (n * 97) % len(texts)
            _write(folder, i, texts[i], token)
            singles.append(await _until(functools.partial(found, token), 600))
        say(f"{folder.name}: 1 file changed, {len(singles)} times: median {statistics.median(singles):.2f} s")
        stamp = int(time.time())
        expected = {
            f"doc{i:05d}.md": _write(folder, i, texts[i], f"allchange{i}x{stamp}") for i in range(len(texts))
        }
        start = time.perf_counter()
        first_found = await _until(lambda: found(f"allchange0x{stamp}"), 1800)
        await _until(lambda: holds(expected), 1800)
        for i in range(0, len(texts), max(1, len(texts) // 20)):
            assert await found(f"allchange{i}x{stamp}"), i
        every = time.perf_counter() - start
        say(f"{folder.name}: {len(texts)} files changed: all searchable after {every:.1f} s")
        return {
            "folder": "watched (inotify)" if watch else f"polled every {interval_s:g} s",
            "first_sync_s": round(first, 1),
            "one_file_s": {
                "median": round(statistics.median(singles), 2),
                "max": round(max(singles), 2),
                "runs": len(singles),
            },
            f"{len(texts)}_files_s": {
                "first_searchable": round(first_found, 1),
                "all_searchable": round(every, 1),
            },
            "files_per_s": round(len(texts) / every, 1),
        }
    finally:
        await ingest_ch.close()
        await retrieve_ch.close()
        await stack.stop()


def bench_sources(
    cfg: Config, corpus: Path, files: int, interval_s: float, say: Callable[[str], None]
) -> dict[str, Any]:
    texts = _docs(corpus, files)
    with tempfile.TemporaryDirectory() as tmp:
        local = embedded_config(cfg, Path(tmp) / "data", allow_paths=[tmp])
        res = Resources(local)
        res.embedder.embed(["warm-up"])
        rows = [
            asyncio.run(_case(local, res, Path(tmp), texts, True, 3600.0, say)),
            asyncio.run(_case(local, res, Path(tmp), texts, False, interval_s, say)),
        ]
    return {"corpus": str(corpus), "files": len(texts), "graph": cfg.ingest.graph, "cases": rows}
