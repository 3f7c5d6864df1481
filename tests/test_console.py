"""Operators' accounts and the console without a browser (docs/operations.md): who gets
nothing (a player's token, a signed-out browser, a wrong password), CSRF, the audit trail
of every hidden-data read, and what the pages and the CSV export say."""

from __future__ import annotations

import csv
import getpass
import html
import io
import logging
import re
import socket
import sys
import uuid
from decimal import Decimal
from pathlib import Path

from api_support import OP, bearer
from babel.messages.extract import DEFAULT_KEYWORDS, extract_from_dir
from babel.messages.frontend import parse_mapping_cfg
from babel.messages.mofile import read_mo
from babel.messages.pofile import read_po
from handplay import PASSWORDS, add_operator, play_hand, run_jobs, seated_hand
from jobs import new_player, new_table
from store_support import book_wrong_movement

from service.cli import main
from service.game import explain
from service.game.views import codes_in_order
from service.rules import parse_cards
from service.rules.combinations import CombinationType


def operator_token(name: str, capsys) -> str:
    capsys.readouterr()
    assert main(["operator", "token", name]) == 0
    return capsys.readouterr().out.strip()


def operator_list(capsys) -> str:
    capsys.readouterr()
    assert main(["operator", "list"]) == 0
    return capsys.readouterr().out


def csrf_of(page: str) -> str:
    return re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)


def sign_in(browser, name: str, password: str | None = None):
    """The answer to signing in as ``name`` (with their password unless told another)."""
    token = csrf_of(browser.get("/console/sign-in").get_data(as_text=True))
    return browser.post(
        "/console/sign-in",
        data={"name": name, "password": password or PASSWORDS[name], "csrf_token": token},
    )


def signed_in(app, name: str):
    browser = app.test_client()
    r = sign_in(browser, name)
    assert r.status_code == 302 and r.headers["Location"].endswith("/console/matches")
    return browser


def trail(app) -> list[dict]:
    return app.extensions["ddz"].operators.trail()


def test_an_operator_token_from_the_cli_reads_and_each_read_is_audited(service, capsys):
    app, match_id, _ = service
    client = app.test_client()
    token = operator_token("otto", capsys)
    before = len(trail(app))
    for path in (
        f"/v1/admin/matches/{match_id}/events",
        f"/v1/matches/{match_id}/events?after=0",
        f"/v1/matches/{match_id}/record",
    ):
        assert client.get(path, headers=bearer(token)).status_code == 200, path
    stream = client.get(f"/v1/matches/{match_id}/stream", headers=bearer(token))
    assert stream.status_code == 200
    stream.close()
    # Not hidden data: no entry.
    assert client.get(f"/v1/matches/{match_id}/audit").status_code == 404  # no such route
    assert client.get(f"/v1/admin/matches/{match_id}/audit", headers=bearer(token)).json["ok"]
    newest = trail(app)[: len(trail(app)) - before]
    assert [(t["operator"], t["action"], str(t["match_id"]), t["via"]) for t in newest] == [
        ("otto", action, match_id, "api") for action in ("stream", "record", "events", "events")
    ]
    # The shared token is the bootstrap admin, audited under that name.
    client.get(f"/v1/admin/matches/{match_id}/events", headers=OP)
    assert trail(app)[0]["operator"] == "bootstrap"
    # A page of the console that shows the hands is audited too.
    signed_in(app, "otto").get(f"/console/matches/{match_id}")
    assert (trail(app)[0]["operator"], trail(app)[0]["action"], trail(app)[0]["via"]) == (
        "otto",
        "replay",
        "console",
    )


CONSOLE_PAGES = (
    "/console/",
    "/console/matches",
    "/console/ledger",
    "/console/ledger/settlements.csv?since=2020-01-01&until=2100-01-01",
    "/console/players",
    "/console/system",
    "/console/operators",
)


def test_a_player_a_signed_out_browser_and_a_wrong_password_get_nothing(service):
    app, match_id, _ = service
    client = app.test_client()
    _, player_token = new_player(client, "mallory")
    player = bearer(player_token)
    for path in (f"/v1/admin/matches/{match_id}/events", "/v1/admin/ledger/check"):
        r = client.get(path, headers=player)
        assert r.status_code == 403 and r.json["code"] == "operator_required"
    assert client.get(f"/v1/matches/{match_id}/record", headers=player).status_code == 403
    before = len(trail(app))
    pages = (*CONSOLE_PAGES, f"/console/matches/{match_id}")
    for headers in ({}, player):
        for path in pages:
            r = client.get(path, headers=headers)
            assert r.status_code == 302 and "/console/sign-in" in r.headers["Location"], path
            # Only the way to the sign-in page: no name, card or amount.
            assert not re.search(r"carol|class=\"card|\d\.\d\d", r.text), path
    browser = app.test_client()
    token = csrf_of(browser.get("/console/sign-in").get_data(as_text=True))
    for name, password in (("otto", "not otto's password"), ("nobody", PASSWORDS["otto"])):
        r = browser.post(
            "/console/sign-in", data={"name": name, "password": password, "csrf_token": token}
        )
        assert r.status_code == 401 and "Wrong name or password" in r.get_data(as_text=True)
        assert browser.get("/console/matches").status_code == 302
    assert (
        samples(client, "ddz_console_sign_ins_failed")[
            'ddz_console_sign_ins_failed_total{reason="wrong"}'
        ]
        >= 2
    )
    # Nothing read; the failed sign-ins are in the trail, with the name tried and whence.
    assert len(trail(app)) == before + 2
    assert [(t["operator"], t["action"], t["via"], t["address"]) for t in trail(app)[:2]] == [
        ("nobody", "sign_in_failed", "console", "127.0.0.1"),
        ("otto", "sign_in_failed", "console", "127.0.0.1"),
    ]


def test_csrf_is_enforced_on_every_form(service):
    app, _, _ = service
    browser = app.test_client()
    r = browser.post("/console/sign-in", data={"name": "ada", "password": PASSWORDS["ada"]})
    assert r.status_code == 400 and browser.get("/console/matches").status_code == 302
    admin = signed_in(app, "ada")
    page = admin.get("/console/operators").get_data(as_text=True)
    form = {"name": "eve", "role": "admin", "password": "eve's own passphrase"}
    for token in (None, "forged", csrf_of(signed_in(app, "otto").get("/console/system").text)):
        data = form if token is None else {**form, "csrf_token": token}
        assert admin.post("/console/operators", data=data).status_code == 400
    assert admin.post("/console/sign-out").status_code == 400
    assert admin.get("/console/matches").status_code == 200  # still signed in
    r = admin.post("/console/operators", data={**form, "csrf_token": csrf_of(page)})
    assert r.status_code == 303 and r.headers["Location"].endswith("/console/operators")
    assert "Operator eve added (admin)" in admin.get(r.headers["Location"]).text
    r = admin.post("/console/sign-out", data={"csrf_token": csrf_of(page)})
    assert r.status_code == 302 and admin.get("/console/matches").status_code == 302


