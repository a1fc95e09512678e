"""End to end: the History page in real headless Chromium (Debian's ``/usr/bin/chromium``).

Playwright for Python drives the system browser (``executable_path``; no
browser download).  The app runs on a real uvicorn server on an ephemeral
loopback port, serving three fixture memories: a small one of three chats,
another of one turn, and a long one of 10,000 imported turns.  Screenshots go
to ``test-artifacts/`` in the repository (gitignored), named ``history-*.png``.
"""

from __future__ import annotations

import datetime as dt
import http.server
import re
import sys
import threading
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts"

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(),
                                reason="no /usr/bin/chromium: install Debian's chromium "
                                       "(apt-get install -y chromium) to run the browser tests")
playwright_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed "
                                     "(pip install -e '.[test]')")
expect = playwright_api.expect

sys.path.insert(0, str(REPO / "tests"))
import rpc_fixtures as F  # noqa: E402

from endless.core.store.keys import workspace_key  # noqa: E402
from endless.core.memory import Memory  # noqa: E402
from endless.core.store.messages import Message  # noqa: E402
from endless.core.store.turns import TurnRecord  # noqa: E402
from endless.faces.rpc import start_in_thread  # noqa: E402

# The long memory: 10,000 turns as an import leaves them (each with its own time), about 50 a
# day, five quiet days in the middle, and a 58 KB paste now and then (one just before the newest).
LONG_TURNS = 10_000
LONG_START = F.START - 400 * F.DAY
LONG_STEP = F.DAY / 50
QUIET_FROM, QUIET_DAYS = 5_000, 5
PASTES = {250 + 500 * k for k in range(20)} | {LONG_TURNS - 2}


def long_at(t: int) -> float:
    return LONG_START + t * LONG_STEP + (QUIET_DAYS * F.DAY if t >= QUIET_FROM else 0.0)


def paste(t: int) -> str:
    rows = (f"{t:05d}-{k:04d} INFO worker[{k % 7}] step {k} finished in {k % 97} ms; queue depth {k % 13}"
            for k in range(800))
    return f"Here is the build log of run {t}:\n" + "\n".join(rows)


def build_long(root: Path) -> str:
    """The long memory, committed in batches without planning, then planned once (as an import does)."""
    memory = Memory.open(workspace_key(None, root / "long-ws"), settings=F.small_settings(), root=root)
    records = []
    for t in range(LONG_TURNS):
        at = long_at(t)
        question = paste(t) if t in PASTES else f"Turn {t}: how is the deploy of service {t % 17} going?"
        messages = [Message("user", question, at)]
        if t % 5 == 0:
            messages.append(Message("trace", f"did: shell grep -c deploy svc{t % 17}.log\nresult: {t % 9} lines", at))
        messages.append(Message("reply", f"Service {t % 17} deployed; {t % 9} warnings noted for turn {t}.", at))
        records.append(TurnRecord(f"import-{t // 400}", f"Deploy log {t // 400}", messages, at=at))
    for k in range(0, LONG_TURNS, 2_000):
        memory.commit_turns(records[k:k + 2_000], sync=False, plan=False)
    memory.plan_views(sync=False)
    mid = memory.memory_id
    memory.close()
    return mid


@pytest.fixture(scope="module")
def memories(tmp_path_factory):
    root = tmp_path_factory.mktemp("page")
    first = F.build(root)
    other = Memory.open(workspace_key(None, root / "other-ws"), settings=F.small_settings(), root=root,
                        clock=lambda: F.START - 10 * F.DAY)
    other.commit_turn("o-1", "Other memory chat", [Message("user", "hello from the other memory", F.START - 10 * F.DAY),
                                                   Message("reply", "hi there", F.START - 10 * F.DAY)])
    ids = first.memory_id, other.memory_id, build_long(root)
    first.close()
    other.close()
    return root, ids


@pytest.fixture(scope="module")
def served(memories):
    root, (mid, _, _) = memories
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


def open_page(browser, url: str, width: int = 1100, height: int = 900, **options):
    """A new browser context on ``url``, its page, and the page errors it collects."""
    context = browser.new_context(viewport={"width": width, "height": height}, locale="en-US", **options)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(url)
    return context, page, errors


