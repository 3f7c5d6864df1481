"""The web table (``/play/``) and the API reference (``/docs``) in a real headless
Chromium, against the service as ``ddz serve`` runs it, with its default rate limits (its
lobby seats bots at once; a table rests 30 s between hands, so that the settlement stays
on screen):

- a person plays whole hands against ``hard`` bots at full speed, by clicking, at a
  phone's sizes (360 × 740, 390 × 844) in English and in Chinese: never a 429, never a
  console error, the view read a few times a hand; the cards read at a glance (each
  card's corner drawn whole where the next does not cover it, a finger's 44 × 44 px of
  each, no sideways scroll); the settlement on the first screen, whose numbers are the
  ledger's; the screenshots of docs/screenshots made on the way;
- a reload mid-hand comes back to the same seat: with the answer to a decision held back
  (DevTools' Fetch interception) the page draws the match as it is now, the player acts
  again at once and the seat is never taken over; a decision clicked while the
  connection was down is sent once, after the reload, neither lost nor made twice;
- the page installs (its manifest, icons and service worker, which keeps the shell and
  never the API) and tells a player in another tab that it is their turn;
- two browsers at one private table see each other's plays and never each other's cards;
- the Chinese page shows the bidding and the settlement in Chinese (at a desktop's size);
- /docs draws the contract with no request leaving the machine.

Screenshots go to DDZ_TEST_SCREENSHOTS when it is set (``DDZ_TEST_SCREENSHOTS=docs/screenshots``
makes the README's again)."""

from __future__ import annotations

import json
import re
import time
import urllib.parse
import urllib.request
from collections import Counter
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest
from browsers import DESKTOP, PHONE, chromium, requested, screenshots
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from servers import OPERATOR_TOKEN, claimed_redis_db, ddz_serve, fresh_database

# Slow: starts a service and browsers.
pytestmark = pytest.mark.slow

DECISIONS = {"bid", "show_hand", "report", "play", "pass"}
#: The phones the table is drawn for: a small Android's and an iPhone's screen.
PHONES = [(360, 740), (390, 844)]


@pytest.fixture(scope="module")
def base_url(postgres_admin_url, redis_server, tmp_path_factory):
    """``ddz serve`` as a player meets it: its default rate limits (20 reads a second per
    token among them), bots seated at once by the lobby."""
    with (
        fresh_database(postgres_admin_url, "ddz_play") as database_url,
        claimed_redis_db(redis_server) as redis_url,
        ddz_serve(
            database_url,
            redis_url,
            tmp_path_factory.mktemp("play"),
            DDZ_LOBBY_BOTS_AFTER="0",
            DDZ_KEEPALIVE_SECONDS="1",
            DDZ_TABLE_NEXT_HAND_SECONDS="30",
        ) as (base, _),
    ):
        yield base