def test_an_auditor_reads_every_page_but_the_admins(service):
    app, _, _ = service
    auditor = signed_in(app, "otto")
    for path in CONSOLE_PAGES[:-1]:
        assert auditor.get(path, follow_redirects=True).status_code == 200, path
    r = auditor.get("/console/operators")
    assert r.status_code == 403 and "for admins" in r.text
    assert ">Operators</a>" not in auditor.get("/console/matches").text
    assert ">Operators</a>" in signed_in(app, "ada").get("/console/matches").text
    token = csrf_of(auditor.get("/console/system").text)
    form = {"name": "mole", "role": "admin", "password": "a sneaky passphrase", "csrf_token": token}
    assert auditor.post("/console/operators", data=form).status_code == 403
    assert "mole" not in [o.name for o, _ in app.extensions["ddz"].operators.all()]


def test_the_match_page_shows_the_hand_the_settlement_and_the_replay(service):
    app, match_id, _ = service
    client = app.test_client()
    settlement = client.get(f"/v1/matches/{match_id}/settlement", headers=OP).json
    events = client.get(f"/v1/admin/matches/{match_id}/events", headers=OP).json["events"]
    page = signed_in(app, "otto").get(f"/console/matches/{match_id}").text
    assert 'id="verdict">Verified' in page
    assert all(amount in page for amount in settlement["net"])
    dealt = next(e["version"] for e in events if e["type"] == "hand_dealt")
    assert page.count('class="step"') == len(events) - dealt + 1
    first_step = page.split('class="step"')[1]
    hands = next(e for e in events if e["type"] == "hand_dealt")["payload"]["hands"]
    # The first step shows the deal: all four hands of 25 cards.
    assert first_step.count("cards</div>") == 4 and "25 cards" in first_step
    assert all(f'title="{code}"' in first_step for code in hands[0])
    assert f'multiplier <strong class="multiplier">{settlement["multiplier"]}</strong>' in page
    # Each hand in the order the seats see theirs; jokers and the marked card drawn as
    # cards; every combination has its names.
    seat = first_step.split('class="seat')[1]
    assert re.findall(r'title="([^"]+)"', seat) == codes_in_order(parse_cards(hands[0]))
    assert not re.search(r">\s*[Jj]oker\s*<", page)
    marked = next(e for e in events if e["type"] == "hand_dealt")["payload"]["marked_card"]
    shown = first_step.split('class="marked-card"')[1].split("</span></span>")[0]
    assert f'title="{marked}"' in shown and "C5" not in shown.split(">", 3)[-1]
    assert set(explain.PLAY_NAMES) == {kind.value for kind in CombinationType}


def test_the_match_page_explains_the_settlement_with_names_and_rules(service):
    app, _, left = service
    client = app.test_client()
    console = signed_in(app, "otto")
    settlement = client.get(f"/v1/matches/{left}/settlement", headers=OP).json
    page = console.get(f"/console/matches/{left}").text
    seats = page.split('id="seats"')[1].split("</dl>")[0]
    # dave left: his seat is named, with his id at hand, and taken over by the system.
    dave = seats.split("<dt>Seat 2</dt>")[1].split("</dd>")[0]
    assert (
        ">dave</a>" in dave
        and "person" in dave
        and "系统代打 taken over" in dave
        and "left" in dave
    )
    assert seats.count("system bot (系统机器人)") == 3
    explained = page.split('id="explained"')[1].split("</ol>")[0]
    assert f"= {settlement['multiplier']}</span>" in explained  # 倍数, as its factors
    assert "<strong>倍数</strong> multiplier" in explained
    stake = re.search(r'data-key="stake">.*?class="formula">([^<]*)<', explained).group(1)
    assert stake.startswith("1.00 × ") and f"× {settlement['multiplier']} = " in stake
    penalty = re.search(r'data-key="penalty">.*?class="formula">([^<]*)<', explained).group(1)
    assert penalty.startswith("seat 2: 3 × 1.00 × ") and penalty.endswith(settlement["penalty"][2])
    assert 'id="penalised">掉线 penalty on seat 2' in page
    # The API's settlement explains it the same way, step by step.
    steps = settlement["explained"]["steps"]
    assert [step["key"] for step in steps][:2] == ["multiplier", "stake"]
    assert all(step["formula"] in explained.replace("&#39;", "'") for step in steps)
    assert settlement["explained"]["penalty_seat"] == 2
    # Each ledger entry names its account and links to its rule.
    entries = page.split('id="entries"')[1].split("</table>")[0]
    assert "player:" not in entries.replace('title="player:', "")
    assert ">dave</td>" in entries and ">house</td>" in entries
    assert "/console/rules#56-the-disconnect-penalty-会员掉线" in entries
    assert "/console/rules#52-stakes-gross" in entries
    rules = console.get("/console/rules")
    assert rules.status_code == 200
    assert 'id="56-the-disconnect-penalty-会员掉线"' in rules.text
    assert 'id="52-stakes-gross"' in rules.text


def winners_gain(settlement: dict, key: str) -> Decimal:
    return sum((Decimal(a) for a in settlement[key] if Decimal(a) > 0), Decimal(0))


def test_a_capped_hand_says_what_the_cap_took(service):
    app, _, _ = service
    # A hand of 报到 then 打 that the farmers win moves nothing, so the cap takes nothing
    # from it: play on (on fresh deals) until a hand moves points.
    for attempt in range(5):
        match_id = play_hand(
            app.test_client(),
            app.extensions["ddz"].redis,
            f"capped-{attempt}",
            cap="1.00",
            rake="0.05",
        )
        settlement = app.test_client().get(f"/v1/matches/{match_id}/settlement", headers=OP).json
        if winners_gain(settlement, "gross") > 0:
            break
    page = signed_in(app, "otto").get(f"/console/matches/{match_id}").text
    gained = winners_gain(settlement, "gross")
    kept = winners_gain(settlement, "after_cap")
    assert gained > kept
    assert f'id="capped">封顶 capped: the cap took {gained - kept}' in page
    cap = re.search(r'data-key="cap">.*?class="formula">([^<]*)<', page).group(1)
    assert cap.startswith(f"the winners&#39; {gained} over the cap 1.00")
    assert "<strong>系统得分</strong> system cut" in page