@pytest.fixture
def page(browser, served):
    context, page, errors = open_page(browser, served.new_url())
    page.wait_for_selector(".turn")
    yield page
    context.close()
    assert errors == [], errors


@pytest.fixture
def long_page(browser, served, memories):
    """The page on the long memory (the address's token first, then the memory by its id)."""
    _, (_, _, long_id) = memories
    context, page, errors = open_page(browser, served.new_url())
    page.wait_for_selector(".turn")
    page.goto(f"{served.base}/?memory={long_id}")
    page.wait_for_selector(f"#turn-{LONG_TURNS - 1}")
    yield page
    context.close()
    assert errors == [], errors


def shot(page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"history-{name}.png"), full_page=False)


def turns_shown(page) -> list[int]:
    return [int(x.split("-")[1]) for x in page.eval_on_selector_all(".turn", "els => els.map(e => e.id)")]


def box(locator) -> dict:
    found = locator.bounding_box()
    assert found is not None, locator
    return found


def toolbar_bottom(page) -> float:
    top = box(page.locator("#top"))
    return top["y"] + top["height"]


def day_title(at: float) -> str:
    """A day as the page titles it in en-US (toLocaleDateString, weekday and month long)."""
    day = dt.datetime.fromtimestamp(at)
    return f"{day:%A}, {day:%B} {day.day}, {day.year}"


def test_turns_by_day_and_paging_back(page, memories):
    _, (mid, _, _) = memories
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
    _, (mid, other, _) = memories
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
    _, (mid, _, _) = memories
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


# -- a long history ---------------------------------------------------------------------------------


def test_a_long_memory_opens_at_its_newest_turn(long_page):
    page = long_page
    assert turns_shown(page) == list(range(LONG_TURNS - 50, LONG_TURNS))
    newest = page.locator(f"#turn-{LONG_TURNS - 1} .entry").last
    expect(newest).to_be_in_viewport()
    viewport = page.viewport_size
    assert box(newest)["y"] + box(newest)["height"] <= viewport["height"] + 1  # its end is on screen
    at_end = page.evaluate("window.scrollY + window.innerHeight - document.documentElement.scrollHeight")
    assert abs(at_end) <= 2
    # Fifty turns with a 58 KB paste among them: a column of a few screens, not of 150,000 pixels.
    assert page.evaluate("document.documentElement.scrollHeight") < 40 * viewport["height"]
    # Each turn under its own day (an import keeps each message's time), not all on the import's day.
    days = page.locator(".day h2").all_text_contents()
    assert days[-1] == day_title(long_at(LONG_TURNS - 1)) and len(days) >= 2
    shot(page, "open-10k")


def test_the_toolbar_stays_on_screen_while_scrolling(long_page):
    page = long_page
    placeholder = page.get_attribute("#query", "placeholder")
    assert "press /" in placeholder
    page.evaluate("window.scrollTo(0, document.documentElement.scrollHeight / 2)")
    expect(page.locator(f"#turn-{LONG_TURNS - 50}")).not_to_be_in_viewport()
    for control in ("#memory", "#query", "#oldest", "#day", "#newest", "#tab-remembers"):
        expect(page.locator(control)).to_be_in_viewport()
    assert box(page.locator("#top"))["y"] == 0
    # The day heading sticks below the toolbar, not under it.
    heading = page.locator(".day h2").last
    assert box(heading)["y"] >= toolbar_bottom(page) - 1
    shot(page, "mid-scroll")
    # Reaching the toolbar by keyboard leaves the page where it is.
    scrolled = page.evaluate("window.scrollY")
    page.focus("#oldest")
    assert page.evaluate("window.scrollY") == scrolled
    page.keyboard.press("/")
    assert page.evaluate("document.activeElement.id") == "query"


