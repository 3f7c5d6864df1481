"""The console in a real headless Chromium (Debian's ``chromium`` and ``chromium-driver``,
which .ci/run installs), driven by Selenium: sign in, find a match, step through its
replay, export the CSV, and an auditor refused the admins' page; on a laptop's window and
a phone's. Screenshots go to DDZ_TEST_SCREENSHOTS when set (else a temporary directory)."""

from __future__ import annotations

import csv
import os
import time
from pathlib import Path

import pytest
from browsers import DESKTOP, headless, started
from handplay import PASSWORDS, seated_hand
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait
from servers import serving

from service.game.explain import PLAY_NAMES

# Slow: starts servers or other processes (bin/test --fast leaves it out).
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def base_url(service):
    with serving(service[0]) as url:
        yield url


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    where = os.environ.get("DDZ_TEST_SCREENSHOTS")
    path = Path(where) if where else tmp_path_factory.mktemp("screenshots")
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture()
def downloads(tmp_path) -> Path:
    return tmp_path


@pytest.fixture()
def browser(downloads):
    options = headless(DESKTOP)
    options.add_experimental_option(
        "prefs",
        {"download.default_directory": str(downloads), "download.prompt_for_download": False},
    )
    driver = started(options)
    driver.implicitly_wait(5)
    yield driver
    driver.quit()


def follow(browser, element) -> None:
    """Clicks a link or a submit button and waits for the next page: the old page's elements
    go stale when it is replaced, and reading them before would race the navigation."""
    old = browser.find_element(By.TAG_NAME, "html")
    element.click()
    WebDriverWait(browser, 10).until(lambda _: gone(old))


def gone(element) -> bool:
    """Whether the page holding ``element`` was replaced. Chromium says so with a stale
    element's error, or (since 156, while the next page loads) with "Node with given id
    does not belong to the document"."""
    try:
        element.is_enabled()
    except WebDriverException:  # StaleElementReferenceException among them
        return True
    return False


def sign_in(browser, base_url: str, name: str, path: str = "/console/") -> None:
    browser.get(base_url + path)
    assert "/console/sign-in" in browser.current_url
    browser.find_element(By.ID, "name").send_keys(name)
    browser.find_element(By.ID, "password").send_keys(PASSWORDS[name])
    follow(browser, browser.find_element(By.ID, "sign-in"))


def visible_step(browser):
    steps = [s for s in browser.find_elements(By.CSS_SELECTOR, "#replay .step") if s.is_displayed()]
    assert len(steps) == 1
    return steps[0]