def test_the_csv_export_has_a_row_per_seat_and_reconciles_with_the_ledger(service):
    app, played, left = service
    console = signed_in(app, "otto")
    r = console.get("/console/ledger/settlements.csv?since=2000-01-01&until=2999-12-31")
    assert r.status_code == 200 and r.mimetype == "text/csv"
    rows = list(csv.DictReader(io.StringIO(r.text)))
    by_hand: dict[str, list[dict]] = {}
    for row in rows:
        by_hand.setdefault(row["match_id"], []).append(row)
    assert {played, left} <= by_hand.keys()
    assert all([row["seat"] for row in seats] == ["0", "1", "2", "3"] for seats in by_hand.values())
    client = app.test_client()
    settlement = client.get(f"/v1/matches/{left}/settlement", headers=OP).json
    hand = by_hand[left]
    for key, column in (("gross", "gross"), ("after_cap", "after_cap"), ("rake", "cut")):
        assert [row[column] for row in hand] == settlement[key]
    assert [row["penalty"] for row in hand] == settlement["penalty"]
    assert [row["net"] for row in hand] == settlement["net"]
    dave = hand[2]
    assert (dave["player_name"], dave["seat_kind"], dave["taken_over"]) == ("dave", "person", "yes")
    assert {row["seat_kind"] for row in hand[:2] + hand[3:]} == {"system bot"}
    assert hand[0]["unit"] == "1.00" and hand[0]["ruleset"] and hand[0]["rake"]
    assert [row["role"] for row in hand].count("landlord") == 1
    # The multiplier as a decimal, and as text no spreadsheet takes for a date.
    text = settlement["multiplier"]
    assert all(row["multiplier_text"] == f"×{text}" for row in hand)
    numerator, _, denominator = text.partition("/")
    exact = Decimal(numerator) / Decimal(denominator or 1)
    assert abs(Decimal(hand[0]["multiplier"]) - exact) < Decimal("0.000001")
    # The totals are the ledger's: each account's nets, and the house's cut and penalties
    # (over the module's own hands: another test books a wrong movement on purpose).
    net: dict[str, Decimal] = {}
    house = Decimal(0)
    for row in by_hand[played] + by_hand[left]:
        account = f"player:{row['player_id']}" if row["player_id"] else "bots"
        net[account] = net.get(account, Decimal(0)) + Decimal(row["net"])
        house += Decimal(row["cut"]) + Decimal(row["penalty"])
    with app.extensions["ddz"].pool.connection() as conn:
        booked = dict(
            conn.execute(
                "SELECT account, sum(amount) FROM ledger_entries WHERE match_id = ANY(%s)"
                " GROUP BY account",
                ([played, left],),
            ).fetchall()
        )
    assert booked.pop("house") == house
    assert {a: v for a, v in net.items() if v} == {a: v for a, v in booked.items() if v}
    assert sum(net.values()) + house == 0
    empty = console.get("/console/ledger/settlements.csv?since=2000-01-01&until=2000-01-02")
    assert empty.text.strip() == ",".join(next(csv.reader(io.StringIO(r.text))))
    assert console.get("/console/ledger/settlements.csv?since=2001-01-01").status_code == 400


def test_the_players_page_shows_who_disconnects(service):
    app, _, _ = service
    page = signed_in(app, "otto").get("/console/players?sort=rate&order=desc").text
    rows = re.findall(r"<tr><td><a [^>]+>([^<]+)</a></td>\s*(.*?)</tr>", page, re.S)
    figures = {name: re.findall(r'class="num">([^<]*)<', rest) for name, rest in rows}
    assert figures["dave"][1:] == ["1", "1", "100%"]
    assert figures["carol"][1:] == ["1", "0", "0%"]
    assert [name for name, _ in rows].index("dave") < [name for name, _ in rows].index("carol")


def test_the_players_page_lists_the_bot_accounts_marked(service):
    app, _, _ = service
    client = app.test_client()
    author = client.post("/v1/players", json={"name": "an author"}).json["token"]
    r = client.post(
        "/v1/players", json={"name": "engine-x", "bot_account": True}, headers=bearer(author)
    )
    assert r.status_code == 201
    console = signed_in(app, "otto")
    everyone = console.get("/console/players").text
    assert re.search(r">engine-x</a> <small class=\"bot-account\">bot account</small>", everyone)
    accounts = console.get("/console/players?kind=bot_accounts").text
    assert "engine-x" in accounts and "carol" not in accounts
    people = console.get("/console/players?kind=people").text
    assert "engine-x" not in people and "carol" in people
    # The sort links keep the filter.
    assert 'href="?kind=bot_accounts&sort=name' in accounts
    # Its seats are marked in the matches found.
    match = client.post("/v1/matches", json={}, headers=bearer(r.json["token"])).json
    seat = client.post(
        f"/v1/matches/{match['match_id']}/seats", json={}, headers=bearer(r.json["token"])
    )
    assert seat.status_code == 201
    found = console.get("/console/matches?player=engine-x").text
    assert match["match_id"][:8] in found and "engine-x (bot account)" in found


def test_matches_are_found_by_player_status_and_date(service):
    app, played, left = service
    console = signed_in(app, "otto")
    by_player = console.get("/console/matches?player=dav").text
    assert played[:8] not in by_player and left[:8] in by_player
    ended = console.get("/console/matches?status=ended&since=2000-01-01").text
    assert played[:8] in ended and left[:8] in ended
    assert played[:8] not in console.get("/console/matches?status=open").text
    assert played[:8] not in console.get("/console/matches?until=2000-01-01").text


def test_a_revoked_token_and_a_removed_operator_get_nothing(service, capsys):
    app, match_id, _ = service
    client = app.test_client()
    add_operator("temp", "auditor")
    token = operator_token("temp", capsys)
    events = f"/v1/admin/matches/{match_id}/events"
    assert client.get(events, headers=bearer(token)).status_code == 200
    console = signed_in(app, "temp")
    assert main(["operator", "revoke", "temp"]) == 0
    assert client.get(events, headers=bearer(token)).status_code == 401
    assert console.get("/console/matches").status_code == 302
    # The password is refused too (a revoked operator used to sign in again), and no new
    # token is issued: the account is closed until it is removed and added again.
    r = sign_in(app.test_client(), "temp")
    assert r.status_code == 401 and "Wrong name or password" in r.text
    assert main(["operator", "token", "temp"]) == 2
    assert "temp\tauditor" in operator_list(capsys) and "\trevoked" in operator_list(capsys)
    assert main(["operator", "remove", "temp"]) == 0
    assert "temp" in [t["operator"] for t in trail(app)]  # the trail keeps the name


def copy_of(app, browser):
    """Another browser holding a copy of ``browser``'s console cookie (a cookie saved)."""
    copy = app.test_client()
    copy.set_cookie(
        "ddz_console", browser.get_cookie("ddz_console", path="/console").value, path="/console"
    )
    return copy


def test_a_saved_cookie_is_refused_after_signing_out_and_after_revoke(service, capsys):
    app, _, _ = service
    add_operator("kept", "auditor")
    console = signed_in(app, "kept")
    saved = copy_of(app, console)
    assert saved.get("/console/matches").status_code == 200
    token = csrf_of(console.get("/console/system").text)
    assert console.post("/console/sign-out", data={"csrf_token": token}).status_code == 302
    r = saved.get("/console/matches")
    assert r.status_code == 302 and "/console/sign-in" in r.headers["Location"]
    # Revoking ends every session of the operator, each browser's, and the tokens.
    first, second = signed_in(app, "kept"), signed_in(app, "kept")
    saved = copy_of(app, first)
    api_token = operator_token("kept", capsys)
    assert main(["operator", "revoke", "kept"]) == 0
    for browser in (first, second, saved):
        assert browser.get("/console/matches").status_code == 302
    events = "/v1/admin/ledger/check"
    assert app.test_client().get(events, headers=bearer(api_token)).status_code == 401
    # The password is refused too: the account is closed.
    assert sign_in(app.test_client(), "kept").status_code == 401