def api(base_url: str, path: str, token: str) -> Any:
    request = urllib.request.Request(base_url + path, headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.loads(answer.read())


def until(what: Callable[[], Any], seconds: float = 60, said: str = "") -> Any:
    """What ``what`` gives once it is truthy (the page draws as answers come)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            found = what()
        except WebDriverException:  # an element redrawn while it was read
            found = None
        if found:
            return found
        assert time.monotonic() < deadline, f"waited {seconds} s for {said or what}"
        time.sleep(0.1)


def shot(driver, name: str) -> None:
    where = screenshots()
    if where is not None:
        driver.save_screenshot(str(where / f"play-{name}.png"))


def player(driver) -> dict:
    """The player the page signed up (its token is in the browser's storage)."""
    return json.loads(driver.execute_script("return localStorage.getItem('ddz.player')"))


def sign_up(driver, base_url: str, name: str, lang: str = "en", path: str = "/play/") -> None:
    separator = "&" if "?" in path else "?"
    driver.get(f"{base_url}{path}{separator}lang={lang}")
    until(lambda: driver.find_elements(By.ID, "name"), said="the sign-up form")
    driver.find_element(By.ID, "name").send_keys(name)
    driver.find_element(By.ID, "start").click()


def enabled(driver, selector: str) -> list:
    return [b for b in driver.find_elements(By.CSS_SELECTOR, selector) if b.is_enabled()]


def my_turn(driver) -> bool:
    """The page says it is the player's turn, and has what it needs to decide (the legal
    plays, on a turn to play)."""
    try:
        return bool(
            driver.find_elements(
                By.CSS_SELECTOR, '#controls.mine:not([aria-busy="true"]) button:enabled'
            )
        )
    except WebDriverException:
        return False


def decide(
    driver, by_keyboard: bool = False, bids: list[str] | None = None, bid_high: bool = False
) -> str | None:
    """One decision, as a person makes it by clicking: no bid (the first value offered;
    ``bid_high``: the highest), the hand kept hidden, no 报到, a legal play (the first
    hint; from the keyboard, its cards chosen again one by one and played with Enter), or
    a pass. ``bids`` collects the bid buttons' words. None when the page was redrawn
    meanwhile (decide again)."""
    try:
        take_back = enabled(driver, "#resume")
        if take_back:
            take_back[0].click()
            return "resume"
        offered = enabled(driver, "[data-bid]")
        if offered:
            if bids is not None:
                bids += [b.text for b in offered]
            offered[-1 if bid_high else 0].click()
            return "bid"
        for selector, action in (
            ('[data-show-hand="false"]', "show_hand"),
            ('[data-report="decline"]', "report"),
        ):
            buttons = enabled(driver, selector)
            if buttons:
                buttons[0].click()
                return action
        if enabled(driver, "#hint"):
            driver.find_element(By.ID, "hint").click()
            until(lambda: enabled(driver, "#play"), 10, "a legal play chosen")
            if by_keyboard:
                chosen = [
                    c.get_attribute("data-card")
                    for c in driver.find_elements(By.CSS_SELECTOR, ".hand .card.selected")
                ]
                for index in chosen:
                    card = f'[data-card="{index}"]'
                    driver.find_element(By.CSS_SELECTOR, card).send_keys(Keys.SPACE)
                    until(
                        lambda c=card: (
                            driver.find_element(By.CSS_SELECTOR, c).get_attribute("aria-pressed")
                            == "false"
                        )
                    )
                    driver.find_element(By.CSS_SELECTOR, card).send_keys(Keys.SPACE)
                until(lambda: enabled(driver, "#play"), 10, "the play chosen again")
                driver.find_element(By.CSS_SELECTOR, f'[data-card="{chosen[0]}"]').send_keys(
                    Keys.ENTER
                )
            else:
                driver.find_element(By.ID, "play").click()
            return "play"
        driver.find_element(By.ID, "pass").click()
        return "pass"
    except WebDriverException:  # redrawn as it was read: the next look decides
        return None


def play_to_the_end(
    driver, seconds: float = 240, look: Callable[[], None] | None = None, **options
) -> list[str]:
    """Decides each time the page says it is the player's turn, until the settlement;
    ``look`` sees the page before each decision."""
    deadline = time.monotonic() + seconds
    made: list[str] = []
    while not driver.find_elements(By.ID, "settlement"):
        assert time.monotonic() < deadline, f"no settlement after {made}"
        try:
            version = my_turn(driver) and driver.find_element(By.ID, "controls").get_attribute(
                "data-version"
            )
        except WebDriverException:
            continue
        if not version:
            time.sleep(0.05)
            continue
        if look is not None:
            look()
        decided = decide(driver, **options)
        if decided is None:
            continue
        made.append(decided)
        # The page redraws once the answer came (the next decision is another version).
        until(
            lambda v=version: (
                not my_turn(driver)
                or driver.find_element(By.ID, "controls").get_attribute("data-version") != v
            ),
            30,
            "the answer",
        )
    return made


def texts(driver, selector: str) -> list[str]:
    """The words of the elements ``selector`` finds, read at once (the page redraws as
    the service's answers come, so elements found one call earlier may be gone)."""
    return driver.execute_script(
        "return [...document.querySelectorAll(arguments[0])].map(e => e.textContent.trim())",
        selector,
    )


def codes(driver, selector: str) -> list[str]:
    """The codes of the cards ``selector`` finds, read at once."""
    return driver.execute_script(
        "return [...document.querySelectorAll(arguments[0])].map(e => e.dataset.code)", selector
    )


def text(driver, selector: str) -> str:
    (found,) = texts(driver, selector)
    return found


def fits(driver) -> bool:
    return driver.execute_script("return document.documentElement.scrollWidth <= window.innerWidth")


def answers(driver) -> Counter[tuple[int, str]]:
    """The page's requests answered since the last call (the browser's performance log),
    by status and path, ids as ``{id}``."""
    found: Counter[tuple[int, str]] = Counter()
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.responseReceived":
            response = message["params"]["response"]
            path = urllib.parse.urlsplit(response["url"]).path
            found[
                response["status"],
                re.sub(r"[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}", "{id}", path),
            ] += 1
    return found


def console_errors(driver) -> list[dict]:
    return [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]


#: What a person sees of each card of the hand: the part of it a finger reaches (the
#: points where it is the topmost element), and whether each text of its corner (rank,
#: suit) is drawn whole there (every corner of the text's box, and its middle, on the card)
#: and within the card's edges.
SEEN_OF_THE_HAND = """
const hand = document.getElementById('hand');
hand.scrollIntoView({block: 'end'});
const on = (card, x, y) => { const hit = document.elementFromPoint(x, y); return !!hit && card.contains(hit); };
return [...hand.querySelectorAll('.card')].map(card => {
  const box = card.getBoundingClientRect();
  let left = Infinity, right = -Infinity, top = Infinity, bottom = -Infinity, area = 0;
  for (let y = Math.floor(box.top) + 0.5; y < box.bottom; y++) {
    for (let x = Math.floor(box.left) + 0.5; x < box.right; x++) {
      if (on(card, x, y)) {
        area++; left = Math.min(left, x); right = Math.max(right, x);
        top = Math.min(top, y); bottom = Math.max(bottom, y);
      }
    }
  }
  const texts = [...card.querySelectorAll('.rank, .suit')].map(t => {
    const r = t.getBoundingClientRect();
    const points = [[r.left + 0.5, r.top + 0.5], [r.right - 0.5, r.top + 0.5],
      [r.left + 0.5, r.bottom - 0.5], [r.right - 0.5, r.bottom - 0.5],
      [(r.left + r.right) / 2, (r.top + r.bottom) / 2]];
    return {text: t.textContent, drawn: points.every(([x, y]) => on(card, x, y)),
      inside: r.left >= box.left && r.right <= box.right && r.top >= box.top && r.bottom <= box.bottom};
  });
  return {code: card.dataset.code, width: right - left + 1, height: bottom - top + 1, area, texts};
});
"""


def seen_of_the_hand(driver) -> list[dict]:
    """Each card of the hand as a person sees it (:data:`SEEN_OF_THE_HAND`), checked: a
    finger's 44 × 44 px of each card, its rank and suit drawn whole, no text past its
    edges, and no sideways scroll."""
    cards = driver.execute_script(SEEN_OF_THE_HAND)
    assert cards, "no hand"
    for card in cards:
        assert card["width"] >= 44 and card["height"] >= 44, card
        assert card["area"] >= 44 * 44, card
        for shown in card["texts"]:
            assert shown["drawn"] and shown["inside"], (card["code"], shown)
    assert fits(driver), "the hand scrolls sideways"
    return cards


def settle(driver, base_url: str, named: str) -> None:
    """The settlement as the player sees it (photographed as ``named``): on the first
    screen, no sideways scroll, the nets the ledger's once the page says the hand is
    settled."""
    until(
        lambda: driver.find_elements(By.CSS_SELECTOR, '#settlement[data-settled="true"]'),
        60,
        "the hand settled in the ledger",
    )
    shot(driver, named)
    sheet = driver.execute_script(
        "const s = document.getElementById('settlement').getBoundingClientRect();"
        "const e = document.getElementById('settlement');"
        "return {top: s.top, bottom: s.bottom, height: innerHeight,"
        " sideways: e.scrollWidth > e.clientWidth}"
    )
    assert sheet["top"] >= 0 and sheet["bottom"] <= sheet["height"] + 0.5, sheet
    assert not sheet["sideways"] and fits(driver), sheet
    rows = texts(driver, "#nets tbody tr th")
    nets = [Decimal(n) for n in texts(driver, "#nets tbody .net")]
    assert len(rows) == len(nets) == 4
    # The nets shown are the ledger's: the player's is its balance, and the house's cut
    # closes the sum.
    me = api(base_url, "/v1/me", player(driver)["token"])
    (mine,) = [n for row, n in zip(rows, nets) if row.startswith(("You", "你"))]
    assert mine == Decimal(me["balance"])
    assert Decimal(text(driver, "#my-net").split(": ")[1]) == mine
    house = Decimal(text(driver, "#house").split(": ")[1])
    assert sum(nets) + house == 0
    # The multiplier as players read it: an integer, or a decimal whose fraction a tap shows.
    shown = text(driver, "#multiplier-value")
    assert re.fullmatch(r"×\d+(\.\d{1,2})?", shown), shown
    if driver.find_element(By.ID, "multiplier-value").tag_name == "button":
        driver.find_element(By.ID, "multiplier-value").click()
        assert re.fullmatch(r"×\d+/\d+", text(driver, "#multiplier-value"))
    assert texts(driver, "#factors li")


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("size", PHONES, ids=[f"{w}x{h}" for w, h in PHONES])
def test_a_person_plays_a_whole_hand_against_hard_bots_on_a_phone(base_url, size, lang):
    width, height = size
    named = f"{width}x{height}-{lang}"
    with chromium(size) as driver:
        sign_up(driver, base_url, f"pat-{named}", lang=lang)
        until(lambda: driver.find_elements(By.ID, "level"), said="the lobby")
        driver.find_element(By.CSS_SELECTOR, '#level option[value="hard"]').click()
        driver.find_element(By.ID, "quick").click()
        until(lambda: driver.find_elements(By.CSS_SELECTOR, "#hand .card"), said="a hand dealt")
        assert len(driver.find_elements(By.CSS_SELECTOR, ".seat")) == 4
        # The hand as dealt, the player's bid, the first turn to play (the landlord's 33
        # cards, or 25): seen as a person sees them, and photographed for docs/screenshots.
        seen = {"dealt": len(seen_of_the_hand(driver))}
        shot(driver, f"{named}-bidding")

        def look() -> None:
            if "bid" not in seen and enabled(driver, "[data-bid]"):
                seen["bid"] = len(seen_of_the_hand(driver))
                shot(driver, f"{named}-bidding")
            if "play" not in seen and enabled(driver, "#hint"):
                seen["play"] = len(seen_of_the_hand(driver))
                shot(driver, f"{named}-play")

        made = play_to_the_end(driver, look=look, bid_high=True)
        assert made, "the player decided nothing"
        settle(driver, base_url, f"{named}-settlement")
        every = answers(driver)
        # Never throttled by itself: no 429, nothing in the console; the view read a few
        # times a hand (the stream's events folded in between), not after every event.
        assert not [k for k in every if k[0] == 429], every
        assert console_errors(driver) == []
        views = every[200, "/v1/matches/{id}"]
        assert views <= 12, every
        print(f"{named}: cards in hand {seen}, {len(made)} decisions")
        print(f"{named}: {dict(every)}")
        # Neutral words for normal events; no bomb limit where there is none; nobody
        # waited for with every seat taken.
        page = driver.find_element(By.TAG_NAME, "body").text
        assert not any(
            w in page for w in ("no limit", "不限", "Waiting for players", "等待其他玩家")
        )

        # Leaving between hands: back to the lobby. The sheet may be drawn again between
        # finding its button and clicking it: then the new button is clicked.
        until(
            lambda: driver.find_element(By.ID, "leave-after").click() or True,
            said="the button to leave after the hand",
        )
        until(lambda: driver.find_elements(By.ID, "quick"), said="the lobby after leaving")
        assert text(driver, "#message") in ("You left the table.", "你已离开牌桌。")
        assert "info" in driver.find_element(By.ID, "message").get_attribute("class")


def decisions_of(base_url: str, match_id: str, seat: int) -> list[int]:
    """The versions at which the seat's decisions were taken (each event's version − 1)."""
    events = api(base_url, f"/v1/admin/matches/{match_id}/events", OPERATOR_TOKEN)["events"]
    return [
        e["version"] - 1
        for e in events
        if e["type"] in DECISIONS
        and e["payload"].get("seat") == seat
        and e["payload"].get("by") == "player"
    ]


def at_the_first_turn(driver, base_url: str, name: str) -> tuple[str, str, dict]:
    """A player signed up as ``name``, at a quick match, at its first turn: its token, the
    match and its view (from the API)."""
    sign_up(driver, base_url, name)
    until(lambda: driver.find_elements(By.ID, "quick"), said="the lobby").pop().click()
    until(lambda: my_turn(driver), 120, "the player's turn")
    token = player(driver)["token"]
    (table,) = api(base_url, "/v1/me/tables", token)["tables"]
    match_id = api(base_url, table["path"], token)["match_id"]
    return token, match_id, api(base_url, f"/v1/matches/{match_id}", token)


def test_a_reload_mid_hand_returns_to_the_seat_and_a_decision_is_sent_once(base_url):
    with chromium(PHONE) as driver:
        token, match_id, view = at_the_first_turn(driver, base_url, "rey")
        seat, version = view["seat"], view["version"]
        assert codes(driver, "#hand .card") == view["hand"]

        # The connection drops; the decision is clicked; the page is reloaded once the
        # connection is back, before the page sent the decision again itself.
        driver.execute_cdp_cmd("Network.enable", {})
        offline = {"offline": True, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1}
        driver.execute_cdp_cmd("Network.emulateNetworkConditions", offline)
        decide(driver)
        assert driver.execute_script("return localStorage.getItem('ddz.pending')")
        assert decisions_of(base_url, match_id, seat) == []
        driver.execute_cdp_cmd("Network.emulateNetworkConditions", {**offline, "offline": False})
        driver.refresh()

        # The same seat, the same hand, and the decision taken, once.
        until(lambda: decisions_of(base_url, match_id, seat) == [version], 30, "the decision")
        until(lambda: driver.find_elements(By.CSS_SELECTOR, "#hand .card"), said="the hand again")
        bottom = driver.execute_script("return document.querySelector('.seat.bottom').dataset.seat")
        assert bottom == str(seat)
        assert text(driver, ".seat.bottom .name") == "You (rey)"
        after = api(base_url, f"/v1/matches/{match_id}", token)
        until(
            lambda: (
                codes(driver, "#hand .card")
                == api(base_url, f"/v1/matches/{match_id}", token)["hand"]
            ),
            10,
            "the hand as the service has it",
        )
        assert driver.execute_script("return localStorage.getItem('ddz.pending')") is None
        shot(driver, "phone-after-reload")

        # Reloaded again: nothing is sent twice.
        driver.refresh()
        until(lambda: driver.find_elements(By.CSS_SELECTOR, "#hand .card"), said="the hand again")
        time.sleep(1)
        assert decisions_of(base_url, match_id, seat)[0] == version
        assert decisions_of(base_url, match_id, seat).count(version) == 1
        assert after["version"] > version


def test_a_reload_with_the_answer_held_back_draws_the_match_as_it_is_now(base_url):
    """The decision reaches the service, its answer does not reach the page (DevTools
    holds it back), and the page is reloaded: it draws the match as the service has it
    now, the answer the page gets for the decision sent again (the stored first answer)
    draws nothing older, the player acts at once, and the seat is never the system's."""
    with chromium(PHONE) as driver:
        token, match_id, view = at_the_first_turn(driver, base_url, "hal")
        seat, version = view["seat"], view["version"]

        # Every command's answer held back in the browser, once the service has answered.
        held = {"urlPattern": "*/commands", "requestStage": "Response"}
        driver.execute_cdp_cmd("Fetch.enable", {"patterns": [held]})
        until(lambda: decide(driver), 10, "a decision clicked")
        until(lambda: decisions_of(base_url, match_id, seat) == [version], 30, "the decision")
        assert driver.execute_script("return localStorage.getItem('ddz.pending')")
        # The held answer dies with the page; the reloaded page's requests go through.
        nothing = {"urlPattern": "*/nothing-is-held-back", "requestStage": "Response"}
        driver.execute_cdp_cmd("Fetch.enable", {"patterns": [nothing]})
        driver.refresh()

        # The page shows the version the service is at, and when it is the player's turn
        # there, the player may act at once.
        def as_the_service_has_it() -> bool:
            now = api(base_url, f"/v1/matches/{match_id}", token)
            shown = driver.execute_script(
                "const c = document.getElementById('controls');"
                "return c && {version: Number(c.dataset.version),"
                " mine: c.classList.contains('mine')}"
            )
            mine = now["turn"] == seat and bool(now["actions"])
            return bool(shown) and shown == {"version": now["version"], "mine": mine}

        until(as_the_service_has_it, 30, "the match as the service has it")
        # The decision sent again is answered (and forgotten) a moment after the view drawn.
        until(
            lambda: driver.execute_script("return localStorage.getItem('ddz.pending')") is None,
            10,
            "the pending decision answered",
        )
        shot(driver, "phone-after-held-answer")
        # The hand may end with no other turn of the player's (a landlord's 报到 then 不打
        # ends it at once): every turn it has is the player's own, decided from the page.
        made = play_to_the_end(driver)

        # Each decision once; the seat never the system's (no deadline missed).
        decided = decisions_of(base_url, match_id, seat)
        assert decided[0] == version and len(decided) == len(set(decided)) == 1 + len(made)
        events = api(base_url, f"/v1/admin/matches/{match_id}/events", OPERATOR_TOKEN)["events"]
        assert not [e for e in events if e["type"] == "disconnect"], "the seat was taken over"
        by_the_system = [
            e
            for e in events
            if e["type"] in DECISIONS
            and e["payload"].get("seat") == seat
            and e["payload"].get("by") != "player"
        ]
        assert by_the_system == [], "the system decided for the player"
        assert console_errors(driver) == []
        every = answers(driver)
        assert not [k for k in every if k[0] >= 400], every


def in_the_background(driver, hidden: bool) -> None:
    """The page's tab put in the background (another tab in front) or back: what the
    page reads of its visibility, and the event it is told by. (Headless Chromium draws
    every tab as if in front.)"""
    driver.execute_script(
        "const hidden = arguments[0];"
        "Object.defineProperty(document, 'hidden', {configurable: true, get: () => hidden});"
        "Object.defineProperty(document, 'visibilityState', {configurable: true,"
        " get: () => hidden ? 'hidden' : 'visible'});"
        "document.dispatchEvent(new Event('visibilitychange'));",
        hidden,
    )


def test_the_table_installs_opens_offline_and_tells_a_player_in_another_tab(base_url):
    with chromium(PHONE) as driver:
        driver.set_script_timeout(30)
        sign_up(driver, base_url, "ivy")
        until(lambda: driver.find_elements(By.ID, "quick"), said="the lobby")
        # Installable: a manifest with the page as its start, and icons the service serves.
        manifest = driver.execute_async_script(
            "const done = arguments[0];"
            "fetch(document.querySelector('link[rel=manifest]').href).then(r => r.json()).then(done)"
        )
        assert manifest["start_url"] == "/play/" and manifest["display"] == "standalone"
        sizes = {icon["sizes"] for icon in manifest["icons"]}
        assert {"192x192", "512x512"} <= sizes
        for icon in manifest["icons"]:
            with urllib.request.urlopen(base_url + icon["src"], timeout=30) as answer:
                assert answer.headers["Content-Type"] == "image/png"
        # Its worker keeps the shell, and never an answer of the API.
        kept = driver.execute_async_script(
            "const done = arguments[0];"
            "navigator.serviceWorker.ready.then(() => caches.keys())"
            ".then(names => Promise.all(names.map(n => caches.open(n).then(c => c.keys()))))"
            ".then(kept => done(kept.flat().map(r => new URL(r.url).pathname)))"
        )
        assert "/play/" in kept and "/static/play/play.js" in kept, kept
        assert not [path for path in kept if path.startswith("/v1/")], kept

        # The player lets the page notify, and plays in another tab: its turn is told in
        # the page's title and by a notification; back in front, the title is the page's.
        driver.execute_cdp_cmd(
            "Browser.grantPermissions", {"permissions": ["notifications"], "origin": base_url}
        )
        driver.refresh()
        until(lambda: driver.find_elements(By.ID, "quick"), said="the lobby").pop().click()
        until(lambda: driver.find_elements(By.CSS_SELECTOR, "#hand .card"), said="a hand dealt")
        # Chromium loses a notification when the notifications shown are read while its
        # showNotification is still under way (as a loaded machine made this test do): the
        # test reads them once the page's call has ended.
        driver.execute_script(
            "window.shown = 0;"
            "const show = ServiceWorkerRegistration.prototype.showNotification;"
            "ServiceWorkerRegistration.prototype.showNotification = function (...args) {"
            "  return show.apply(this, args).then(() => { window.shown += 1; }); };"
        )
        in_the_background(driver, True)
        until(lambda: driver.title.startswith("● Your turn"), 120, "the turn in the title")
        until(lambda: driver.execute_script("return window.shown"), 30, "the notification")
        told = driver.execute_async_script(
            "const done = arguments[0];"
            "navigator.serviceWorker.ready.then(r => r.getNotifications())"
            ".then(shown => done(shown.map(n => n.title)))"
        )
        assert told == ["Your turn"]
        in_the_background(driver, False)
        assert driver.title == "Shanghai Dou Dizhu"
        assert console_errors(driver) == []

        # No network (last: Chromium's emulation holds a stream's events back once it was
        # on): the page opens all the same, and says so.
        driver.execute_cdp_cmd("Network.enable", {})
        offline = {"offline": True, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1}
        driver.execute_cdp_cmd("Network.emulateNetworkConditions", offline)
        driver.refresh()
        until(lambda: driver.find_elements(By.ID, "lost"), 30, "the page, offline")
        assert text(driver, "h1") == "Shanghai Dou Dizhu"


def cards_outside_the_hand(driver) -> list[str]:
    return driver.execute_script(
        "return [...document.querySelectorAll('.card[data-code]')]"
        ".filter(e => !e.closest('#hand')).map(e => e.dataset.code)"
    )


def test_two_browsers_at_a_private_table_see_each_other_s_plays_never_their_cards(base_url):
    with chromium(DESKTOP) as ann, chromium(PHONE) as ben:
        sign_up(ann, base_url, "ann")
        until(lambda: ann.find_elements(By.ID, "bots"), said="the lobby")
        ann.find_element(By.CSS_SELECTOR, '#bots option[value="10"]').click()
        ann.find_element(By.ID, "private").click()
        until(lambda: ann.find_elements(By.ID, "invite-link"), said="the invite")
        link = ann.execute_script("return document.getElementById('invite-link').value")
        assert "invite=" in link and link.startswith(base_url + "/play/?table=")
        sign_up(ben, base_url, "ben", path=link.removeprefix(base_url))
        for driver in (ann, ben):
            until(
                lambda d=driver: d.find_elements(By.CSS_SELECTOR, "#hand .card"), 60, "a hand dealt"
            )
        names = {d: text(d, ".felt") for d in (ann, ben)}
        assert "ben" in names[ann] and "ann" in names[ben]
        shot(ann, "desktop-private")

        seats = {
            d: d.execute_script(
                "return Number(document.querySelector('.seat.bottom').dataset.seat)"
            )
            for d in (ann, ben)
        }
        other = {ann: ben, ben: ann}
        deadline = time.monotonic() + 300
        played = 0
        while not (
            ann.find_elements(By.ID, "settlement") and ben.find_elements(By.ID, "settlement")
        ):
            assert time.monotonic() < deadline
            for driver in (ann, ben):
                if not my_turn(driver) or driver.find_elements(By.ID, "settlement"):
                    continue
                try:
                    plays = enabled(driver, "#hint")
                    if plays:
                        plays[0].click()
                        until(lambda d=driver: enabled(d, "#play"), 10, "a play chosen")
                        cards = codes(driver, "#hand .card.selected")
                        driver.find_element(By.ID, "play").click()
                except WebDriverException:  # redrawn as it was read: look again
                    continue
                if plays:
                    # The other browser shows the play on this seat (at the latest when
                    # the other player is to act, before the round can be over).
                    box = f'[data-played="{seats[driver]}"] .card'
                    until(
                        lambda o=other[driver], b=box, c=cards: (
                            sorted(codes(o, b)) == sorted(c) or o.find_elements(By.ID, "settlement")
                        ),
                        30,
                        "the play on the other page",
                    )
                    played += 1
                else:
                    decide(driver)
                time.sleep(0.3)
            # Never the other's cards: outside its own hand, a page shows only cards every
            # seat may see (played, the marked card, the bottom to its landlord).
            for driver in (ann, ben):
                token = player(driver)["token"]
                view_path = api(base_url, "/v1/me/matches?limit=1", token)["matches"][0]["match_id"]
                view = api(base_url, f"/v1/matches/{view_path}", token)
                public = [c for turn in view["history"] for c in turn["cards"]]
                public += [
                    view["marked_card"],
                    *(view["bottom"] or []),
                    *(view["landlord_hand"] or []),
                ]
                public += view["reported_cards"]
                for code in cards_outside_the_hand(driver):
                    assert code in public, f"{code} shown outside the hand"
            # These reads share the page's token and its limit (600 a minute): unpaced,
            # a long hand of bots' turns ran into 429.
            time.sleep(0.5)
        assert played >= 1
        shot(ben, "phone-private-settlement")


def test_the_chinese_page_shows_bidding_and_settlement_in_chinese(base_url):
    with chromium(DESKTOP) as driver:
        sign_up(driver, base_url, "李雷", lang="zh")
        until(lambda: driver.find_elements(By.ID, "quick"), said="the lobby").pop().click()
        assert driver.find_element(By.TAG_NAME, "html").get_attribute("lang") == "zh-CN"
        until(lambda: driver.find_elements(By.CSS_SELECTOR, ".seat .bid"), 120, "the bids")
        shot(driver, "desktop-zh-bidding")
        bids: list[str] = []
        play_to_the_end(driver, by_keyboard=True, bids=bids)
        # The bids on the seats, and the player's bid buttons when it had a turn to bid.
        shown = texts(driver, ".seat .bid")
        assert shown and set(shown + bids) <= {"不叫", "1 分", "2 分", "3 分"}, (shown, bids)
        shot(driver, "desktop-zh-settlement")
        assert text(driver, "#settlement h2") == "本局结束"
        assert text(driver, "#winner") in ("地主胜", "农民胜")
        assert "倍数" in text(driver, "#multiplier")
        assert texts(driver, "#settlement thead th") == ["玩家", "净得"]
        # How each net was counted, in words, a tap away.
        driver.find_element(By.CSS_SELECTOR, "#counted summary").click()
        for counted in texts(driver, "#counted dd"):
            assert all(w in counted for w in ("输赢", "封顶后", "系统得分", "掉线罚分")), counted


def test_the_api_reference_loads_with_no_request_leaving_the_machine(base_url):
    with chromium(DESKTOP) as driver:
        driver.get(base_url + "/docs")
        until(
            lambda: len(driver.find_elements(By.CSS_SELECTOR, ".opblock")) > 20,
            30,
            "the operations",
        )
        driver.find_elements(By.CSS_SELECTOR, ".opblock-summary")[0].click()
        time.sleep(0.5)
        urls = requested(driver)
        assert base_url + "/openapi.json" in urls
        assert all(u.startswith((base_url + "/", "data:")) for u in urls), urls
        refused = [
            e for e in driver.get_log("browser") if "Content Security Policy" in e["message"]
        ]
        assert refused == []
        shot(driver, "desktop-docs")