def test_jump_to_the_oldest_turn_then_back_to_the_newest(long_page):
    page = long_page
    page.click("#oldest")
    expect(page.locator("#turn-0")).to_be_in_viewport()
    assert turns_shown(page) == list(range(50))
    assert page.locator(".day h2").first.text_content() == day_title(long_at(0))
    assert page.locator("#earlier").is_hidden()
    page.locator("#later").click()
    expect(page.locator("#turn-99")).to_have_count(1)
    assert turns_shown(page) == list(range(100))
    page.click("#newest")
    expect(page.locator(f"#turn-{LONG_TURNS - 1}")).to_be_in_viewport()
    assert page.locator("#later").is_hidden() and turns_shown(page)[0] == LONG_TURNS - 50


def test_jump_to_a_day(long_page):
    page = long_page
    target = 7_321
    key = dt.datetime.fromtimestamp(long_at(target)).strftime("%Y-%m-%d")
    midnight = dt.datetime.strptime(key, "%Y-%m-%d").timestamp()
    first = next(t for t in range(LONG_TURNS) if long_at(t) >= midnight)
    page.fill("#day", key)
    expect(page.locator(f"#turn-{first}")).to_be_in_viewport()
    assert turns_shown(page)[0] == first
    heading = page.locator(f"#turn-{first}").locator("xpath=..").locator("h2")
    assert heading.text_content() == day_title(midnight)
    expect(heading).to_be_in_viewport()
    # Neither under the toolbar nor under its day's heading.
    assert box(heading)["y"] >= toolbar_bottom(page) - 1
    assert box(page.locator(f"#turn-{first}"))["y"] >= box(heading)["y"] + box(heading)["height"] - 1
    assert page.locator("#status").is_hidden()
    shot(page, "day")
    # A quiet day: the next day with turns, and a note saying so.
    quiet = dt.datetime.fromtimestamp(long_at(QUIET_FROM - 1) + 2 * F.DAY).strftime("%Y-%m-%d")
    page.fill("#day", quiet)
    expect(page.locator(f"#turn-{QUIET_FROM}")).to_be_in_viewport()
    expect(page.locator("#status")).to_contain_text("Nothing was said on")
    expect(page.locator("#status")).to_contain_text("next day with turns")
    # The note made the toolbar taller: the turn still lands below it and below its heading.
    heading = page.locator(f"#turn-{QUIET_FROM}").locator("xpath=..").locator("h2")
    assert box(heading)["y"] >= toolbar_bottom(page) - 1
    assert box(page.locator(f"#turn-{QUIET_FROM}"))["y"] >= box(heading)["y"] + box(heading)["height"] - 1
    shot(page, "quiet-day")


def test_a_long_message_is_collapsed_and_opens_in_place(long_page):
    page = long_page
    whole = paste(LONG_TURNS - 2)
    entry = page.locator(f"#turn-{LONG_TURNS - 2} .entry.kind-user")
    toggle = entry.locator("button.more")
    expect(toggle).to_have_text(f"Show all {len(whole):,} characters")
    assert toggle.get_attribute("aria-expanded") == "false"
    shown = entry.locator(".text").text_content()
    assert 200 < len(shown) <= 1000 and whole.startswith(shown)
    entry.scroll_into_view_if_needed()
    shot(page, "collapsed")
    toggle.click()
    expect(toggle).to_have_attribute("aria-expanded", "true")
    assert entry.locator(".text").text_content() == whole
    expect(toggle).to_have_text(re.compile(r"^Show less"))
    page.evaluate(f"document.getElementById('turn-{LONG_TURNS - 2}').scrollIntoView()")
    shot(page, "opened")
    page.evaluate("window.scrollBy(0, 4000)")  # read on, far down the paste
    expect(toggle).to_be_in_viewport()  # the way to close it stays at hand
    toggle.click()
    expect(toggle).to_have_attribute("aria-expanded", "false")
    assert len(entry.locator(".text").text_content()) == len(shown)
    expect(entry.locator(".entry-kind")).to_be_in_viewport()  # back at its start


def test_a_hit_in_the_closed_part_of_a_long_message_opens_it(page):
    entry = page.locator("#turn-12 .entry.kind-user")
    toggle = entry.locator("button.more")
    expect(toggle).to_have_attribute("aria-expanded", "false")  # the 700-word paste of the fixture
    page.fill("#query", "line650")
    page.keyboard.press("Enter")
    expect(toggle).to_have_text(re.compile(r"\(1 more highlighted\)$"))  # said while it is closed
    page.locator("#hits li .hit").first.click()
    expect(toggle).to_have_attribute("aria-expanded", "true")
    expect(entry.locator("mark")).to_have_text("line650")
    expect(entry.locator("mark")).to_be_in_viewport()