def test_a_session_ends_its_time_after_signing_in_however_busy(service):
    app, _, _ = service
    add_operator("busy", "auditor")
    console = signed_in(app, "busy")
    pool = app.extensions["ddz"].pool
    with pool.connection() as conn:
        # As though signed in 8 hours ago, and busy since: every request refreshed the cookie.
        conn.execute(
            "UPDATE console_sessions SET expires_at = now() - interval '1 second'"
            " WHERE operator_id = (SELECT operator_id FROM operators WHERE name = 'busy')"
        )
    assert console.get("/console/matches").status_code == 302


def test_an_operator_may_not_be_named_bootstrap_or_anything_unprintable(service, capsys):
    app, _, _ = service
    before = [o.name for o, _ in app.extensions["ddz"].operators.all()]
    for name in ("bootstrap", "Bootstrap", " ", "", " ada", "ada ", "<script>", "a\tb", "x" * 65):
        stdin = sys.stdin
        sys.stdin = io.StringIO("a long enough passphrase\n")
        capsys.readouterr()
        try:
            assert main(["operator", "add", name, "--role", "admin", "--password-stdin"]) == 2
        finally:
            sys.stdin = stdin
        assert "ddz operator: " in capsys.readouterr().err, repr(name)
    assert [o.name for o, _ in app.extensions["ddz"].operators.all()] == before
    # The console's form says the same.
    admin = signed_in(app, "ada")
    token = csrf_of(admin.get("/console/operators").text)
    form = {"name": "<b>x</b>", "role": "auditor", "password": "a long passphrase"}
    r = admin.post("/console/operators", data={**form, "csrf_token": token}, follow_redirects=True)
    assert "letters, digits" in r.text and "&lt;b&gt;x" not in r.text
    assert [o.name for o, _ in app.extensions["ddz"].operators.all()] == before
    # And the names that are fine are.
    add_operator("ok.name-1@team", "auditor")


def test_the_match_page_finds_a_balanced_but_wrong_movement_in_the_ledger(service):
    app, _, _ = service
    ops_connection = app.extensions["ddz"].redis
    match_id = play_hand(app.test_client(), ops_connection, "tampered")
    console = signed_in(app, "otto")
    assert 'id="verdict">Verified' in console.get(f"/console/matches/{match_id}").text
    with app.extensions["ddz"].pool.connection() as conn:
        book_wrong_movement(conn, match_id)
    page = console.get(f"/console/matches/{match_id}").text
    assert 'id="verdict">Verified' not in page
    verdict = re.search(r'id="verdict">Discrepancy: ([^<]*)<', page).group(1)
    assert "seat 0: ledger" in verdict and "seat 1: ledger" in verdict
    assert "movement" not in verdict  # it balances: only the recomputation finds it


def samples(client, prefix: str = "ddz_ledger_") -> dict[str, float]:
    """The samples of ``/metrics`` whose names start with ``prefix``, by name and labels."""
    text = client.get("/metrics").get_data(as_text=True)
    return {
        name: float(value)
        for name, value in re.findall(
            rf"^({re.escape(prefix)}\w*(?:{{[^}}]*}})?) (\S+)$", text, re.MULTILINE
        )
    }


def test_the_ledger_page_reads_stored_verdicts_and_a_full_check_renews_them(service):
    app, played, _ = service
    connection = app.extensions["ddz"].redis
    console = signed_in(app, "otto")
    page = console.get("/console/ledger").text
    # Each hand was checked when it was settled: the page reads the verdicts.
    assert "The ledger checks out" in page or "do not check out" in page
    assert 'id="ledger-unchecked"' not in page
    match_id = play_hand(app.test_client(), connection, "checked later")
    with app.extensions["ddz"].pool.connection() as conn:
        assert conn.execute(
            "SELECT problems FROM ledger_verdicts WHERE match_id = %s", (match_id,)
        ).fetchone() == ([],)
        # A hand settled before verdicts were kept has none; then a wrong movement that
        # balances is booked for it.
        conn.execute("DELETE FROM ledger_verdicts WHERE match_id = %s", (match_id,))
        book_wrong_movement(conn, match_id)
    page = console.get("/console/ledger").text
    assert re.search(r'id="ledger-unchecked">1 settled hand', page)
    assert match_id not in page  # no verdict yet: the page reads, it does not recompute
    assert samples(app.test_client())["ddz_ledger_unchecked_hands"] == 1
    # The full check, in the background: asked for by an admin (an auditor only reads),
    # then run by a worker.
    assert 'id="full-check-start"' not in page
    assert (
        console.post("/console/ledger/check", data={"csrf_token": csrf_of(page)}).status_code == 403
    )
    console = signed_in(app, "ada")
    page = console.get("/console/ledger").text
    assert 'id="full-check-start"' in page
    r = console.post("/console/ledger/check", data={"csrf_token": csrf_of(page)})
    assert r.status_code == 303
    page = console.get("/console/ledger").text
    assert "started" in page and "waiting for a worker" in page
    assert 'http-equiv="refresh"' in page  # the page follows the check's progress
    assert trail(app)[0]["action"] == "ledger_check" and trail(app)[0]["operator"] == "ada"
    again = console.post("/console/ledger/check", data={"csrf_token": csrf_of(page)})
    assert "running already" in console.get(again.headers["Location"]).text
    run_jobs(connection)
    page = console.get("/console/ledger").text
    assert 'id="ledger-unchecked"' not in page and 'http-equiv="refresh"' not in page
    check = re.search(
        r'id="full-check">Full check \d+, asked by ada .*?finished at .*? (\d+) hands checked,'
        r" (\d+) failing",
        page,
        re.S,
    )
    assert check and int(check.group(1)) >= 3 and int(check.group(2)) >= 1
    assert 'id="ledger-verdict">The ledger check found' in page
    failing = page.split('id="ledger-problems"')[1].split("</ul>")[0]
    assert f"/console/matches/{match_id}" in failing
    assert f"match {match_id} seat 0: ledger" in failing
    assert played not in failing
    metrics = samples(app.test_client())
    assert metrics["ddz_ledger_check_ok"] == 0 and metrics["ddz_ledger_check_problems"] >= 1
    assert metrics["ddz_ledger_unchecked_hands"] == 0


def test_bad_pages_and_nul_characters_get_400_not_500(service):
    app, _, _ = service
    console = signed_in(app, "otto")
    for path in (
        "/console/matches?page=99999999999999999999999",
        "/console/players?page=99999999999999999999999",
        "/console/matches?page=²",
        "/console/players?page=-1",
        "/console/matches?player=%00",
        "/console/matches?player=ca%00rol&page=2",
    ):
        r = console.get(path)
        assert r.status_code == 400 and "Bad request" in r.text, path
    # The biggest page there may be is an empty one.
    r = console.get("/console/matches?page=999999999")
    assert r.status_code == 200 and 'href="/console/matches/' not in r.text
    # A name with a NUL signs nobody in, and breaks nothing.
    browser = app.test_client()
    token = csrf_of(browser.get("/console/sign-in").text)
    r = browser.post(
        "/console/sign-in", data={"name": "otto\x00", "password": "x", "csrf_token": token}
    )
    assert r.status_code == 400 and browser.get("/console/matches").status_code == 302


