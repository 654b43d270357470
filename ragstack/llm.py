"""The LLM client: Ollama when reachable. Callers check `available()` and take their offline path
when it is False; the answer and the trace say which path ran. At most `llm.max_concurrent`
generations of a process run at once, and callers waiting for one take turns (ragstack/fair_gate.py):
one caller's flood of questions queues behind itself, not in front of everyone else's."""

from __future__ import annotations

import asyncio
import json
import logging
import math
import threading
import time
from collections.abc import AsyncGenerator, Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Protocol, TypeVar

from prometheus_client import Gauge
from pydantic import BaseModel, ValidationError

from ragstack import auth
from ragstack.config import LLMConfig
from ragstack.fair_gate import FairGate, GateBusy

log = logging.getLogger(__name__)
PROBE_TTL_S = 30.0


@contextmanager
def _closing(client: Any) -> Iterator[Any]:
    """An ollama client closed after use: its keep-alive connection would otherwise stay open."""
    try:
        yield client
    finally:
        client.close()


class GenerationCut(Exception):
    """The LLM stopped at one of its limits before it finished; `limit` names the setting. A stream
    raises it after its last piece, so what was written is still there to keep."""

    def __init__(self, limit: str) -> None:
        super().__init__(f"the generation reached {limit}")
        self.limit = limit


# When the caller stops waiting (time.monotonic()): a thread it left behind on a timeout gives up its
# place at the gate then, not after `llm.timeout_s` (asyncio.to_thread passes it to the thread).
GIVE_UP_AT: ContextVar[float] = ContextVar("llm_give_up_at", default=math.inf)


@contextmanager
def waited_for_at_most(timeout_s: float) -> Iterator[None]:
    """The LLM calls started inside (threads included) wait for a slot at most `timeout_s`."""
    token = GIVE_UP_AT.set(min(GIVE_UP_AT.get(), time.monotonic() + timeout_s))
    try:
        yield
    finally:
        GIVE_UP_AT.reset(token)


WAITING = Gauge("ragstack_llm_waiting", "Calls waiting for one of this process's llm.max_concurrent slots.")

MAX_OUTPUT_TOKENS = "llm.max_output_tokens"
TIMEOUT = "llm.timeout_s"
MAX_ANSWER_CHARS = "max_answer_chars"  # no setting: the most an answer may hold (domain.MAX_ANSWER_CHARS)