def test_a_long_view_is_drawn_a_batch_at_a_time(long_page):
    page = long_page
    page.click("#tab-remembers")
    lines = page.locator("#lines > li.line")
    expect(lines).to_have_count(500)
    more = page.locator("#lines > li.more-lines button")
    expect(more).to_have_text(re.compile(r"^Show the next 500 lines \([\d,]+ more\)$"))
    more.click()
    expect(lines).to_have_count(1000)
    assert lines.nth(999).locator(".line-name").text_content() != lines.nth(499).locator(".line-name").text_content()


def test_remembers_opens_at_its_top_and_conversation_keeps_its_place(page):
    left_at = page.evaluate("window.scrollY")
    assert left_at > 300  # the conversation opened at its newest turn, far down
    page.click("#tab-remembers")
    expect(page.locator("#remembers-hint")).to_be_in_viewport()
    assert page.evaluate("window.scrollY") == 0
    shot(page, "remembers-top")
    page.click("#tab-conversation")
    assert abs(page.evaluate("window.scrollY") - left_at) <= 1


def test_search_hits_are_laid_out_in_columns(page):
    page.fill("#query", F.MARKER)
    page.keyboard.press("Enter")
    hit = page.locator("#hits li .hit").first
    hit.wait_for()
    number, meta, snippet = (box(hit.locator(part)) for part in (".hit-n", ".hit-meta", ".hit-snippet"))
    assert abs(number["y"] - meta["y"]) <= 3  # the number beside the meta line, not the snippet
    assert snippet["y"] >= meta["y"] + meta["height"] - 1  # the snippet under the meta line
    assert abs(snippet["x"] - meta["x"]) <= 1  # both in one column, right of the numbers
    assert number["x"] + number["width"] <= meta["x"]
    expect(page.locator("#hits-box")).to_be_in_viewport()  # in the toolbar, wherever the page is
    shot(page, "search-hits")


def test_a_pattern_is_highlighted_inside_tool_traces(page):
    # ^ and $ match at each line, as the server reads the pattern; traces are several lines.
    page.fill("#query", r"/^result: \d+\.md$/")
    page.keyboard.press("Enter")
    page.locator("#hits li .hit").first.wait_for()
    marks = page.locator(".kind-trace .text mark")
    expect(marks.first).to_be_visible()
    assert all(re.fullmatch(r"result: \d+\.md", m) for m in marks.all_text_contents())
    assert marks.count() == page.locator(".kind-trace").count()


def test_readable_at_phone_width(browser, served):
    context, page, errors = open_page(browser, served.new_url(), width=375, height=740, is_mobile=True)
    page.wait_for_selector(".turn")
    assert page.evaluate("document.documentElement.scrollWidth") <= 375
    placeholder = page.get_attribute("#query", "placeholder")
    assert "/pattern/" in placeholder and len(placeholder) <= 28  # whole in a phone's search box
    for control in ("#memory", "#query", "#oldest", "#day", "#newest", "#tab-remembers"):
        found = box(page.locator(control))
        assert found["x"] >= 0 and found["x"] + found["width"] <= 375, control
    assert box(page.locator("#memory"))["width"] >= 200  # the picker is not squeezed to nothing
    assert box(page.locator("#top"))["height"] < 740 / 3  # the toolbar leaves room to read
    expect(page.locator(".turn").last).to_be_in_viewport()
    shot(page, "phone")
    page.fill("#query", F.MARKER)
    page.keyboard.press("Enter")
    page.locator("#hits li .hit").first.wait_for()
    assert page.evaluate("document.documentElement.scrollWidth") <= 375
    shot(page, "phone-search")
    page.click("#tab-remembers")
    page.locator("#lines > li.line").first.wait_for()
    assert page.evaluate("document.documentElement.scrollWidth") <= 375
    shot(page, "phone-remembers")
    context.close()
    assert errors == [], errors