def test_an_admin_revokes_and_removes_operators_from_the_console(service, capsys):
    app, _, _ = service
    add_operator("managed", "auditor")
    api_token = operator_token("managed", capsys)
    managed = signed_in(app, "managed")
    admin = signed_in(app, "ada")
    token = csrf_of(admin.get("/console/operators").text)
    check = "/v1/admin/ledger/check"
    # Not without the form's CSRF token, and not by an auditor.
    assert admin.post("/console/operators/revoke", data={"name": "managed"}).status_code == 400
    auditor = signed_in(app, "otto")
    auditor_token = csrf_of(auditor.get("/console/system").text)
    r = auditor.post(
        "/console/operators/remove", data={"name": "managed", "csrf_token": auditor_token}
    )
    assert r.status_code == 403
    assert managed.get("/console/matches").status_code == 200
    r = admin.post("/console/operators/revoke", data={"name": "managed", "csrf_token": token})
    assert r.status_code == 303 and r.headers["Location"].endswith("/console/operators")
    assert "1 token of managed revoked" in admin.get("/console/operators").text
    assert managed.get("/console/matches").status_code == 302
    assert app.test_client().get(check, headers=bearer(api_token)).status_code == 401
    # An admin may not remove themselves, and nobody may remove one who is not there.
    for name, said in (("ada", "Another admin may remove you"), ("nobody", "no operator named")):
        r = admin.post(
            "/console/operators/remove",
            data={"name": name, "csrf_token": token},
            follow_redirects=True,
        )
        assert r.status_code == 200 and said in r.text
    assert "ada" in [o.name for o, _ in app.extensions["ddz"].operators.all()]
    page = admin.get("/console/operators").text
    assert 'id="remove-ada"' not in page and 'id="remove-managed"' in page
    # Removing asks to be sure.
    r = admin.post(
        "/console/operators/remove",
        data={"name": "managed", "csrf_token": token},
        follow_redirects=True,
    )
    assert "Tick &#39;sure&#39; to remove managed" in r.text
    r = admin.post(
        "/console/operators/remove",
        data={"name": "managed", "csrf_token": token, "confirm": "yes"},
        follow_redirects=True,
    )
    assert "Operator managed removed" in r.text
    assert "managed" not in [o.name for o, _ in app.extensions["ddz"].operators.all()]
    assert [(t["operator"], t["action"], t["subject"], t["via"]) for t in trail(app)[:2]] == [
        ("ada", "remove", "managed", "console"),
        ("ada", "revoke", "managed", "console"),
    ]
    assert "managed" in admin.get("/console/system").text


def test_every_operator_action_is_in_the_trail_with_who_whence_and_when(service, capsys):
    """The CLI's changes to operators, signing in and out of the console, exports and
    reads through the API: each with who (``cli:<system user>`` for the CLI), from where
    (the client's address, the CLI's host) and when."""
    app, match_id, _ = service
    cli, host = f"cli:{getpass.getuser()}", socket.gethostname()
    before = len(trail(app))
    add_operator("traced", "auditor")
    token = operator_token("traced", capsys)
    console = signed_in(app, "traced")
    days = "since=2026-01-01&until=2026-01-31"
    assert console.get(f"/console/ledger/settlements.csv?{days}").status_code == 200
    events = f"/v1/admin/matches/{match_id}/events"
    assert app.test_client().get(events, headers=bearer(token)).status_code == 200
    csrf = csrf_of(console.get("/console/system").text)
    assert console.post("/console/sign-out", data={"csrf_token": csrf}).status_code == 302
    assert main(["operator", "revoke", "traced"]) == 0
    assert main(["operator", "remove", "traced"]) == 0
    entries = trail(app)[: len(trail(app)) - before][::-1]
    local = "127.0.0.1"
    assert [
        (t["operator"], t["action"], t["via"], t["subject"], t["address"]) for t in entries
    ] == [
        (cli, "add", "cli", "traced", host),
        (cli, "token", "cli", "traced", host),
        ("traced", "sign_in", "console", None, local),
        ("traced", "export", "console", "settlements 2026-01-01..2026-01-31", local),
        ("traced", "events", "api", None, local),
        ("traced", "sign_out", "console", None, local),
        (cli, "revoke", "cli", "traced", host),
        (cli, "remove", "cli", "traced", host),
    ]
    assert str(entries[4]["match_id"]) == match_id
    assert all(t["at"] is not None for t in entries)


def test_sign_in_log_lines_say_who_and_from_where_never_the_password(service, caplog):
    app, _, _ = service
    wrong = "not otto's password at all"
    with caplog.at_level(logging.INFO, logger="ddz.console"):
        assert sign_in(app.test_client(), "otto", wrong).status_code == 401
        signed_in(app, "otto")
        # A password typed into the name field is not written as a name.
        assert sign_in(app.test_client(), PASSWORDS["otto"], "x").status_code == 401
    lines = [r.getMessage() for r in caplog.records if r.name == "ddz.console"]
    assert len(lines) == 3, lines
    assert "failed" in lines[0] and "otto" in lines[0] and "127.0.0.1" in lines[0]
    assert "failed" not in lines[1] and "otto" in lines[1] and "127.0.0.1" in lines[1]
    assert "not an operator name" in lines[2]
    assert not any(wrong in line or PASSWORDS["otto"] in line for line in lines)


def test_the_audit_page_searches_and_pages_the_trail(service):
    app, match_id, _ = service
    operators = app.extensions["ddz"].operators
    who = f"pager-{uuid.uuid4().hex[:6]}"
    for n in range(30):
        operators.audit(
            who, "replay", "console", match_id=uuid.UUID(match_id), address=f"10.0.0.{n}"
        )
    operators.audit(who, "export", "console", subject="settlements 2026-02-01..2026-02-02")
    auditor = signed_in(app, "otto")  # an auditor reads it, as the system page
    first = auditor.get(f"/console/audit?operator={who.upper()}&action=replay").text
    assert "30 entries." in first and "Page 1 of 2" in first and 'id="next"' in first
    assert first.count(f"<td>{who}</td>") == 25
    second = auditor.get(f"/console/audit?operator={who}&action=replay&page=2").text
    assert second.count(f"<td>{who}</td>") == 5 and "10.0.0.0<" in second
    found = auditor.get(f"/console/audit?operator={who}&about=2026-02-01").text
    assert "1 entry." in found and "settlements 2026-02-01..2026-02-02" in found
    assert "1 entry." in auditor.get(f"/console/audit?operator={who}&about=10.0.0.17").text
    assert "0 entries." in auditor.get(f"/console/audit?operator={who}&via=cli").text
    assert "0 entries." in auditor.get(f"/console/audit?operator={who}&until=2000-01-01").text
    assert auditor.get("/console/audit?page=x").status_code == 400