class LLM:
    def __init__(self, cfg: LLMConfig, clock: Callable[[], float] = time.monotonic) -> None:
        self.cfg = cfg
        self._clock = clock
        self._probed_at = float("-inf")
        self._available = False
        self._lock = threading.Lock()
        self._gate = FairGate(cfg.max_concurrent, "the LLM is busy (llm.max_concurrent)")
        WAITING.set_function(self._gate.waiting)  # the process's LLM (the last one made, in tests)

    @property
    def name(self) -> str:
        return f"llm:{self.cfg.model}"

    async def available(self) -> bool:
        """Whether the server answers and has the model; cached for a while."""
        return await asyncio.to_thread(self.available_now)

    def available_now(self) -> bool:
        """`available` for synchronous callers (the ingest pipeline runs in worker threads)."""
        import ollama

        if not self.cfg.enabled:
            return False
        with self._lock:
            now = self._clock()
            if now - self._probed_at < PROBE_TTL_S:
                return self._available
            self._probed_at = now
            try:
                with _closing(ollama.Client(host=self.cfg.host, timeout=self.cfg.probe_timeout_s)) as client:
                    listing = client.list()
                names = {m.model for m in listing.models}
                self._available = self.cfg.model in names or f"{self.cfg.model}:latest" in names
                if not self._available:
                    log.warning(
                        "Ollama at %s has no model %s; using offline paths", self.cfg.host, self.cfg.model
                    )
            except Exception as err:  # unreachable, refused, timeout: all mean "not now"
                log.info(
                    "Ollama at %s not reachable (%s); using offline paths", self.cfg.host, type(err).__name__
                )
                self._available = False
            return self._available

    def chat_json(self, messages: Sequence[dict[str, str]], schema: dict[str, Any]) -> str:
        """One non-streamed answer constrained to the JSON schema (Ollama structured outputs).
        The caller validates it: a small model may still answer off-schema. It may write twice
        `llm.max_output_tokens` (the verifier's claims restate a draft of up to that length); past
        that it raises GenerationCut (the JSON is unfinished)."""
        return self._chat(messages, {"temperature": 0}, 2 * self.cfg.max_output_tokens, schema)

    def chat(self, messages: Sequence[dict[str, str]], max_tokens: int = 0) -> str:
        """One non-streamed answer, for synchronous callers; `max_tokens` lowers the configured
        limit for a caller that keeps only a little. Raises GenerationCut when cut."""
        return self._chat(messages, {"temperature": self.cfg.temperature}, self._limit(max_tokens))

    def _chat(
        self, messages: Sequence[dict[str, str]], options: dict[str, Any], limit: int, schema: Any = None
    ) -> str:
        import ollama

        # Not streamed, the reply arrives whole: the client's read timeout bounds the generation.
        with (
            self._gate.hold(auth.current().name, self._wait_s()),
            _closing(ollama.Client(host=self.cfg.host, timeout=self.cfg.timeout_s)) as client,
        ):
            response = client.chat(
                model=self.cfg.model,
                messages=list(messages),
                format=schema,
                options={**options, "num_predict": limit},
            )
        if response.done_reason == "length":
            raise GenerationCut(MAX_OUTPUT_TOKENS)
        return response.message.content or ""

    async def stream_chat(self, messages: Sequence[dict[str, str]]) -> AsyncGenerator[str, None]:
        """The reply's pieces as they are written, within `llm.timeout_s` of waiting for them in all
        and `llm.max_output_tokens`; past either, GenerationCut after the last piece. The wait for a
        free slot (`llm.max_concurrent`) is bounded by `llm.timeout_s` too: past it, GateBusy."""
        import ollama

        # The ollama client has no default timeout: always give one; and close it, or its
        # keep-alive connection to the server stays open. The client's timeout bounds each read
        # only, so the stream's waits for its pieces are summed against the deadline too (the
        # model's time, not a slow consumer's).
        loop = asyncio.get_running_loop()
        left = self.cfg.timeout_s
        async with (
            self._gate.hold_async(auth.current().name, self._wait_s()),
            ollama.AsyncClient(host=self.cfg.host, timeout=self.cfg.timeout_s) as client,
        ):
            stream = await client.chat(
                model=self.cfg.model,
                messages=list(messages),
                stream=True,
                options={"temperature": self.cfg.temperature, "num_predict": self._limit(0)},
            )
            parts = aiter(stream)
            while True:
                # `asyncio.timeout`, which, unlike 3.11's `wait_for`, never loses a cancel that
                # arrives with the piece.
                started = loop.time()
                try:
                    async with asyncio.timeout(max(left, 0.0)):
                        part = await anext(parts)
                except StopAsyncIteration:
                    return
                except TimeoutError:
                    raise GenerationCut(TIMEOUT) from None
                left -= loop.time() - started
                text = part.message.content or ""
                if text:
                    yield text
                if part.done and part.done_reason == "length":
                    raise GenerationCut(MAX_OUTPUT_TOKENS)

    def _wait_s(self) -> float:
        """How long a call may wait for a slot: `llm.timeout_s`, or less when its caller stops sooner.
        A call started after its caller stopped waiting (a retry in a thread left behind) is refused:
        it would take a slot for an answer nobody reads."""
        left = GIVE_UP_AT.get() - time.monotonic()
        if left <= 0:
            raise GateBusy("the LLM call's caller stopped waiting before it started")
        return min(self.cfg.timeout_s, left)

    def _limit(self, max_tokens: int) -> int:
        return min(max_tokens, self.cfg.max_output_tokens) if max_tokens > 0 else self.cfg.max_output_tokens


class JsonChat(Protocol):
    def chat_json(self, messages: Sequence[dict[str, str]], schema: dict[str, Any]) -> str: ...


Model = TypeVar("Model", bound=BaseModel)


def ask_validated(
    llm: JsonChat,
    model: type[Model],
    system: str,
    user: str,
    on_retry: Callable[[], None] = lambda: None,
) -> Model | None:
    """One structured answer under `model`'s schema, validated. An invalid answer is asked for again
    once, with the problem named; None when the LLM fails or answers invalid twice (the caller then
    takes its offline path)."""
    messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
    for attempt in range(2):
        try:
            raw = llm.chat_json(messages, model.model_json_schema())
        except Exception as err:  # unreachable, refused, timed out, cut (GenerationCut)
            log.info("LLM call for %s failed: %s", model.__name__, type(err).__name__)
            return None
        try:
            return model.model_validate(json.loads(raw))
        except (ValueError, ValidationError) as err:
            if attempt == 0:
                on_retry()
                problem = str(err).splitlines()[0][:200]
                messages += [
                    {"role": "assistant", "content": raw[:2000]},
                    {"role": "user", "content": f"That is not valid ({problem}). Answer again: JSON only."},
                ]
    log.warning("the LLM gave no valid %s twice; the offline path runs", model.__name__)
    return None
