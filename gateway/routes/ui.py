"""The web UI: a static page (plain HTML, CSS and JavaScript modules in `gateway/static/`) served
by the gateway itself. It holds no data, so it needs no key; every API call it makes sends the one
the person signs in with. The guards give these paths the UI's own strict CSP."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse, RedirectResponse, Response

from ragstack.errors import NotFound

STATIC = Path(__file__).resolve().parent.parent / "static"
MEDIA_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
}

router = APIRouter(include_in_schema=False)


def _assets() -> dict[str, Path]:
    """Every file the UI may serve, by its path under /ui/: a fixed list read once, so no request
    path ever reaches the file system."""
    if not STATIC.is_dir():
        return {}
    return {
        p.relative_to(STATIC).as_posix(): p
        for p in sorted(STATIC.rglob("*"))
        if p.is_file() and p.suffix in MEDIA_TYPES
    }


ASSETS = _assets()


@router.get("/")
async def root() -> RedirectResponse:
    return RedirectResponse("/ui/", status_code=307)


@router.get("/ui")
async def ui_bare() -> RedirectResponse:
    return RedirectResponse("/ui/", status_code=307)


@router.get("/ui/{asset:path}")
async def ui_asset(asset: str) -> Response:
    """The page (`/ui/`) and its assets; anything else under /ui/ is a 404."""
    path = ASSETS.get(asset or "index.html")
    if path is None:
        raise NotFound(f"no such UI file: {asset[:100]}")
    return FileResponse(path, media_type=MEDIA_TYPES[path.suffix])