def test_the_lists_page_by_key_and_an_old_page_number_still_works(service):
    """The pager's links carry the key of the row they continue from; an old link's page
    number lands on the same page; a key the list never gave is a bad request."""
    app, match_id, _ = service
    operators = app.extensions["ddz"].operators
    who = f"keyed-{uuid.uuid4().hex[:6]}"
    for n in range(30):
        operators.audit(
            who, "replay", "console", match_id=uuid.UUID(match_id), address=f"10.1.0.{n}"
        )
    auditor = signed_in(app, "otto")

    def rows(page: str) -> list[str]:
        return re.findall(r"<td>(10\.1\.0\.\d+)</td>", page)

    def link(page: str, which: str) -> str:
        found = re.search(rf'<a href="(\?[^"]+)" id="{which}">', page)
        assert found, which
        return "/console/audit" + html.unescape(found.group(1))

    first = auditor.get(f"/console/audit?operator={who}").text
    assert rows(first)[:2] == ["10.1.0.29", "10.1.0.28"] and 'id="previous"' not in first
    assert "after=" in link(first, "next") and "page=2" in link(first, "next")
    second = auditor.get(link(first, "next")).text
    assert rows(second) == [f"10.1.0.{n}" for n in range(4, -1, -1)]
    assert "Page 2 of 2" in second and 'id="next"' not in second
    assert rows(auditor.get(f"/console/audit?operator={who}&page=2").text) == rows(second)
    back = auditor.get(link(second, "previous")).text
    assert rows(back) == rows(first) and "Page 1 of 2" in back
    for key in ("after=garbage", "before=WzAsICJ4Il0", "after=WzddCg"):
        r = auditor.get(f"/console/audit?{key}")
        assert r.status_code == 400 and "key was not given by this list" in r.text, key


def test_the_players_page_finds_a_player_by_name_or_id(service):
    app, _, _ = service
    console = signed_in(app, "otto")
    page = console.get("/console/players?q=CAR").text
    assert ">carol</a>" in page and ">dave</a>" not in page
    (dave,) = re.findall(
        r'href="/console/players/([0-9a-f-]{36})">dave<', console.get("/console/players").text
    )
    by_id = console.get(f"/console/players?q={dave}&sort=balance").text
    assert ">dave</a>" in by_id and ">carol</a>" not in by_id
    # The sort links keep the search.
    assert f'href="?kind=&q={dave}&sort=name' in by_id
    assert "No player with this filter yet." in console.get("/console/players?q=nobody-here").text


def ledger_total(app) -> Decimal:
    with app.extensions["ddz"].pool.connection() as conn:
        return conn.execute("SELECT coalesce(sum(amount), 0) FROM ledger_entries").fetchone()[0]


def admin_post(console, page_path: str, path: str, **form):
    """Posts the form of an admin's page (with its CSRF token) and follows it back."""
    token = csrf_of(console.get(page_path).text)
    return console.post(path, data={"csrf_token": token, **form}, follow_redirects=True)


def test_a_suspended_player_is_refused_and_the_system_takes_their_seat(service):
    app, _, _ = service
    client = app.test_client()
    me, path = seated_hand(client, "suspect")
    match_id = path.rsplit("/", 1)[1]
    player_id = client.get("/v1/me", headers=me).json["player_id"]
    page_path = f"/console/players/{player_id}"
    # An auditor reads the page but may not act.
    otto = signed_in(app, "otto")
    page = otto.get(page_path).text
    assert 'id="standing" class="ok">active' in page and 'id="suspend"' not in page
    refused = otto.post(
        f"{page_path}/suspend", data={"csrf_token": csrf_of(page), "reason": "sneaky"}
    )
    assert refused.status_code == 403
    assert client.get(path, headers=me).status_code == 200
    ada = signed_in(app, "ada")
    # No reason, no act.
    page = admin_post(ada, page_path, f"{page_path}/suspend", reason=" ").text
    assert "Say why" in page and 'id="standing" class="ok">active' in page
    page = admin_post(ada, page_path, f"{page_path}/suspend", reason="collusion report 17").text
    assert 'id="standing" class="bad">suspended' in page
    assert "the system took over 1 seat of a hand under way" in page
    # The player's next command, and the lobby, are refused with a problem that says why.
    r = client.post(f"{path}/commands", json={"action": "pass"}, headers=me)
    assert r.status_code == 403 and r.json["code"] == "player_suspended"
    r = client.post("/v1/lobby/tickets", headers=me)
    assert r.status_code == 403 and r.json["code"] == "player_suspended"
    # The system plays the seat (系统代打), as when a player leaves.
    events = client.get(f"/v1/admin/matches/{match_id}/events", headers=OP).json["events"]
    left = [e for e in events if e["type"] == "disconnect"]
    assert [(e["payload"]["seat"], e["payload"]["reason"]) for e in left] == [(2, "left")]
    newest = next(t for t in trail(app) if t["action"] == "suspend")
    assert (newest["operator"], newest["action"], newest["reason"]) == (
        "ada",
        "suspend",
        "collusion report 17",
    )
    assert "collusion report 17" in ada.get("/console/audit").text
    page = admin_post(ada, page_path, f"{page_path}/reinstate", reason="cleared").text
    assert 'id="standing" class="ok">active' in page
    assert client.get(path, headers=me).status_code == 200
    page = admin_post(ada, page_path, f"{page_path}/ban", reason="confirmed").text
    r = client.get("/v1/me", headers=me)
    assert r.status_code == 403 and r.json["code"] == "player_banned"


def test_a_correction_is_two_entries_and_the_ledger_still_adds_to_zero(service):
    app, played, _ = service
    client = app.test_client()
    player_id = next(
        s["player"]
        for s in client.get(f"/v1/matches/{played}", headers=OP).json["seats"]
        if s and s["player"]
    )
    page_path = f"/console/players/{player_id}"
    before = Decimal(client.get(f"/v1/players/{player_id}/ledger", headers=OP).json["balance"])
    total = ledger_total(app)
    ada = signed_in(app, "ada")
    for amount, reason in (("0", "nothing"), ("1.234", "too fine"), ("abc", "no"), ("5", "")):
        page = admin_post(ada, page_path, f"{page_path}/correct", amount=amount, reason=reason)
        assert "A correction needs an amount" in page.text
    page = admin_post(ada, page_path, f"{page_path}/correct", amount="-7.5", reason="refund")
    assert "-7.50 to the player, +7.50 to the house" in page.text
    ledger = client.get(f"/v1/players/{player_id}/ledger", headers=OP).json
    assert Decimal(ledger["balance"]) == before - Decimal("7.50")
    assert ledger["entries"][0]["kind"] == "correction" and ledger["entries"][0]["match_id"] is None
    assert ledger_total(app) == total  # double entry: the house took the other side
    assert 'class="reason">refund (ada)' in ada.get(page_path).text
    assert trail(app)[0]["action"] == "correct" and trail(app)[0]["reason"] == "refund"
    with app.extensions["ddz"].pool.connection() as conn:
        # Never an edit: the entries refuse it.
        try:
            conn.execute("UPDATE ledger_entries SET amount = 0 WHERE kind = 'correction'")
        except Exception as exc:  # the trigger's refusal
            assert "never updated" in str(exc)
        else:
            raise AssertionError("a correction's entry was edited")


