"""A client that goes away cancels the work behind it: an SSE query whose client disconnects while the
(slow, scripted) LLM is still writing cancels the agent's Ask call, and the LLM stream stops."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from ragstack.resources import Resources
from ragstack.rpc.clients import IngestClient, open_channel
from tests.conftest import SAMPLES, make_config, start_with
from tests.tools.ollama_server import OllamaServer

PIECES = 60


async def test_a_client_that_leaves_cancels_the_answer(tmp_path: Path, resources: Resources) -> None:
    sent: list[int] = []

    def reply(request: dict[str, Any]) -> str | Iterator[str]:
        if "numbered documents" not in request["messages"][0]["content"]:
            return "{}"  # the router's structured call: off-schema, so the heuristic routes

        def slowly() -> Iterator[str]:
            for i in range(PIECES):
                time.sleep(0.25)
                sent.append(i)
                yield f"word{i} "

        return slowly()

    with OllamaServer("slow", reply).serve() as server:
        cfg = make_config(
            tmp_path / "data",
            llm={"enabled": True, "host": server.url, "model": "slow"},
            verify={"llm_judge": False},
            ingest={"graph": False},
        )
        stack = await start_with(cfg, resources)
        try:
            channel = open_channel(stack.peers["ingest"])
            [e async for e in IngestClient(channel, 120).ingest(paths=[str(SAMPLES / "bm25.md")])]
            await channel.close()
            async with httpx.AsyncClient(base_url=stack.gateway_url, timeout=60) as client:
                body = {"question": "How does BM25 rank documents?"}
                async with client.stream("POST", "/v1/query", json=body) as resp:
                    async for line in resp.aiter_lines():
                        if line.startswith("event: delta"):
                            break  # the answer is being written: leave now
                cancelled = ""
                for _ in range(100):
                    metrics = (await client.get("/metrics")).text
                    cancelled = next(
                        (
                            line
                            for line in metrics.splitlines()
                            if 'method="/ragstack.v1.AgentService/Ask"' in line and 'code="CANCELLED"' in line
                        ),
                        "",
                    )
                    if cancelled:
                        break
                    await asyncio.sleep(0.1)
                assert cancelled.endswith(" 1.0"), metrics
            await asyncio.sleep(3.0)  # 12 more pieces, had the stream been read on
            assert len(sent) < 12  # the LLM stream was dropped (its next writes hit a closed socket)
        finally:
            await stack.stop()
