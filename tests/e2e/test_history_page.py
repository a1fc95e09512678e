"""End to end: the History page in real headless Chromium (Debian's ``/usr/bin/chromium``).

Playwright for Python drives the system browser (``executable_path``; no
browser download).  The app runs on a real uvicorn server on an ephemeral
loopback port, serving two fixture memories.  Screenshots go to
``test-artifacts/history-page/`` in the repository (gitignored).
"""

from __future__ import annotations

import http.server
import re
import sys
import threading
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts" / "history-page"

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(),
                                reason="no /usr/bin/chromium: install Debian's chromium "
                                       "(apt-get install -y chromium) to run the browser tests")
playwright_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed "
                                     "(pip install -e '.[test]')")

sys.path.insert(0, str(REPO / "tests"))
import rpc_fixtures as F  # noqa: E402

from endless.core.keys import workspace_key  # noqa: E402
from endless.core.memory import Memory  # noqa: E402
from endless.core.messages import Message  # noqa: E402
from endless.faces.rpc import start_in_thread  # noqa: E402


@pytest.fixture(scope="module")
def memories(tmp_path_factory):
    root = tmp_path_factory.mktemp("page")
    first = F.build(root)
    other = Memory.open(workspace_key(None, root / "other-ws"), settings=F.small_settings(), root=root,
                        clock=lambda: F.START - 10 * F.DAY)
    other.commit_turn("o-1", "Other memory chat", [Message("user", "hello from the other memory", F.START - 10 * F.DAY),
                                                   Message("reply", "hi there", F.START - 10 * F.DAY)])
    ids = first.memory_id, other.memory_id
    first.close()
    other.close()
    return root, ids


@pytest.fixture(scope="module")
def served(memories):
    root, (mid, _) = memories
    s = start_in_thread(F.small_settings(), 0, root=root, current=mid)
    yield s
    s.stop()


@pytest.fixture(scope="module")
def browser():
    with playwright_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                              args=["--no-sandbox", "--disable-dev-shm-usage"])
        yield b
        b.close()


