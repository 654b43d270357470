"""Request body limits, refused with 413 and the limit named, before or while the body arrives."""

from __future__ import annotations

from typing import Any

from gateway.guards import send_error

Scope = dict[str, Any]
Receive = Any
Send = Any


class _TooLarge(Exception):
    pass


class BodyLimit:
    """ASGI middleware: bodies of `paths` over `max_bytes` get 413 (by Content-Length when sent,
    else by counting while reading)."""

    def __init__(self, app: Any, max_bytes: int, paths: tuple[str, ...], setting: str) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.paths = paths
        self.setting = setting

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith(self.paths):
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        length = headers.get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.max_bytes:
            await self._refuse(send)
            return
        seen = 0
        started = False

        async def counting_receive() -> Any:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise _TooLarge
            return message

        async def tracking_send(message: Any) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counting_receive, tracking_send)
        except _TooLarge:
            if not started:
                await self._refuse(send)

    async def _refuse(self, send: Send) -> None:
        # In the unit of the setting that sets it (gateway.max_request_kb, gateway.max_upload_mb).
        kb = self.setting.endswith("_kb")
        size = f"{self.max_bytes / 1024:g} KB" if kb else f"{self.max_bytes / 2**20:g} MB"
        message = f"request body over the limit of {size} ({self.setting})"
        await send_error(send, 413, "RESOURCE_EXHAUSTED", message)
