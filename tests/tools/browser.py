"""A real browser for the web UI's tests: Debian's Chromium (scripts/install_browser.sh installs it)
driven by Playwright through `executable_path` (Playwright's own browser builds are never
downloaded), an axe-core pass in the page, and a listener that counts the requests a page makes
to it (exfiltration by Markdown image must make none)."""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from http.server import BaseHTTPRequestHandler, SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

CHROMIUM = Path("/usr/bin/chromium")
LAUNCH_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    # Nothing but loopback resolves: the browser cannot reach out even if something asked it to.
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
]
SERIOUS = ("serious", "critical")


def missing() -> str:
    """Why the browser tests cannot run here; empty when they can."""
    if not CHROMIUM.exists():
        return f"no {CHROMIUM}: run scripts/install_browser.sh (make install) to install Debian's chromium"
    for module, package in (("playwright", "playwright"), ("axe_playwright_python", "axe-playwright-python")):
        if importlib.util.find_spec(module) is None:
            return f"no {package}: pip install -e '.[dev]'"
    return ""


async def launch(playwright: Any) -> Any:
    """Chromium headless with a fresh profile (Playwright makes a new user data dir per launch)."""
    return await playwright.chromium.launch(
        executable_path=str(CHROMIUM), headless=True, args=LAUNCH_ARGS, timeout=60_000
    )


# Registered before any page script runs (over CDP, so the page's CSP does not apply to it): every
# CSP violation the page reports, for the tests to assert there were none.
CSP_WATCH = """
window.__cspViolations = [];
document.addEventListener('securitypolicyviolation', (e) => {
  window.__cspViolations.push(`${e.violatedDirective} ${e.blockedURI}`);
});
"""


async def axe_problems(page: Any) -> list[str]:
    """The serious and critical accessibility violations axe-core finds in the page as it is now.
    axe.min.js comes from the `axe-playwright-python` package on PyPI (it bundles axe-core), so
    nothing is fetched; the script is evaluated over CDP, so the page's CSP does not block it."""
    from axe_playwright_python.async_playwright import Axe

    results = await Axe().run(page)
    found = []
    for violation in results.response["violations"]:
        if violation.get("impact") in SERIOUS:
            targets = [" ".join(map(str, n.get("target", []))) for n in violation.get("nodes", [])][:5]
            found.append(f"{violation['id']} ({violation['impact']}): {violation['help']} at {targets}")
    return found


class Listener:
    """An HTTP server on a free loopback port that counts every request it gets."""

    def __init__(self) -> None:
        self.requests: list[str] = []
        listener = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                listener.requests.append(self.path)
                self.send_response(200)
                self.send_header("content-type", "image/png")
                self.end_headers()

            do_POST = do_GET

            def log_message(self, *_: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]


@contextmanager
def listening() -> Iterator[Listener]:
    listener = Listener()
    thread = threading.Thread(target=listener.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield listener
    finally:
        listener.server.shutdown()
        listener.server.server_close()
        thread.join(5)


@contextmanager
def serving(folder: Path) -> Iterator[str]:
    """A folder as a web site on a free loopback port; yields its base URL."""

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *_: Any) -> None:
            pass

    site = ThreadingHTTPServer(("127.0.0.1", 0), partial(Quiet, directory=str(folder)))
    thread = threading.Thread(target=site.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{site.server_address[1]}"
    finally:
        site.shutdown()
        site.server_close()
        thread.join(5)