def test_sign_in_find_a_match_step_through_its_replay_and_export_the_csv(
    base_url, service, browser, downloads, shots
):
    _, played, _ = service
    sign_in(browser, base_url, "otto", "/console/matches")
    assert browser.find_element(By.TAG_NAME, "h1").text == "Matches"
    browser.find_element(By.NAME, "player").send_keys("carol")
    follow(browser, browser.find_element(By.ID, "search"))
    links = browser.find_elements(By.CSS_SELECTOR, "#matches tbody a")
    assert [a.text for a in links] == [played[:8]]
    browser.save_screenshot(str(shots / "1-matches-found.png"))
    follow(browser, links[0])
    assert browser.find_element(By.ID, "verdict").text.startswith("Verified")

    position = browser.find_element(By.ID, "replay-position")
    total = int(position.text.rsplit(" ", 1)[1])
    assert position.text == f"Step 1 of {total}"
    browser.execute_script("document.getElementById('replay').scrollIntoView()")
    first = visible_step(browser)
    assert "dealt" in first.find_element(By.CLASS_NAME, "said").text
    assert len(first.find_elements(By.CLASS_NAME, "seat")) == 4
    assert all("25 cards" in s.text for s in first.find_elements(By.CLASS_NAME, "seat"))
    browser.save_screenshot(str(shots / "2-replay-deal.png"))

    # Forward to the first play: its cards are highlighted, and the multiplier is known.
    step = 1
    while not visible_step(browser).find_elements(By.CSS_SELECTOR, ".card.hit"):
        browser.find_element(By.ID, "replay-next").click()
        step += 1
        assert position.text == f"Step {step} of {total}"
    shown = visible_step(browser)
    said = shown.find_element(By.CLASS_NAME, "said").text
    assert "played" in said
    # The play by the name the players give it, in both languages.
    assert any(f"{zh} {en}" in said for zh, en in PLAY_NAMES.values()), said
    assert shown.find_element(By.CLASS_NAME, "multiplier").text[0].isdigit()
    assert shown.find_elements(By.CSS_SELECTOR, ".seat.acting")
    browser.save_screenshot(str(shots / "3-replay-first-play.png"))
    browser.find_element(By.ID, "replay-previous").click()
    assert position.text == f"Step {step - 1} of {total}"
    # The keyboard steps too: Home and End, and the arrows.
    body = browser.find_element(By.TAG_NAME, "body")
    body.send_keys(Keys.END)
    assert position.text == f"Step {total} of {total}"
    body.send_keys(Keys.HOME)
    assert position.text == f"Step 1 of {total}"
    body.send_keys(Keys.ARROW_RIGHT)
    assert position.text == f"Step 2 of {total}"
    browser.find_element(By.CSS_SELECTOR, "[data-go=last]").click()
    assert position.text == f"Step {total} of {total}"
    assert visible_step(browser).find_element(By.CLASS_NAME, "said").text == "settled in the ledger"

    follow(browser, browser.find_element(By.LINK_TEXT, "Ledger"))
    assert "checks out" in browser.find_element(By.ID, "ledger-verdict").text
    assert len(browser.find_elements(By.CSS_SELECTOR, "#takings rect")) == 60
    browser.save_screenshot(str(shots / "4-ledger.png"))
    browser.find_element(By.ID, "export").click()
    deadline = time.monotonic() + 10
    exported: list[str] = []
    # The file may be there before the download is complete (the rows come as the
    # database's cursor gives them): read it until the hand is in it, or the time is up.
    while played not in exported:
        assert time.monotonic() < deadline, f"the downloaded CSV has no {played}: {exported}"
        time.sleep(0.1)
        for path in downloads.glob("settlements-*.csv"):
            with path.open() as f:
                exported = [row["match_id"] for row in csv.DictReader(f)]


def test_an_auditor_is_refused_the_admins_page_and_an_admin_is_not(
    base_url, service, browser, shots
):
    sign_in(browser, base_url, "otto")
    # No link leads an auditor there; the address itself is refused.
    assert not browser.find_elements(By.LINK_TEXT, "Operators")
    browser.get(base_url + "/console/operators")
    assert browser.find_element(By.TAG_NAME, "h1").text == "Forbidden"
    assert browser.find_element(By.ID, "message").text == "This page is for admins."
    browser.save_screenshot(str(shots / "5-auditor-forbidden.png"))
    follow(browser, browser.find_element(By.XPATH, "//button[text()='Sign out']"))
    sign_in(browser, base_url, "ada")
    follow(browser, browser.find_element(By.LINK_TEXT, "Operators"))
    names = [td.text for td in browser.find_elements(By.CSS_SELECTOR, "#operators td:first-child")]
    assert {"ada", "otto"} <= set(names)


def test_the_console_fits_a_phone(base_url, service, browser, shots):
    _, played, _ = service
    browser.set_window_size(390, 844)
    sign_in(browser, base_url, "otto", f"/console/matches/{played}")
    assert browser.find_element(By.ID, "verdict").is_displayed()
    # Wide tables scroll inside their box; the page itself does not scroll sideways.
    assert browser.execute_script(
        "return document.documentElement.scrollWidth <= window.innerWidth"
    )
    browser.save_screenshot(str(shots / "6-phone-match.png"))
    follow(browser, browser.find_element(By.LINK_TEXT, "Players"))
    assert browser.execute_script(
        "return document.documentElement.scrollWidth <= window.innerWidth"
    )
    browser.save_screenshot(str(shots / "7-phone-players.png"))


