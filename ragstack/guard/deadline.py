"""An HTTP transport whose every socket operation stops at one deadline per request.

httpcore gives each read the whole read timeout again, so a server that drips its headers a byte at
a time could hold a request for as long as it likes; here connect, TLS, writes and reads each get
only what is left of the request's deadline, and fail as timeouts once it has passed.
"""

from __future__ import annotations

import math
import ssl
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import httpcore
import httpx

_SLICE_S = 0.5  # a read waits at most this long at a time, so a cancellation is seen within it
SocketOption = tuple[int, int, int] | tuple[int, int, bytes | bytearray] | tuple[int, int, None, int]


class _Stream(httpcore.NetworkStream):
    def __init__(self, inner: httpcore.NetworkStream, left: Callable[[], float]) -> None:
        self._inner = inner
        self._left = left

    def _timeout(self, timeout: float | None, error: type[Exception]) -> float:
        left = self._left()
        if left <= 0:
            raise error("the request's deadline has passed")
        return left if timeout is None else min(timeout, left)

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        """Waits in slices of at most `_SLICE_S`, so a silent peer is given up on within one slice of
        the deadline passing or of a cancellation."""
        until = math.inf if timeout is None else time.monotonic() + timeout
        while True:
            wait = min(self._timeout(None, httpcore.ReadTimeout), until - time.monotonic())
            if wait <= 0:
                raise httpcore.ReadTimeout("the read's timeout has passed")
            try:
                return self._inner.read(max_bytes, min(wait, _SLICE_S))
            except httpcore.ReadTimeout:
                if wait <= _SLICE_S:
                    raise

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, self._timeout(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.NetworkStream:
        inner = self._inner.start_tls(
            ssl_context, server_hostname, self._timeout(timeout, httpcore.ConnectTimeout)
        )
        return _Stream(inner, self._left)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _Backend(httpcore.NetworkBackend):
    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._local = threading.local()  # each thread's request in flight
        self._cancelled = threading.Event()

    def cancel(self) -> None:
        """Every request in flight and to come fails at once (within a read slice)."""
        self._cancelled.set()

    def set_deadline(self, end: float | None) -> None:
        self._local.end = end

    def left(self) -> float:
        if self._cancelled.is_set():
            return -1.0
        end = getattr(self._local, "end", None)
        return math.inf if end is None else end - self._clock()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[SocketOption] | None = None,
    ) -> httpcore.NetworkStream:
        left = self.left()
        if left <= 0:
            raise httpcore.ConnectTimeout("the request's deadline has passed")
        timeout = left if timeout is None else min(timeout, left)
        inner = httpcore.SyncBackend().connect_tcp(host, port, timeout, local_address, socket_options)
        return _Stream(inner, self.left)

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[SocketOption] | None = None
    ) -> httpcore.NetworkStream:
        raise httpcore.ConnectError("unix sockets are not fetched")

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class DeadlineTransport(httpx.HTTPTransport):
    """`httpx.HTTPTransport` without proxies from the environment and without connection reuse,
    whose requests stop at the deadline last given to `set_deadline` on the calling thread, or when
    `cancel` is called from any thread."""

    def __init__(
        self, verify: ssl.SSLContext | bool = True, clock: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__(verify=verify, trust_env=False)
        self._backend = _Backend(clock)
        context = (
            verify
            if isinstance(verify, ssl.SSLContext)
            else httpx.create_ssl_context(verify=verify, trust_env=False)
        )
        # The pool httpx would build, with the deadline's network backend (httpx has no option for it).
        self._pool = httpcore.ConnectionPool(
            ssl_context=context, max_keepalive_connections=0, network_backend=self._backend
        )

    def set_deadline(self, end: float | None) -> None:
        self._backend.set_deadline(end)

    def cancel(self) -> None:
        self._backend.cancel()
