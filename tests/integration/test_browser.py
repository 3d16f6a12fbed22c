"""The web page at / in headless Chromium, against the real server: the model id shows, a chat
answer streams in, the stop button cancels, the dashboard updates, and the console stays free
of errors. Takes a screenshot under load into pytest's temporary directory, or to the path in
$TOKAMAK_SCREENSHOT (docs/img/web_ui.png is made that way: a test run leaves the tree as it
was).

Needs Debian's chromium and chromium-driver and the selenium package; skipped without them.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from conftest import MODEL_ID, RawStream, wait_until

try:
    from selenium import webdriver
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
except ImportError:  # the test skips below
    webdriver = None

# Background load for the screenshot: a shared prefix of ~150 tokens (short, for a quick
# prefill), so that the KV map has blocks in use (shared ones where the server caches prefixes).
LOAD_PREFIX = "The tide comes in and the tide goes out along the grey northern shore. " * 10


def _find(*names: str) -> str | None:
    for name in names:
        path = shutil.which(name)
        if path:
            return path
    return None


# Checked at import, so that a machine without a browser skips before a server is started.
CHROMIUM = _find("chromium", "chromium-browser", "google-chrome")
CHROMEDRIVER = _find("chromedriver")
if webdriver is None:
    pytest.skip("selenium is not installed (pip install selenium)", allow_module_level=True)
if not CHROMIUM or not CHROMEDRIVER:
    pytest.skip("the browser test needs chromium and chromedriver "
                "(apt-get install chromium chromium-driver)", allow_module_level=True)


@pytest.fixture(scope="module")
def browser():
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,900"):
        opts.add_argument(arg)
    # Console messages become readable with driver.get_log("browser").
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    try:
        driver = webdriver.Chrome(options=opts, service=webdriver.ChromeService(CHROMEDRIVER))
    except WebDriverException as e:
        pytest.skip(f"chromium could not be started: {e.msg}")
    yield driver
    driver.quit()


@pytest.fixture
def page(browser, server):
    """The page freshly loaded, with the model id shown and one dashboard poll done."""
    server.check_alive()
    browser.get(server.base_url + "/")
    assert wait_until(lambda: text(browser, "model-id") == MODEL_ID, 10), (
        f"model id not shown: {text(browser, 'model-id')!r}")
    assert wait_until(lambda: polls(browser) >= 1, 5), "the dashboard never updated"
    yield browser
    console_errors(browser)  # drop what this test left, so each test sees its own


def text(driver, element_id: str) -> str:
    return driver.find_element(By.ID, element_id).text


def polls(driver) -> int:
    return int(driver.find_element(By.ID, "dash-updated").get_attribute("data-polls") or 0)


def number(driver, element_id: str) -> int:
    """A dashboard number as an integer ("1,234" -> 1234, "13 / 1,024" -> 13; "–" -> -1)."""
    t = text(driver, element_id).split("/")[0].replace(",", "").strip()
    return int(t) if t.isdigit() else -1


def console_errors(driver) -> list[str]:
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def set_generation(driver, *, temperature: float, max_tokens: int) -> None:
    # A range input takes no typed value: set it as a user would leave it, with the event.
    driver.execute_script(
        "const t = document.getElementById('temperature');"
        "t.value = arguments[0]; t.dispatchEvent(new Event('input'));", temperature)
    box = driver.find_element(By.ID, "max-tokens")
    box.clear()
    box.send_keys(str(max_tokens))


def assistant_state(driver) -> dict:
    """The last assistant message: {state, text, chunks, stats} ({} when there is none)."""
    return driver.execute_script("""
        const all = document.querySelectorAll('#messages .msg.assistant');
        const m = all[all.length - 1];
        if (!m) return {};
        return {state: m.dataset.state, text: m.querySelector('.body').textContent,
                chunks: Number(m.dataset.chunks || 0),
                stats: (m.querySelector('.stats') || {}).textContent || ''};""")


def test_chat_streams_and_dashboard_updates(page, server, tmp_path):
    d = page
    requests_before = number(d, "dash-requests")
    gen_before = number(d, "dash-gen-tokens")
    assert requests_before >= 0 and gen_before >= 0, "dashboard totals not shown"

    # Every text the assistant's bubble goes through, recorded in the page itself: the answer
    # may arrive faster than WebDriver can poll it.
    d.execute_script("""
        window.__texts = [];
        new MutationObserver((records) => {
          for (const r of records)  // r.target: the parent when it changed (a node may be gone)
            if (r.target.matches && r.target.matches('.msg.assistant .body'))
              for (const n of r.addedNodes)
                if (n.nodeType === Node.TEXT_NODE) window.__texts.push(n.data);
        }).observe(document.getElementById('messages'), {childList: true, subtree: true});""")

    set_generation(d, temperature=0, max_tokens=40)
    box = d.find_element(By.ID, "chat-input")
    box.send_keys("Write a short poem about the sea.")
    box.send_keys(Keys.ENTER)  # Enter sends

    assert wait_until(lambda: assistant_state(d).get("state") not in (None, "streaming"), 30), (
        "the answer did not finish within 30 s")
    msg = assistant_state(d)
    assert msg["state"] == "done", msg
    assert msg["text"].strip(), "empty answer"
    assert msg["chunks"] >= 2, f"answer not streamed: {msg}"
    texts = d.execute_script("return window.__texts")
    lengths = [len(t) for t in texts if t]
    assert len(set(lengths)) >= 2 and lengths == sorted(lengths), (
        f"the text did not grow piece by piece: {lengths}")
    assert texts[-1] == msg["text"]
    assert "tokens" in msg["stats"] and "TTFT" in msg["stats"], msg["stats"]
    assert d.find_element(By.ID, "send").is_enabled()
    assert not d.find_element(By.ID, "stop").is_enabled()

    # The dashboard's next polls count the request and its tokens.
    updated = text(d, "dash-updated")
    assert wait_until(lambda: number(d, "dash-requests") > requests_before
                      and number(d, "dash-gen-tokens") > gen_before, 5), (
        f"dashboard totals did not increase: requests {text(d, 'dash-requests')}, "
        f"generation tokens {text(d, 'dash-gen-tokens')}")
    assert wait_until(lambda: text(d, "dash-updated") != updated, 5), "dashboard stopped updating"
    assert number(d, "dash-waiting") >= 0 and number(d, "kv-used") >= 0

    # Live load shows: two long requests run while the page polls (and make the screenshot
    # show a busy server). Dropping their connections afterwards cancels them.
    load = [RawStream(server, "/v1/completions",
                      {"model": MODEL_ID, "prompt": LOAD_PREFIX + f"Verse {i}:", "stream": True,
                       "max_tokens": 1000, "ignore_eos": True})
            for i in range(2)]
    try:
        assert all(s.status == 200 for s in load), [s.status for s in load]
        # Waiting while in prefill, then running with KV blocks (slow on a busy machine).
        assert wait_until(lambda: number(d, "dash-running") >= 1 and number(d, "kv-used") > 0, 10), (
            f"dashboard does not show the load: running {text(d, 'dash-running')}, "
            f"KV {text(d, 'kv-used')}")
        time.sleep(1.5)  # more polls, so that the charts show the load
        shot = Path(os.environ.get("TOKAMAK_SCREENSHOT") or tmp_path / "web_ui.png").resolve()
        shot.parent.mkdir(parents=True, exist_ok=True)
        assert d.save_screenshot(str(shot))
        assert 0 < shot.stat().st_size < 300_000
    finally:
        for s in load:
            s.abort()

    errors = console_errors(d)
    assert not errors, f"browser console errors: {errors}"


def test_stop_cancels_the_request(page, server):
    d = page
    server.wait_idle(timeout=10)  # the previous test's load is gone
    set_generation(d, temperature=0.7, max_tokens=2000)
    # Sampling at 0.7 (unseeded) sometimes ends the answer with EOS within a few tokens,
    # before the click lands: such an attempt proves nothing about Stop, so ask again (a few
    # times at most, each in a new chat: an earlier short answer in the history makes the
    # model terser) until one is still streaming when stopped.
    for _ in range(4):
        d.find_element(By.ID, "new-chat").click()
        box = d.find_element(By.ID, "chat-input")
        box.send_keys("Count from 1 to 1000, one number per line.")
        d.find_element(By.ID, "send").click()
        assert wait_until(lambda: assistant_state(d).get("chunks", 0) >= 3
                          or assistant_state(d).get("state") == "done", 15), assistant_state(d)
        if assistant_state(d).get("state") != "done":
            d.find_element(By.ID, "stop").click()
            assert wait_until(lambda: assistant_state(d).get("state") in ("stopped", "done"),
                              5), assistant_state(d)
            if assistant_state(d).get("state") == "stopped":
                break
        server.wait_idle(timeout=10)  # it ended on its own: try again
    assert assistant_state(d).get("state") == "stopped", assistant_state(d)
    assert d.find_element(By.ID, "send").is_enabled()
    assert not d.find_element(By.ID, "stop").is_enabled()
    # The closed connection cancels the request in the server: it goes idle well before 2000
    # tokens could have been generated.
    server.wait_idle(timeout=10)
    # The partial answer stays in the conversation.
    assert assistant_state(d)["text"].strip()

    errors = console_errors(d)
    assert not errors, f"browser console errors: {errors}"
