"""The web UI in a real browser (Debian's Chromium through Playwright, nothing downloaded) against a
real keyed gateway and services on loopback, the offline extractive path answering: login, a
streamed answer with citations, a PDF citation's page with its region, a passage in its section,
uploads, the trace view, feedback, Markdown-image exfiltration, roles, the CSP, and an axe-core
pass on each view. Screenshots go to test-artifacts/ui/."""

from __future__ import annotations

import re
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ragstack.resources import Resources
from ragstack.rpc.clients import IngestClient, open_channel
from ragstack.serve import Stack
from tests.conftest import ROOT, SAMPLES, SHARED, make_config, start_with
from tests.tools import browser

pytestmark = pytest.mark.slow
needs_browser = pytest.mark.skipif(bool(browser.missing()), reason=browser.missing() or "browser present")

ADMIN_KEY = "ui-admin-key-5f0c2a9d"
READER_KEY = "ui-reader-key-81b7e44c"
ADMIN = {"x-api-key": ADMIN_KEY}
PDF = SHARED / "data" / "documents" / "pdf" / "multi_page.pdf"
ARTIFACTS = ROOT / "test-artifacts" / "ui"
STATIC = ROOT / "gateway" / "static"
UI_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob:; "
    "connect-src 'self'; form-action 'none'; base-uri 'none'; frame-ancestors 'none'"
)


@pytest.fixture(scope="module")
async def ui_stack(tmp_path_factory: pytest.TempPathFactory, resources: Resources) -> AsyncIterator[Stack]:
    """A keyed gateway (an admin and a reader) with the sample corpus and one PDF in `default`."""
    cfg = make_config(
        tmp_path_factory.mktemp("web-ui") / "data",
        gateway={
            "api_keys": [
                {"name": "ui-admin", "key": ADMIN_KEY, "role": "admin"},
                {"name": "ui-reader", "key": READER_KEY, "role": "reader"},
            ]
        },
        sql={"allowed_roots": [tempfile.gettempdir()]},
        ingest={"fetch_allow": ["127.0.0.1"]},  # the test's own web page, on loopback
    )
    stack = await start_with(cfg, resources)
    channel = open_channel(stack.peers["ingest"])
    events = [e async for e in IngestClient(channel, 600).ingest(paths=[str(SAMPLES), str(PDF)])]
    await channel.close()
    assert events[-1].failed == 0 and events[-1].indexed == len(list(SAMPLES.glob("*.md"))) + 1  # type: ignore[union-attr]
    yield stack
    await stack.stop()


@pytest.fixture(scope="module")
async def chromium() -> AsyncIterator[Any]:
    from playwright.async_api import async_playwright

    playwright = await async_playwright().start()
    launched = await browser.launch(playwright)
    yield launched
    await launched.close()
    await playwright.stop()


@pytest.fixture
async def page(chromium: Any) -> AsyncIterator[Any]:
    """A fresh context (its own session storage) and page; after the test, no CSP violation and no
    script error may have happened in it."""
    context = await chromium.new_context(viewport={"width": 1280, "height": 900})
    await context.add_init_script(browser.CSP_WATCH)
    tab = await context.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda error: errors.append(str(error)))
    yield tab
    if not tab.is_closed():
        assert await tab.evaluate("window.__cspViolations") == []
    assert errors == []
    await context.close()


