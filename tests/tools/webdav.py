"""A real WebDAV server for tests: wsgidav serving a folder, under wsgiref in a thread on a free
loopback port, with basic auth."""

from __future__ import annotations

import socketserver
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server


class _Server(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def webdav_server(folder: Path, user: str = "dav", password: str = "secret") -> Iterator[str]:
    """The URL (without userinfo) of `folder` served at /dav/ over WebDAV; `user` and `password`
    must come as basic auth."""
    from wsgidav.wsgidav_app import WsgiDAVApp

    app = WsgiDAVApp(
        {
            "provider_mapping": {"/dav": str(folder)},
            "simple_dc": {"user_mapping": {"*": {user: {"password": password}}}},
            "http_authenticator": {"accept_basic": True, "accept_digest": False, "default_to_digest": False},
            "verbose": 0,
            "logging": {"enable": False, "enable_loggers": []},
            "dir_browser": {"enable": False},
            "lock_storage": False,
            "property_manager": None,
        }
    )
    server = make_server("127.0.0.1", 0, app, server_class=_Server, handler_class=_Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/dav/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