@pytest.fixture
def page(browser, served):
    context = browser.new_context(viewport={"width": 1100, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(served.new_url())
    page.wait_for_selector(".turn")
    yield page
    context.close()
    assert errors == [], errors


def shot(page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=False)


def turns_shown(page) -> list[int]:
    return [int(x.split("-")[1]) for x in page.eval_on_selector_all(".turn", "els => els.map(e => e.id)")]


def test_turns_by_day_and_paging_back(page, memories):
    _, (mid, _) = memories
    assert page.url.endswith(f"/?memory={mid}")  # the token is gone from the address bar
    assert turns_shown(page) == list(range(10, 60))
    days = page.locator(".day h2").all_text_contents()
    assert len(days) >= 3 and len(set(days)) == len(days)
    first_turn = page.locator("#turn-10")
    assert first_turn.locator(".turn-title").text_content() == F.TITLES[10 % 3]
    assert page.locator("#turn-9").count() == 0
    shot(page, "conversation")
    page.click("#earlier")
    page.wait_for_selector("#turn-0")
    assert turns_shown(page) == list(range(60))
    assert page.locator("#earlier").is_hidden()
    assert page.locator("#turn-9 .status").text_content() == "stopped"
    assert page.locator("#turn-9 .kind-status").count() == 1


def test_search_highlights_in_place(page):
    page.keyboard.press("/")
    assert page.evaluate("document.activeElement.id") == "query"
    page.keyboard.type("ZebraCrossing")
    page.keyboard.press("Enter")
    page.wait_for_selector("#hits li")
    assert page.locator("#hits li").count() == 2
    assert page.locator("#m-93 mark").all_text_contents() == ["zebracrossing"]
    assert page.locator("#hits li").first.locator("mark").all_text_contents() == ["zebracrossing"]
    page.locator("#hits li button").first.click()
    assert "current-hit" in page.locator("#m-93").get_attribute("class")
    shot(page, "search")
    # The older hit's turn is not loaded yet: the page jumps there and offers the way back.
    page.locator("#hits li button").nth(1).click()
    page.wait_for_selector("#m-15.current-hit")
    assert page.locator("#m-15 mark").all_text_contents() == ["zebracrossing"]
    assert page.locator("#newest").is_visible()
    page.click("#newest")
    page.wait_for_selector("#turn-59")
    # A query the server refuses clears the hits and highlights of the one before, and says why.
    page.fill("#query", "/(?:(?:a{1000}){1000}){10}/")
    page.keyboard.press("Enter")
    page.locator("#status", has_text="repeats too much").wait_for()
    assert page.locator("#hits-box").is_hidden() and page.locator("#hits li").count() == 0
    assert page.locator("#m-93 mark").count() == 0
    assert page.input_value("#query") == "/(?:(?:a{1000}){1000}){10}/"
    page.evaluate("window.scrollTo(0, 0)")
    shot(page, "search-refused")


def test_remembers_opens_a_line_down_to_a_message(page):
    page.click("#tab-remembers")
    assert page.locator("#remembers").is_visible() and page.locator("#conversation").is_hidden()
    lines = page.locator("#lines > li.line")
    assert lines.count() > 3
    target = 28  # the long paste: a message in pages
    item = None
    scope = page.locator("#lines")
    while True:
        names = scope.locator(":scope > li.line > button .line-name").all_text_contents()
        chosen = next(k for k, name in enumerate(names)
                      if int(name.split("+")[0]) <= target < int(name.split("+")[0]) + int(name.split("+")[1]))
        item = scope.locator(":scope > li.line").nth(chosen)
        button = item.locator(":scope > button")
        button.focus()
        page.keyboard.press("Enter")  # keyboard: a line is a button
        assert button.get_attribute("aria-expanded") == "true"
        if names[chosen] == f"{target}+1":
            break
        scope = item.locator(":scope > div > ol")
        scope.locator(":scope > li.line").first.wait_for()
        assert scope.locator(":scope > li.line").count() == 2
    card = item.locator(".message")
    card.wait_for()
    assert card.locator(".text").text_content().startswith("A long paste follows. line0 line1")
    assert "page 1 of" in card.locator(".page-of").text_content()
    shot(page, "remembers")
    card.get_by_role("button", name="Next page").click()
    # A locator assertion polls from outside the page: the page's CSP forbids the eval a string predicate needs.
    playwright_api.expect(page.locator("#message-28 .page-of")).to_have_text(re.compile(r"^page 2 of"))
    assert not item.locator(".message .text").text_content().startswith("A long paste")


def test_switch_memory(page, memories):
    _, (mid, other) = memories
    options = page.eval_on_selector_all("#memory option", "els => els.map(e => e.value)")
    assert options[0] == mid and other in options
    page.select_option("#memory", other)
    page.wait_for_selector("text=hello from the other memory")
    assert turns_shown(page) == [0]
    assert page.locator(".turn-title").all_text_contents() == ["Other memory chat"]
    assert page.url.endswith(f"memory={other}")
    page.click("#tab-remembers")
    assert page.locator("#lines > li.line").count() == 2


def test_memory_text_is_never_html(page):
    page.click("#earlier")
    page.wait_for_selector("#m-11")
    assert page.locator("#m-11 .text").text_content() == "Please keep this verbatim: " + F.SCRIPT
    assert page.locator("#m-11 script, #m-11 b").count() == 0
    assert page.evaluate("window.__pwned === undefined")


def test_another_origin_is_refused(page, served, memories):
    _, (mid, _) = memories
    body = {"type": "client-request", "rpcId": 1, "method": "endless.view", "payload": {"args": {"memoryId": mid}}}
    # With the page's cookie (this browser context holds it) but another Origin.
    refused = page.request.post(f"{served.base}/api/endless-ui.view", data=body,
                                headers={"Origin": "http://evil.example"})
    assert refused.status == 403
    allowed = page.request.post(f"{served.base}/api/endless-ui.view", data=body, headers={"Origin": served.base})
    assert allowed.status == 200
    # A real page on another loopback port (same site, so the SameSite cookie is sent) posts to the route.
    evil_html = (f"<script>fetch('{served.base}/api/endless-ui.view', {{method: 'POST', credentials: 'include', "
                 "mode: 'no-cors', headers: {'Content-Type': 'text/plain'}, "
                 f"body: JSON.stringify({{type: 'client-request', rpcId: 1, method: 'endless.view', "
                 f"payload: {{args: {{memoryId: '{mid}'}}}}}})}})</script>").encode()

    class Evil(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(evil_html)

        def log_message(self, *args):
            pass

    evil = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Evil)
    thread = threading.Thread(target=evil.serve_forever, daemon=True)
    thread.start()
    try:
        with page.expect_response(lambda r: "/api/endless-ui.view" in r.url) as caught:
            page.goto(f"http://127.0.0.1:{evil.server_address[1]}/")
        assert caught.value.status == 403
    finally:
        evil.shutdown()
        evil.server_close()


def test_readable_at_phone_width(browser, served):
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True)
    page = context.new_page()
    page.goto(served.new_url())
    page.wait_for_selector(".turn")
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    shot(page, "phone-conversation")
    page.click("#tab-remembers")
    page.locator("#lines > li.line").first.wait_for()
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    shot(page, "phone-remembers")
    context.close()