async def shot(page: Any, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


async def accessible(page: Any, view: str) -> None:
    problems = await browser.axe_problems(page)
    assert problems == [], f"{view}: " + "\n".join(problems)


async def indexed(stage: Any) -> None:
    """Waits for an upload's stage to read "indexed"; a timeout says what it read instead (one
    such wait timed out in a full run, with nothing to say why)."""
    from playwright.async_api import TimeoutError as PlaywrightTimeout

    try:
        await stage.filter(has_text="indexed").wait_for(timeout=90_000)
    except PlaywrightTimeout:
        shown = await stage.all_inner_texts()
        raise AssertionError(f"not indexed within 90 s; the upload's stage reads {shown}") from None


async def sign_in(page: Any, url: str, key: str = ADMIN_KEY, path: str = "/ui/") -> None:
    await page.goto(url + path)
    await page.locator("#login-key").fill(key)
    await page.get_by_role("button", name="Sign in").click()
    await page.locator("#who").filter(has_text="Signed in").wait_for()


async def ask(page: Any, question: str, library: str = "default", mode: str = "auto") -> Any:
    """Asks in the Ask view; returns the finished turn."""
    await page.locator("#ask-library").select_option(library)
    await page.locator("#ask-mode").select_option(mode)
    await page.get_by_label("Question").fill(question)
    await page.get_by_role("button", name="Ask", exact=True).click()
    turn = page.locator("[data-testid=turn]").last
    await turn.locator("[data-testid=answer][aria-busy=false]").wait_for(timeout=120_000)
    return turn


# Records, at every change of the conversation, how far the last turn has come: the steps shown,
# the answer's length and the citation chips (which come with the final `done` event).
WATCH_STREAM = """
window.__seen = [];
new MutationObserver(() => {
  const turn = document.querySelector('[data-testid=turn]:last-child');
  if (!turn) return;
  window.__seen.push({
    steps: turn.querySelectorAll('[data-testid=steps] li').length,
    tools: turn.querySelectorAll('[data-testid=tool-call]').length,
    text: turn.querySelector('[data-testid=answer]').textContent.length,
    chips: turn.querySelectorAll('[data-testid=citation]').length,
  });
}).observe(document.querySelector('#conversation'), {childList: true, subtree: true, characterData: true});
"""


async def test_the_ui_is_served_without_a_key_under_a_strict_csp(ui_stack: Stack) -> None:
    async with httpx.AsyncClient(base_url=ui_stack.gateway_url, timeout=30) as client:
        root = await client.get("/")
        assert root.status_code == 307 and root.headers["location"] == "/ui/"
        for path, media in (
            ("/ui/", "text/html"),
            ("/ui/app.css", "text/css"),
            ("/ui/js/app.js", "text/javascript"),
            ("/ui/favicon.svg", "image/svg+xml"),
        ):
            found = await client.get(path)
            assert found.status_code == 200 and found.headers["content-type"].startswith(media), path
            assert found.headers["content-security-policy"] == UI_CSP, path
            assert found.headers["x-content-type-options"] == "nosniff"
            assert found.headers["referrer-policy"] == "no-referrer"
        for path in ("/ui/nothing.js", "/ui/%2e%2e/pyproject.toml", "/ui/%2e%2e%2fpyproject.toml"):
            missing = await client.get(path)
            assert missing.status_code == 404 and missing.headers["content-security-policy"] == UI_CSP
        # The data stays behind the key, and keeps the API's own CSP.
        refused = await client.get("/v1/libraries")
        assert refused.status_code == 401
        assert refused.headers["content-security-policy"] == "default-src 'none'; frame-ancestors 'none'"
        assert (await client.get("/v1/libraries", headers=ADMIN)).status_code == 200

    # Nothing inline for the CSP to have to allow, and no HTML made from strings in the scripts.
    for html in STATIC.rglob("*.html"):
        text = html.read_text()
        assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", text), html
        assert not re.search(r"\sstyle=|\son[a-z]+=", text), html
    for script in STATIC.rglob("*.js"):
        code = script.read_text()
        assert not re.search(
            r"\.(inner|outer)HTML\s*=|insertAdjacentHTML|document\.write|\beval\(|new Function", code
        ), script


@needs_browser
async def test_login_keeps_the_key_in_the_tab_and_sends_it_as_a_header(ui_stack: Stack, page: Any) -> None:
    sent: list[tuple[str, str]] = []
    page.on("request", lambda r: sent.append((r.url, r.headers.get("x-api-key", ""))))
    await page.goto(ui_stack.gateway_url + "/")
    assert page.url.endswith("/ui/")
    await page.locator("#view-login").wait_for()
    await accessible(page, "login")
    await shot(page, "login")

    await page.locator("#login-key").fill("not-a-key-at-all")
    await page.get_by_role("button", name="Sign in").click()
    await page.locator("#login-error").filter(has_text="refused").wait_for()
    assert await page.evaluate("sessionStorage.getItem('ragstack.apiKey')") is None

    await page.locator("#login-key").fill(ADMIN_KEY)
    await page.get_by_role("button", name="Sign in").click()
    await page.locator("#who").filter(has_text="Signed in (admin)").wait_for()
    assert await page.locator("#view-ask").is_visible()
    assert await page.evaluate("sessionStorage.getItem('ragstack.apiKey')") == ADMIN_KEY
    api = [(u, k) for u, k in sent if "/v1/" in u]
    assert api and all(k for u, k in api[-2:]) and not any(ADMIN_KEY in u for u, _ in sent)

    await page.get_by_role("button", name="Sign out").click()
    await page.locator("#view-login").wait_for()
    assert await page.evaluate("sessionStorage.getItem('ragstack.apiKey')") is None


@needs_browser
async def test_an_answer_streams_in_with_its_route_tools_and_numbered_citations(
    ui_stack: Stack, page: Any
) -> None:
    await sign_in(page, ui_stack.gateway_url)
    queries: list[dict[str, Any]] = []
    page.on("request", lambda r: queries.append(r.post_data_json) if r.url.endswith("/v1/query") else None)
    await page.evaluate(WATCH_STREAM)
    turn = await ask(page, "How does RAGStack decide to abstain from answering?")

    assert await turn.locator("[data-testid=route]").inner_text()
    assert await turn.locator("[data-testid=tool-call]").count() >= 1
    answer = await turn.locator("[data-testid=answer]").inner_text()
    assert "abstain" in answer.lower()
    chips = turn.locator("[data-testid=citation]")
    assert await chips.count() >= 1
    assert [await c.get_attribute("data-ref") for c in await chips.all()][:2] == ["1", "2"][
        : await chips.count()
    ]
    assert await turn.locator("[data-testid=manifest] tbody tr").count() >= 1
    seen = await page.evaluate("window.__seen")
    # The steps showed before any answer text, and text before the citations (the `done` event).
    assert any(s["tools"] > 0 and s["text"] == 0 for s in seen)
    assert any(s["text"] > 0 and s["chips"] == 0 for s in seen)
    await accessible(page, "ask")
    await shot(page, "ask")

    # A Markdown citation, opened from the keyboard: the passage highlighted in its section.
    await chips.first.focus()
    await page.keyboard.press("Enter")
    dialog = page.locator("#evidence")
    await dialog.locator("[data-testid=cited-passage]").wait_for()
    assert await dialog.locator("[data-testid=heading-path]").inner_text()
    assert await dialog.locator("[data-testid=cited-passage]").inner_text()
    await accessible(page, "evidence (section)")
    await shot(page, "evidence-section")
    await page.keyboard.press("Escape")
    await dialog.wait_for(state="hidden")
    assert await page.evaluate("document.activeElement.dataset.testid") == "citation"  # focus back

    # A follow-up (sent with Enter) goes in the same conversation; a new conversation gets a new id.
    await page.get_by_label("Question").fill("And what is its default threshold?")
    await page.get_by_label("Question").press("Enter")
    await page.locator("[data-testid=turn]").nth(1).locator("[aria-busy=false]").wait_for(timeout=120_000)
    await page.get_by_role("button", name="New conversation").click()
    await ask(page, "What is the default gateway port?")
    sessions = [q["session_id"] for q in queries]
    assert len(sessions) == 3 and sessions[0] == sessions[1] != sessions[2]


@needs_browser
async def test_a_compare_answer_is_a_table_whose_cells_open_their_sources(ui_stack: Stack, page: Any) -> None:
    """The answer's shape chosen in the form: a compare table, built as a table of text and
    citation buttons (never HTML from the server), each cell's [n] opening its source."""
    await sign_in(page, ui_stack.gateway_url)
    await page.locator("#ask-shape").select_option("compare")
    turn = await ask(page, "How do BM25 and dense retrieval differ in speed and accuracy?")
    assert "compare answer" in await turn.locator("[data-testid=route]").inner_text()
    table = turn.locator("[data-testid=answer-table]")
    rows = [await r.inner_text() for r in await table.locator("tr th[scope=row]").all()]
    assert rows == ["BM25", "dense retrieval"]
    refs = table.locator("button.ref")
    assert await refs.count() >= 1
    await refs.first.click()
    await page.locator("#evidence [data-testid=cited-passage]").wait_for()
    await page.keyboard.press("Escape")
    await accessible(page, "ask (compare table)")
    await shot(page, "ask-compare")


@needs_browser
async def test_a_pdf_citation_shows_its_page_with_the_region_drawn(ui_stack: Stack, page: Any) -> None:
    await sign_in(page, ui_stack.gateway_url)
    turn = await ask(page, "When was the IBM MT/ST introduced?", mode="lexical")
    async with httpx.AsyncClient(base_url=ui_stack.gateway_url, timeout=30, headers=ADMIN) as client:
        docs = (await client.get("/v1/documents")).json()["documents"]
    (pdf_id,) = [d["document_id"] for d in docs if d["source"].endswith("multi_page.pdf")]
    chip = turn.locator(f"[data-testid=citation][data-chunk^='{pdf_id}:']").first
    await chip.click()

    dialog = page.locator("#evidence")
    image = dialog.locator("[data-testid=page-image]")
    await image.wait_for()
    await page.wait_for_function(
        "() => { const i = document.querySelector('[data-testid=page-image]');"
        " return i && i.complete && i.naturalWidth > 0; }"
    )
    assert (await image.get_attribute("src") or "").startswith("blob:")  # fetched with the key header
    region = dialog.locator("[data-testid=region]").first
    picture, box = await image.bounding_box(), await region.bounding_box()
    assert picture and box and box["width"] > 5 and box["height"] > 5
    tolerance = 1.0
    assert (
        picture["x"] - tolerance <= box["x"]
        and box["x"] + box["width"] <= picture["x"] + picture["width"] + tolerance
    )
    assert picture["y"] - tolerance <= box["y"]
    assert box["y"] + box["height"] <= picture["y"] + picture["height"] + tolerance
    await accessible(page, "evidence (PDF page)")
    await page.screenshot(path=str(ARTIFACTS / "evidence-pdf.png"))  # the README's picture


@needs_browser
async def test_libraries_upload_by_input_and_drop_delete_graph_and_admin_attach(
    ui_stack: Stack, page: Any, tmp_path: Path
) -> None:
    from tests.tools import shop

    await sign_in(page, ui_stack.gateway_url, path="/ui/#/libraries/ui-uploads")
    await page.locator("#library-detail").wait_for()
    await page.locator("#upload-input").set_input_files(
        [
            {
                "name": "okapi.md",
                "mimeType": "text/markdown",
                "buffer": b"# Okapi\n\nThe okapi lives in the Congo.\n",
            }
        ]
    )
    row = page.locator("[data-testid=upload][data-name='okapi.md']")
    await indexed(row.locator("[data-testid=upload-stage]"))
    await page.locator("[data-testid=document-row][data-source='upload://ui-uploads/okapi.md']").wait_for()

    await page.evaluate(
        """() => {
          const data = new DataTransfer();
          data.items.add(new File(['# Quokka\\n\\nThe quokka lives on Rottnest Island.\\n'], 'quokka.md',
                                  {type: 'text/markdown'}));
          document.querySelector('#dropzone').dispatchEvent(
            new DragEvent('drop', {dataTransfer: data, bubbles: true, cancelable: true}));
        }"""
    )
    dropped = page.locator("[data-testid=upload][data-name='quokka.md'] [data-testid=upload-stage]")
    await indexed(dropped)
    quokka = page.locator("[data-testid=document-row][data-source='upload://ui-uploads/quokka.md']")
    await quokka.wait_for()
    assert "1" in await quokka.locator("td").nth(3).inner_text()  # its chunks
    await page.locator("[data-testid=library-row][data-library='ui-uploads']").wait_for()

    (tmp_path / "capybara.html").write_text(
        "<html><head><title>Capybaras</title></head><body><main><h1>Capybaras</h1>"
        "<p>The capybara is the largest living rodent.</p></main></body></html>"
    )
    with browser.serving(tmp_path) as base:
        await page.get_by_label("Web page URL").fill(f"{base}/capybara.html")
        await page.get_by_role("button", name="Ingest URL").click()
        by_url = page.locator(
            f"[data-testid=upload][data-name='{base}/capybara.html'] [data-testid=upload-stage]"
        )
        await indexed(by_url)
        await page.locator(f"[data-testid=document-row][data-source^='{base}/capybara.html']").wait_for()
    await accessible(page, "libraries")
    await shot(page, "libraries")

    delete = quokka.get_by_role("button")
    await delete.click()
    await delete.filter(has_text="Confirm delete").click()
    await quokka.wait_for(state="detached")
    await page.locator("#notice").filter(has_text="Deleted upload://ui-uploads/quokka.md").wait_for()
    assert await page.locator("[data-testid=document-row]").count() == 2  # okapi and the web page

    # An admin attaches a database.
    shop.build_sqlite(tmp_path / "shop.db")
    await page.get_by_label("Name", exact=True).fill("shop")
    await page.get_by_label("URL (sqlite").fill(f"sqlite:///{tmp_path / 'shop.db'}")
    await page.get_by_role("button", name="Attach").click()
    await page.locator("#db-result").filter(has_text="Attached shop").wait_for()

    # The knowledge graph's communities of the sample corpus, filtered.
    await page.goto(ui_stack.gateway_url + "/ui/#/libraries/default")
    await page.get_by_role("button", name="Load the graph").click()
    communities = page.locator("[data-testid=community]")
    await communities.first.wait_for()
    everything = await communities.count()
    await page.get_by_label("Filter communities").fill("zzz-no-such-entity")
    assert await communities.count() == 0 < everything
    await accessible(page, "libraries (graph)")


@needs_browser
async def test_a_reader_sees_no_admin_tools_and_is_told_why_an_upload_fails(
    ui_stack: Stack, page: Any
) -> None:
    await sign_in(page, ui_stack.gateway_url, key=READER_KEY, path="/ui/#/libraries/default")
    await page.locator("#library-detail").wait_for()
    assert (await page.locator("#who").inner_text()) == "Signed in"
    assert await page.locator("#admin-databases").is_hidden()
    await page.locator("#upload-input").set_input_files(
        [{"name": "nope.md", "mimeType": "text/markdown", "buffer": b"# No\n\nNot allowed.\n"}]
    )
    await page.locator("#notice").filter(has_text="may not add documents").wait_for()


@needs_browser
async def test_the_trace_view_opens_from_its_link_and_by_address(
    ui_stack: Stack, page: Any, chromium: Any
) -> None:
    await sign_in(page, ui_stack.gateway_url)
    turn = await ask(page, "What is the default gateway port?")
    link = turn.locator("[data-testid=trace-link]")
    trace_id = (await link.inner_text()).split()[-1]
    await link.click()
    await page.wait_for_url(f"**/ui/#/trace/{trace_id}")
    view = page.locator("[data-testid=trace]")
    await view.wait_for()
    assert await view.locator("[data-testid=trace-id]").inner_text() == trace_id
    assert await view.locator("[data-testid=trace-route]").inner_text()
    assert await view.locator("[data-testid=trace-tools] tbody tr").count() >= 1
    assert "8080" in await view.inner_text()
    await accessible(page, "trace")
    await shot(page, "trace")

    # Linkable: a new tab (no key yet) signs in and lands on the trace.
    context = await chromium.new_context()
    other = await context.new_page()
    await sign_in(other, ui_stack.gateway_url, path=f"/ui/#/trace/{trace_id}")
    await other.locator("[data-testid=trace-id]").filter(has_text=trace_id).wait_for()
    await context.close()


@needs_browser
async def test_feedback_is_stored_with_the_trace_id(ui_stack: Stack, page: Any) -> None:
    await sign_in(page, ui_stack.gateway_url)
    turn = await ask(page, "What is BM25?")
    trace_id = (await turn.locator("[data-testid=trace-link]").inner_text()).split()[-1]
    await turn.locator("[data-testid=thumb-down]").click()
    await turn.get_by_label("Comment (optional)").fill("Too short for me.")
    await turn.locator("[data-testid=feedback-send]").click()
    await turn.locator("[data-testid=feedback-status]").filter(has_text="stored").wait_for()
    async with httpx.AsyncClient(base_url=ui_stack.gateway_url, timeout=30, headers=ADMIN) as client:
        stored = (await client.get("/v1/feedback")).json()["feedback"]
    mine = [f for f in stored if f["trace_id"] == trace_id]
    assert len(mine) == 1 and mine[0]["rating"] == "down" and mine[0]["comment"] == "Too short for me."
    assert mine[0]["principal"] == "ui-admin" and mine[0]["question"] == "What is BM25?"


@needs_browser
async def test_a_markdown_image_in_a_document_loads_nothing(ui_stack: Stack, page: Any) -> None:
    with browser.listening() as listener:
        leak = f"http://127.0.0.1:{listener.port}"
        document = (
            "# Harbour lights\n\n"
            f"The Vellmar harbour light shines green every ninety seconds. ![x]({leak}/leak) "
            f"The keeper's log is kept [here]({leak}/link) and ![pixel]({leak}/pixel.png).\n"
        )
        await sign_in(page, ui_stack.gateway_url, path="/ui/#/libraries/leaky")
        await page.locator("#upload-input").set_input_files(
            [{"name": "harbour.md", "mimeType": "text/markdown", "buffer": document.encode()}]
        )
        stage = page.locator("[data-testid=upload][data-name='harbour.md'] [data-testid=upload-stage]")
        await indexed(stage)

        await page.goto(ui_stack.gateway_url + "/ui/#/ask")
        await page.locator("#ask-library option[value=leaky]").wait_for(state="attached")
        turn = await ask(page, "How often does the Vellmar harbour light shine green?", library="leaky")
        assert "ninety seconds" in await turn.locator("[data-testid=answer]").inner_text()
        await turn.locator("[data-testid=citation]").first.click()
        passage = page.locator("#evidence [data-testid=cited-passage]")
        await passage.wait_for()
        assert f"{leak}/leak" in await passage.inner_text()  # shown as text
        await page.wait_for_timeout(500)
        answer_and_evidence = await page.evaluate(
            f'document.querySelectorAll(\'img[src*="{listener.port}"], a[href*="{listener.port}"]\').length'
        )
        assert answer_and_evidence == 0
        await shot(page, "injected-image")
    assert listener.requests == []


def test_the_wheel_carries_the_ui(tmp_path: Path) -> None:
    import subprocess
    import sys
    import zipfile

    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "-q", "-w", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = tmp_path.glob("ragstack-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {
        f"gateway/{p.relative_to(ROOT / 'gateway').as_posix()}" for p in STATIC.rglob("*") if p.is_file()
    }
    assert "gateway/static/index.html" in expected and expected <= names


@needs_browser
async def test_withheld_and_weak_answers_say_why(ui_stack: Stack, page: Any) -> None:
    await sign_in(page, ui_stack.gateway_url)
    turn = await ask(page, "What is the capital of Mongolia?")
    withheld = turn.locator("[data-testid=withheld]")
    assert "No answer was drafted" in await withheld.inner_text()
    assert await turn.locator("[data-testid=citation]").count() >= 1  # the sources stay listed

    # Whether a question's evidence grades ambiguous moves with the corpus and the ranking: the
    # gateway's real stream for a question, with its evidence graded ambiguous on the way.
    question = {"question": "What is the default gateway port?", "skip_memory": True}
    async with httpx.AsyncClient(base_url=ui_stack.gateway_url, timeout=60, headers=ADMIN) as client:
        real = (await client.post("/v1/query", json=question)).text
    assert "event: evidence" in real
    weakened = re.sub(r'"grade": "correct", "score": [0-9.e-]+', '"grade": "ambiguous", "score": 0.41', real)
    assert '"cut_by": ""' in weakened  # and, as if the LLM had been stopped at its limit:
    weakened = weakened.replace('"cut_by": ""', '"cut_by": "llm.max_output_tokens"')

    async def weak_stream(route: Any) -> None:
        await route.fulfill(status=200, content_type="text/event-stream", body=weakened)

    await page.route("**/v1/query", weak_stream)
    weak = await ask(page, "What is the default gateway port?")
    warning = weak.locator("[data-testid=low-evidence]")
    assert "graded ambiguous, 41%" in await warning.inner_text()
    assert "8080" in await weak.locator("[data-testid=answer]").inner_text()
    cut = weak.locator("[data-testid=cut-short]")
    assert "stopped at the server's limit (llm.max_output_tokens)" in await cut.inner_text()
    await accessible(page, "ask (withheld, weak)")
    await shot(page, "withheld-and-weak")


@needs_browser
async def test_a_server_without_keys_needs_no_login(stack: Stack, page: Any) -> None:
    await page.goto(stack.gateway_url + "/ui/")
    await page.locator("#who").filter(has_text="No key needed").wait_for()
    assert await page.locator("#view-ask").is_visible() and await page.locator("#view-login").is_hidden()
    assert await page.locator("#sign-out").is_hidden()
    await page.locator("#ask-library option[value=default]").wait_for(state="attached")
