"""End to end: the History page's Forget buttons in real headless Chromium.

A message's button and a turn's button each ask first (the browser's own
confirmation, which names what the page cannot reach); declining changes
nothing, accepting leaves the tombstone in place of the words.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="no /usr/bin/chromium (apt-get install -y chromium)")
playwright_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
expect = playwright_api.expect

sys.path.insert(0, str(REPO / "tests"))
import rpc_fixtures as F  # noqa: E402

from endless.core.memory import Memory  # noqa: E402
from endless.faces.rpc import start_in_thread  # noqa: E402


def shot(page, name: str) -> None:
    """A screenshot under test-artifacts/ for a person to look at (the assertions are the test)."""
    (REPO / "test-artifacts").mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(REPO / "test-artifacts" / f"history-{name}.png"), full_page=False)


@pytest.fixture
def served(tmp_path):
    memory = F.build(tmp_path, turns=12)
    mid = memory.memory_id
    memory.close()
    s = start_in_thread(F.small_settings(), 0, root=tmp_path, current=mid)
    yield s, tmp_path, mid
    s.stop()


def test_forget_a_message_and_a_turn_from_the_page(served) -> None:
    s, root, mid = served
    with playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                                    args=["--no-sandbox", "--disable-dev-shm-usage"])
        page = browser.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(s.new_url())
        page.wait_for_selector(".turn")
        memory = Memory.open(memory_id=mid, settings=F.small_settings(), root=root, readonly=True)
        target = memory.turn(10).first
        original = memory.message(target).text
        memory.close()
        expect(page.locator(f"#text-{target}")).to_contain_text(original[:30])

        asked: list[str] = []
        answers = ["dismiss", "accept", "accept"]

        def answer(dialog) -> None:
            asked.append(dialog.message)
            getattr(dialog, answers.pop(0))()

        page.on("dialog", answer)
        page.locator(f"#m-{target}").scroll_into_view_if_needed()
        shot(page, "forget-button")
        page.locator(f"#m-{target} button.forget").click()
        expect(page.locator("#status")).to_contain_text("Nothing was forgotten.")
        expect(page.locator(f"#text-{target}")).to_contain_text(original[:30])  # declined: nothing changed

        page.locator(f"#m-{target} button.forget").click()
        expect(page.locator(f"#text-{target}")).to_contain_text("(forgotten on ")
        expect(page.locator(f"#m-{target} button.forget")).to_have_count(0)
        expect(page.locator("#status")).to_contain_text("Forgot 1 message. Forgetting removes the words")
        assert f"message {target}" in asked[0] and "provider" in asked[0] and len(asked) == 2

        page.locator("#turn-9 .turn-meta button.forget").click()
        expect(page.locator("#turn-9 .entry.forgotten")).not_to_have_count(0)
        expect(page.locator("#status")).to_contain_text("Forgot 3 messages. Forgetting removes the words")
        expect(page.locator("#turn-9 .turn-meta button.forget")).to_have_count(0)
        page.locator("#turn-9").scroll_into_view_if_needed()
        shot(page, "forgotten")
        browser.close()
        assert errors == []
    memory = Memory.open(memory_id=mid, settings=F.small_settings(), root=root, readonly=True)
    assert memory.message(target).text.startswith("(forgotten on ")
    assert all(m.text.startswith("(forgotten on ") for m in memory.turn_messages(9))
    memory.close()