# -- empty and error states -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def empty_served(tmp_path_factory):
    s = start_in_thread(F.small_settings(), 0, root=tmp_path_factory.mktemp("empty"))
    yield s
    s.stop()


def test_no_memory_yet_says_how_to_make_one(browser, empty_served):
    context, page, errors = open_page(browser, empty_served.new_url())
    guide = page.locator("#no-memory")
    expect(guide).to_be_visible()
    expect(guide).to_contain_text("endless import FILE")
    expect(guide).to_contain_text("endless chat")
    expect(guide).to_contain_text("endless hermes install")
    expect(page.locator("#memory")).to_be_disabled()
    shot(page, "empty-no-memory")
    page.keyboard.press("/")
    page.keyboard.type("deploy")
    page.keyboard.press("Enter")
    expect(page.locator("#status")).to_contain_text("There is no memory to read yet")
    assert "memoryId" not in page.locator("#status").text_content()
    page.click("#oldest")
    expect(page.locator("#status")).to_contain_text("endless import FILE")
    page.click("#tab-remembers")
    expect(guide).to_be_visible()
    context.close()
    assert errors == [], errors


def test_a_stopped_server_says_how_to_start_it_again(browser, memories):
    root, (mid, _, _) = memories
    s = start_in_thread(F.small_settings(), 0, root=root, current=mid)
    try:
        context, page, errors = open_page(browser, s.new_url())
        page.wait_for_selector(".turn")
    finally:
        s.stop()
    page.click("#oldest")
    status = page.locator("#status")
    expect(status).to_contain_text("not answering")
    expect(status.locator("code")).to_have_text("endless serve")
    assert "Failed to fetch" not in status.text_content()
    expect(status).to_be_in_viewport()
    shot(page, "empty-server-gone")
    context.close()
    assert errors == [], errors


def test_an_address_without_a_token_says_how_to_get_one(browser, served):
    context, page, errors = open_page(browser, served.base + "/")
    expect(page.locator("h1")).to_have_text("Open the History page with its address")
    expect(page.locator("main")).to_contain_text("endless serve")
    expect(page.locator("main")).to_contain_text("/endless history")
    shot(page, "empty-no-token")
    response = page.goto(served.base + "/somewhere")
    assert response.status == 404 and "script-src 'self'" in response.headers["content-security-policy"]
    expect(page.locator("h1")).to_have_text("There is no page at this address")
    expect(page.locator("main")).to_contain_text("endless serve")
    context.close()
    assert errors == [], errors


def test_an_expired_address_says_how_to_get_a_new_one(browser, served):
    import time

    keys = served.app.state.endless.keys
    stale = served.new_url()
    made = time.monotonic()
    keys.clock = lambda: made + served.app.state.endless.settings.rpc_page_token_seconds + 1
    try:
        context, page, errors = open_page(browser, stale)
    finally:
        keys.clock = time.monotonic
    expect(page.locator("h1")).to_have_text("This address has expired")
    expect(page.locator("main")).to_contain_text("10 minutes")
    expect(page.locator("main")).to_contain_text("endless serve")
    expect(page.locator("main")).to_contain_text("/endless history")
    assert page.locator(".turn").count() == 0
    shot(page, "expired-address")
    page.goto(served.new_url())  # a fresh address opens the page in the same browser
    page.wait_for_selector(".turn")
    context.close()
    assert errors == [], errors


def test_a_cut_pattern_search_says_partial_on_the_page(browser, memories):
    """A /pattern/ its time limit cut (a limit too small to search one message): the hits' title says it
    is partial and which messages it searched, not just that it stopped."""
    root, (mid, _, _) = memories
    server = start_in_thread(F.small_settings(regex_seconds=1e-9), 0, root=root, current=mid)
    try:
        context, page, errors = open_page(browser, server.new_url())
        page.wait_for_selector(".turn")
        page.fill("#query", "/ZebraCrossing/")
        page.keyboard.press("Enter")
        title = page.locator("#hits-title", has_text="partial")
        title.wait_for()
        assert "stopped at its time limit before it searched a message" in title.text_content()
        context.close()
        assert errors == [], errors
    finally:
        server.stop()