def test_voiding_a_hand_moves_back_every_amount_it_moved(service):
    app, _, _ = service
    client = app.test_client()
    match_id = play_hand(client, app.extensions["ddz"].redis, "voided")
    seat = client.get(f"/v1/matches/{match_id}", headers=OP).json["seats"][2]
    net = Decimal(client.get(f"/v1/matches/{match_id}/settlement", headers=OP).json["net"][2])
    before = Decimal(client.get(f"/v1/players/{seat['player']}/ledger", headers=OP).json["balance"])
    assert before == net
    total = ledger_total(app)
    ada = signed_in(app, "ada")
    match_path = f"/console/matches/{match_id}"
    page = admin_post(ada, match_path, f"{match_path}/void", reason="dealt by a broken build")
    assert 'id="voided">Voided by ada' in page.text and 'id="void"' not in page.text
    balance = client.get(f"/v1/players/{seat['player']}/ledger", headers=OP).json["balance"]
    assert Decimal(balance) == 0 and ledger_total(app) == total
    void = next(t for t in trail(app) if t["action"] == "void")
    assert (void["operator"], str(void["match_id"]), void["reason"]) == (
        "ada",
        match_id,
        "dealt by a broken build",
    )
    # The hand's own entries stay: its check still holds; a second void changes nothing.
    assert 'id="verdict">Verified' in page.text
    again = ada.post(
        f"{match_path}/void",
        data={"csrf_token": csrf_of(page.text), "reason": "twice"},
        follow_redirects=True,
    )
    assert "voided already" in again.text
    assert ledger_total(app) == total


def test_an_admin_voids_a_hands_rating_with_a_reason_in_the_trail(service):
    """The void of a hand's rating effect (docs/ratings.md, "Fair play"): an admin's act on
    the match page, with its reason in the audit trail; once; an auditor may not."""
    app, played, _ = service
    match_path = f"/console/matches/{played}"
    otto = signed_in(app, "otto")
    page = otto.get(match_path).text
    assert 'id="void-rating"' not in page
    refused = otto.post(
        f"{match_path}/void-rating", data={"csrf_token": csrf_of(page), "reason": "farmed"}
    )
    assert refused.status_code == 403
    ada = signed_in(app, "ada")
    page = admin_post(ada, match_path, f"{match_path}/void-rating", reason=" ").text
    assert "Say why" in page and 'id="void-rating"' in page
    page = admin_post(ada, match_path, f"{match_path}/void-rating", reason="one person, two seats")
    assert 'id="rating-voided">Its rating voided by ada' in page.text
    assert 'id="void-rating"' not in page.text
    void = next(t for t in trail(app) if t["action"] == "void_rating")
    assert (void["operator"], str(void["match_id"]), void["reason"]) == (
        "ada",
        played,
        "one person, two seats",
    )
    again = ada.post(
        f"{match_path}/void-rating",
        data={"csrf_token": csrf_of(page.text), "reason": "twice"},
        follow_redirects=True,
    )
    assert "rating was voided already" in again.text
    unsettled = f"/console/matches/{uuid.uuid4()}"
    assert (
        ada.post(
            f"{unsettled}/void-rating", data={"csrf_token": csrf_of(page.text), "reason": "x"}
        ).status_code
        == 404
    )


def test_the_player_page_shows_a_bot_accounts_owner_and_a_persons_bots(service):
    app, _, _ = service
    client = app.test_client()
    person = client.post("/v1/players", json={"name": "maker"}).json
    bot = client.post(
        "/v1/players",
        json={"name": "maker-bot", "bot_account": True},
        headers=bearer(person["token"]),
    ).json
    otto = signed_in(app, "otto")
    page = otto.get(f"/console/players/{bot['player_id']}").text
    assert f'id="owner"><a href="/console/players/{person["player_id"]}">maker</a>' in page
    page = otto.get(f"/console/players/{person['player_id']}").text
    assert f'id="bots"><a href="/console/players/{bot["player_id"]}">maker-bot</a>' in page


def test_matches_are_found_by_a_pasted_match_or_table_id(service):
    app, played, _ = service
    console = signed_in(app, "otto")
    page = console.get(f"/console/matches?player={played}").text
    assert "1 match." in page and played[:8] in page
    assert "0 matches." in console.get(f"/console/matches?player={uuid.uuid4()}").text


