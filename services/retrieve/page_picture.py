"""A PDF page drawn as a PNG picture with a chunk's regions on it (pdfium renders, Pillow draws)."""

from __future__ import annotations

import asyncio
import io
from collections.abc import Awaitable, Callable, Sequence

from ragstack import page_layout
from ragstack.domain import Chunk, ChunkRegion, ChunkVisual
from ragstack.errors import FailedPrecondition, InvalidArgument, ResourceExhausted
from ragstack.pdfium import PDFIUM_LOCK
from ragstack.stores.originals import Originals

PDF = "application/pdf"
DEFAULT_WIDTH = 1000
MIN_WIDTH, MAX_WIDTH = 100, 2000
MAX_HEIGHT = 4 * MAX_WIDTH  # a page far taller than wide would still make a bounded picture
MAX_WAITING = 8  # requests waiting for a render slot; more are refused at once (429)
FILL = (255, 200, 0, 70)  # translucent amber over the text, which stays readable
OUTLINE = (230, 81, 0, 255)


def check_width(width: int) -> int:
    if width == 0:
        return DEFAULT_WIDTH
    if not MIN_WIDTH <= width <= MAX_WIDTH:
        raise InvalidArgument(f"width is {width} pixels, outside {MIN_WIDTH} to {MAX_WIDTH}")
    return width


def draw(pdf: bytes, page: int, regions: Sequence[ChunkRegion], width: int) -> tuple[bytes, int, int]:
    """(PNG, width, height) of `page` (1-based) at `width` pixels, the regions of that page drawn."""
    import pypdfium2 as pdfium
    from PIL import Image, ImageDraw

    with PDFIUM_LOCK:
        try:
            document = pdfium.PdfDocument(pdf)
        except pdfium.PdfiumError as err:
            raise FailedPrecondition(f"the kept PDF cannot be read: {err}") from None
        try:
            if not 1 <= page <= len(document):
                raise InvalidArgument(f"page {page} is outside the document's {len(document)} pages")
            sheet = document[page - 1]
            points_wide, points_high = sheet.get_size()
            scale = min(width / max(points_wide, 1.0), MAX_HEIGHT / max(points_high, 1.0))
            image = sheet.render(scale=scale).to_pil().convert("RGBA")
        finally:
            document.close()
    overlay = Image.new("RGBA", image.size, (0, 0, 0, 0))
    pen = ImageDraw.Draw(overlay)
    w, h = image.size
    stroke = max(2, w // 400)
    for r in regions:
        if r.page != page:
            continue
        corners = (r.left * w - stroke, r.top * h - stroke, r.right * w + stroke, r.bottom * h + stroke)
        pen.rectangle(corners, fill=FILL, outline=OUTLINE, width=stroke)
    out = io.BytesIO()
    Image.alpha_composite(image, overlay).convert("RGB").save(out, format="PNG", optimize=False)
    return out.getvalue(), w, h


class ChunkPictures:
    """Regions and pictures of chunks the caller may see (`find` checks that, as GetChunk does)."""

    def __init__(
        self, find: Callable[[str, str], Awaitable[Chunk]], originals: Originals, renders: int = 2
    ) -> None:
        self._find = find
        self._originals = originals
        self._renders = asyncio.Semaphore(renders)  # rendering is CPU work: searches keep the rest
        self._waiting = 0

    async def regions(self, chunk: Chunk) -> tuple[ChunkRegion, ...]:
        if chunk.media_type != PDF:
            return ()
        layout = await asyncio.to_thread(self._originals.layout, chunk.library, chunk.document_id)
        return page_layout.regions(layout, chunk.text, chunk.pages) if layout is not None else ()

    async def visual(self, library: str, chunk_id: str, page: int, width: int) -> ChunkVisual:
        width = check_width(width)
        chunk = await self._find(library, chunk_id)
        if chunk.media_type != PDF:
            raise FailedPrecondition(
                f"chunk {chunk_id!r} is from a {chunk.media_type or 'text'} document: "
                "only PDF pages have pictures"
            )
        if page == 0:
            page = chunk.pages[0] if chunk.pages else 1
        elif chunk.pages and page not in chunk.pages:
            raise InvalidArgument(f"chunk {chunk_id!r} is on pages {list(chunk.pages)}, not on page {page}")
        regions = await self.regions(chunk)
        if self._waiting >= MAX_WAITING:
            raise ResourceExhausted(
                f"{self._waiting} page pictures are waiting to be drawn, the limit of one retrieve "
                "service: try again in a moment"
            )
        self._waiting += 1
        try:
            await self._renders.acquire()  # the slot first, then the PDF: a waiter holds no copy
        finally:
            self._waiting -= 1
        try:
            pdf = await asyncio.to_thread(self._originals.data, library, chunk.document_id)
            if pdf is None:
                raise FailedPrecondition(
                    f"the PDF of chunk {chunk_id!r} was not kept (indexed before pictures were kept, or "
                    "with ingest.page_pictures off): ingest it again to see its pages"
                )
            png, w, h = await asyncio.to_thread(draw, pdf, page, regions, width)
        finally:
            self._renders.release()
        return ChunkVisual(png, page, tuple(r for r in regions if r.page == page), w, h)