def test_an_admin_suspends_a_player_and_corrects_their_balance(base_url, service, browser, shots):
    app, _, _ = service
    client = app.test_client()
    me, path = seated_hand(client, "browsed")
    player_id = client.get("/v1/me", headers=me).json["player_id"]
    sign_in(browser, base_url, "ada", f"/console/players/{player_id}")
    assert browser.find_element(By.ID, "standing").text == "active"
    browser.find_element(By.CSS_SELECTOR, "#actions input[name=reason]").send_keys("cheating")
    follow(browser, browser.find_element(By.ID, "suspend"))
    assert browser.find_element(By.ID, "standing").text == "suspended"
    assert "took over 1 seat of a hand under way" in browser.find_element(By.ID, "message").text
    browser.save_screenshot(str(shots / "8-player-suspended.png"))
    # The player's next command is refused, with a problem that says why.
    r = client.post(f"{path}/commands", json={"action": "pass"}, headers=me)
    assert r.status_code == 403 and r.json["code"] == "player_suspended"
    correct = browser.find_elements(By.CSS_SELECTOR, "#actions form")[1]
    correct.find_element(By.NAME, "amount").send_keys("12.50")
    correct.find_element(By.NAME, "reason").send_keys("goodwill")
    follow(browser, browser.find_element(By.ID, "correct"))
    assert browser.find_element(By.ID, "balance").text == "12.50"
    assert "goodwill (ada)" in browser.find_element(By.ID, "ledger").text
    with app.extensions["ddz"].pool.connection() as conn:
        assert conn.execute("SELECT sum(amount) FROM ledger_entries").fetchone()[0] == 0
    follow(browser, browser.find_element(By.LINK_TEXT, "Audit"))
    trail = browser.find_element(By.ID, "trail").text
    assert "suspend" in trail and "cheating" in trail and "goodwill" in trail


def test_an_operator_switches_to_chinese_and_reads_a_settlement_in_it(
    base_url, service, browser, shots
):
    _, _, left = service
    sign_in(browser, base_url, "otto", f"/console/matches/{left}")
    html = browser.find_element(By.TAG_NAME, "html")
    assert html.get_attribute("lang") == "en"
    follow(browser, browser.find_element(By.ID, "language-zh_Hans_CN"))
    # Back on the same page, in Chinese: the page's language, its chrome, the settlement.
    assert f"/console/matches/{left}" in browser.current_url
    assert browser.find_element(By.TAG_NAME, "html").get_attribute("lang") == "zh-Hans-CN"
    assert browser.find_element(By.TAG_NAME, "h1").text == f"牌局 {left[:8]}"
    nav = [a.text for a in browser.find_elements(By.CSS_SELECTOR, "#nav a")]
    assert nav == ["牌局", "账本", "玩家", "系统", "审计"]
    assert browser.find_element(By.XPATH, "//button[text()='退出']")
    explained = browser.find_element(By.ID, "explained")
    names = [s.text for s in explained.find_elements(By.TAG_NAME, "strong")]
    assert names[:2] == ["倍数", "底分 × 叫分 × 倍数"] and "掉线" in names
    assert "每位农民的输赢" in explained.text and "multiplier" not in explained.text
    rows = [th.text for th in browser.find_elements(By.CSS_SELECTOR, "#settlement tbody th")]
    assert rows == ["输赢", "封顶后", "系统得分", "掉线", "净额", "平台"]
    assert "掉线罚分由 2 号座支付" in browser.find_element(By.ID, "penalised").text
    assert "系统机器人" in browser.find_element(By.ID, "seats").text
    # The replay steps in Chinese, its position written by the page's script.
    browser.execute_script("document.getElementById('replay').scrollIntoView()")
    position = browser.find_element(By.ID, "replay-position")
    total = len(browser.find_elements(By.CSS_SELECTOR, "#replay .step"))
    assert position.text == f"第 1 步，共 {total} 步"
    assert "发牌" in visible_step(browser).find_element(By.CLASS_NAME, "said").text
    browser.find_element(By.ID, "replay-next").click()
    assert position.text == f"第 2 步，共 {total} 步"
    browser.save_screenshot(str(shots / "9-match-in-chinese.png"))
    # The choice holds on the next page, and the switch turns it back.
    follow(browser, browser.find_element(By.LINK_TEXT, "账本"))
    assert browser.find_element(By.TAG_NAME, "h1").text == "账本"
    follow(browser, browser.find_element(By.ID, "language-en"))
    assert browser.find_element(By.TAG_NAME, "html").get_attribute("lang") == "en"
    assert browser.find_element(By.TAG_NAME, "h1").text == "Ledger"
    assert "checks out" in browser.find_element(By.ID, "ledger-verdict").text
    browser.get(f"{base_url}/console/matches/{left}")
    assert "倍数 multiplier" in browser.find_element(By.ID, "explained").text