def test_a_malformed_id_and_the_sign_in_limit_are_pages_in_a_browser(service):
    app, _, _ = service
    console = signed_in(app, "otto")
    html = {"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}
    r = console.get("/console/matches/not-a-match", headers=html)
    assert r.status_code == 404 and r.mimetype == "text/html"
    assert 'id="message">' in r.text and "not a UUID" in r.text.replace("not a uuid", "not a UUID")
    assert "nonce-" in r.headers["Content-Security-Policy"]
    # Without a browser's Accept, the problem stays a problem.
    assert console.get("/console/matches/not-a-match").mimetype == "application/problem+json"


def test_the_takings_chart_has_a_scale_a_period_total_and_a_choice_of_period(service):
    app, _, _ = service
    console = signed_in(app, "otto")
    with app.extensions["ddz"].pool.connection() as conn:
        taken = dict(
            conn.execute(
                "SELECT kind, sum(amount) FROM ledger_entries WHERE account = 'house'"
                " AND kind IN ('rake', 'penalty') AND created_at > now() - interval '6 days'"
                " GROUP BY kind"
            ).fetchall()
        )
    page = console.get("/console/ledger?days=7").text
    chart = page.split('id="takings"')[1].split("</svg>")[0]
    assert chart.count("<rect") == 14 and chart.count('class="scale"') == 3
    total = re.search(
        r'id="period-total">Over these 7 days: system cut ([\d.]+), penalties ([\d.]+)', page
    )
    rake, penalty = (Decimal(total.group(n)) for n in (1, 2))
    assert (rake, penalty) == (taken.get("rake", 0), taken.get("penalty", 0))
    # A period not offered is the default one.
    assert console.get("/console/ledger?days=12").text.count("<rect") == 60


def test_an_admin_changes_a_role_and_resets_a_password(service):
    app, _, _ = service
    add_operator("promoted", "auditor")
    promoted = signed_in(app, "promoted")
    assert promoted.get("/console/operators").status_code == 403
    ada = signed_in(app, "ada")
    page = ada.get("/console/operators").text
    assert 'id="role-promoted"' in page and 'id="role-ada"' not in page
    token = csrf_of(page)
    r = ada.post(
        "/console/operators/set_role",
        data={"name": "promoted", "role": "admin", "csrf_token": token},
        follow_redirects=True,
    )
    assert "promoted is now admin" in r.text
    assert promoted.get("/console/operators").status_code == 200  # at the next request
    short = ada.post(
        "/console/operators/reset_password",
        data={"name": "promoted", "password": "short", "csrf_token": token},
        follow_redirects=True,
    )
    assert "at least 12 characters" in short.text
    r = ada.post(
        "/console/operators/reset_password",
        data={"name": "promoted", "password": "a brand new passphrase", "csrf_token": token},
        follow_redirects=True,
    )
    assert "password is reset" in r.text
    assert promoted.get("/console/matches").status_code == 302  # the session ended
    assert sign_in(app.test_client(), "promoted").status_code == 401
    assert sign_in(app.test_client(), "promoted", "a brand new passphrase").status_code == 302
    acts = [(t["action"], t["subject"]) for t in trail(app) if t["operator"] == "ada"]
    assert acts[:2] == [("reset_password", "promoted"), ("set_role", "promoted: admin")]


def test_the_match_list_shows_winner_nets_and_flags_and_sorts_by_the_house(service):
    app, _, left = service
    console = signed_in(app, "otto")
    settlement = app.test_client().get(f"/v1/matches/{left}/settlement", headers=OP).json
    row = console.get(f"/console/matches?player={left}").text.split("<tbody>")[1]
    assert " / ".join(settlement["net"]) in row and "掉线 penalty" in row
    assert ("地主 landlord" if settlement["winner"] == "landlord" else "农民 farmers") in row
    page = console.get("/console/matches?status=ended&sort=house&order=desc").text
    houses = [
        Decimal(h) for h in re.findall(r'<td class="num">([\d.]+)</td>\s*<td class="flags">', page)
    ]
    assert len(houses) >= 2 and houses == sorted(houses, reverse=True)
    ascending = console.get("/console/matches?status=ended&sort=house&order=asc").text
    assert "House ▲" in ascending


def test_the_player_page_lists_the_tables_where_they_sit(service):
    app, _, _ = service
    client = app.test_client()
    player_id, token = new_player(client, "tabled")
    table = new_table(client, token, private=True)  # its creator sits at it
    page = signed_in(app, "otto").get(f"/console/players/{player_id}").text
    tables = page.split('id="tables"')[1].split("</table>")[0]
    assert table["table_id"][:8] in tables and "private" in tables
    # A pasted table id finds the table's hands (none dealt yet).
    assert (
        "0 matches."
        in signed_in(app, "otto").get(f"/console/matches?player={table['table_id']}").text
    )


def test_the_console_speaks_the_browsers_chinese_and_the_switch_wins(service):
    app, match_id, left = service
    console = signed_in(app, "otto")
    chinese = {"Accept-Language": "zh-CN,zh;q=0.9,en;q=0.8"}
    page = console.get("/console/matches", headers=chinese).text
    assert '<html lang="zh-Hans-CN">' in page
    assert "<h1>牌局</h1>" in page and ">账本</a>" in page and ">退出</button>" in page
    # The match page: the settlement's steps and the seats by the Chinese names alone.
    page = console.get(f"/console/matches/{left}", headers=chinese).text
    explained = page.split('id="explained"')[1].split("</ol>")[0]
    assert "<strong>倍数</strong>：" in explained and " multiplier" not in explained
    assert "每位农民的输赢" in explained and "号座：3 × 1.00 × " in explained
    assert "系统机器人" in page and "自版本" in page and "system bot" not in page
    assert "第 1 步，共" in page and 'data-format="第 {at} 步，共 {total} 步"' in page
    assert "(审计员)" in page  # otto's role
    assert "阶段 已结束" in page  # the phase, in words
    # A refusal the API answers before a page: in the page's language, its detail beside.
    page = console.get(
        "/console/matches/not-a-match", headers={**chinese, "Accept": "text/html"}
    ).text
    assert "<h1>未找到</h1>" in page and "地址中的 ID 无效" in page and "not a UUID" in page
    # Any Chinese the browser asks for; English for what the console does not speak.
    for asked in ("zh", "zh-Hans", "zh-TW", "fr-FR,zh;q=0.5"):
        assert (
            'lang="zh-Hans-CN"'
            in console.get("/console/system", headers={"Accept-Language": asked}).text
        )
    for asked in ("", "en-US,en;q=0.9", "fr-FR,de;q=0.8", "xx"):
        page = console.get("/console/matches", headers={"Accept-Language": asked}).text
        assert '<html lang="en">' in page and "<h1>Matches</h1>" in page
    # The switch on every page (the sign-in page too) stores the choice, which wins over
    # the browser's; it goes back to the page it was chosen on, and nowhere else.
    assert 'id="language-en"' in console.get("/console/ledger", headers=chinese).text
    r = console.get("/console/language/en?next=/console/ledger?days=7", headers=chinese)
    assert r.status_code == 302 and r.headers["Location"] == "/console/ledger?days=7"
    assert "ddz_language=en" in r.headers["Set-Cookie"] and "Path=/;" in r.headers["Set-Cookie"]
    page = console.get("/console/ledger", headers=chinese).text
    assert '<html lang="en">' in page and "<h1>Ledger</h1>" in page
    assert 'id="language-zh_Hans_CN"' in page
    r = console.get("/console/language/zh_Hans_CN?next=//elsewhere.example/")
    assert r.headers["Location"] == "/console/"
    page = console.get(f"/console/matches/{match_id}").text
    assert '<html lang="zh-Hans-CN">' in page and "<h1>牌局 " in page
    assert console.get("/console/language/fr").status_code == 404
    # The public replay page speaks it too, with its own switch.
    page = console.get(f"/replay/{match_id}").text
    assert 'lang="zh-Hans-CN"' in page and "座位与发牌时的手牌" in page
    assert 'id="language-en"' in page
    stranger = app.test_client()
    page = stranger.get("/console/sign-in", headers=chinese).text
    assert "<h1>登录</h1>" in page and 'id="language-en"' in page
    page = stranger.get(f"/replay/{match_id}").text
    assert 'lang="en"' in page and "Seats and hands as dealt" in page


def test_every_message_of_the_console_has_its_chinese_and_the_mo_is_the_po():
    """The catalogue cannot fall behind the console: every message the sources mark (as
    ``pybabel extract`` finds them with babel.cfg) has a Chinese translation in the .po,
    and the committed .mo (which the service loads) is that .po compiled."""
    root = Path(__file__).resolve().parents[1]
    with open(root / "babel.cfg") as f:
        method_map, options_map = parse_mapping_cfg(f)
    marked = {
        texts(message[2])
        for message in extract_from_dir(
            root,
            method_map,
            options_map,
            keywords={**DEFAULT_KEYWORDS, "lazy_gettext": None},
        )
    }
    folder = root / "service/web/translations/zh_Hans_CN/LC_MESSAGES"
    with open(folder / "messages.po", "rb") as f:
        po = {texts(m.id): texts(m.string) for m in read_po(f) if m.id and not m.fuzzy}
    with open(folder / "messages.mo", "rb") as f:
        mo = {texts(m.id): texts(m.string) for m in read_mo(f) if m.id}
    assert len(marked) > 250
    # Exactly the messages marked: none missing, none left over from an older console.
    assert set(po) == marked
    assert [ids for ids, translated in po.items() if not all(translated)] == []
    assert mo == po


def texts(message: str | tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """A message (or its translation) as a tuple: one text, or its singular and plural."""
    return (message,) if isinstance(message, str) else tuple(message)
