"""``ddz bridge`` against the service as ``ddz serve`` runs it (gunicorn and a real
worker that matches tickets, deals and plays the system bots): the example engine plays
through the lobby hand after hand while the service keeps closing its stream, over a
network that drops connections and loses an answer, and a bridge killed in the middle of
a turn is started again and answers that turn; an engine that
crashes, answers an illegal move or is too slow is named in the log, the system plays its
seat to the end of the hand, and the bridge plays the next hand with the engine started
again (or gives up after 3 failing hands in a row)."""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
from api_support import DECISIONS
from bad_network import BadNetwork
from ddz_client import Client, ProblemError

from service.app.bridge import Bridge
from service.app.engine import Engine

# Slow: starts servers or other processes (bin/test --fast leaves it out).
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = f"{sys.executable} {ROOT / 'examples' / 'engine.py'}"
MISBEHAVING = ROOT / "tests" / "engines" / "misbehaving.py"


@pytest.fixture()
def service(shared_service) -> str:
    """The test process's shared service (its streams close every 2 s: the client
    resumes them)."""
    return shared_service


def bridge(base: str, token: str, engine: str, *args: str, log: Path) -> subprocess.Popen:
    with open(log, "ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "service.cli", "bridge", "--engine", engine, "--url", base]
            + ["--token", token, *args],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # the bridge and its engine, killed together
            # Ctrl-C as at a terminal: a suite started in the background by a shell
            # without job control has SIGINT ignored, and its children with it.
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )


def bot_account(service: str, name: str) -> Client:
    """A new bot account, registered by a new person (its owner)."""
    with Client.register(service, f"{name}-author") as author:
        return Client.register(service, name, bot_account=True, owner_token=author.token)


def finished(process: subprocess.Popen, log: Path, timeout: float = 120) -> int:
    try:
        return process.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        pytest.fail(f"the bridge did not finish:\n{log.read_text()}")


def items(client: Client) -> list:
    found, after = [], None
    while True:
        page = client.events(after)
        if not page.items:
            return found
        found += page.items
        after = page.last_id


def hands(client: Client, count: int) -> list[dict]:
    """The records of the player's first ``count`` hands, and its seat in each. (The table
    may deal one more before the bridge's leave reaches it: the system plays that one.)"""
    matches = list(reversed(client.my_matches(limit=50)["matches"]))[:count]
    assert len(matches) == count
    return [{"seat": m["seat"], "record": client.record(m["match_id"])} for m in matches]


def taken_over(client: Client, played: list[dict]) -> list:
    """The ``taken_over`` items of the player's stream for these hands."""
    ids = {hand["record"]["match_id"] for hand in played}
    return [i for i in items(client) if i.type == "taken_over" and i.data["match_id"] in ids]


def by_the_player(hand: dict) -> list[dict]:
    """The seat's decisions in the hand, each with who made it."""
    return [
        a
        for a in hand["record"]["actions"]
        if a["seat"] == hand["seat"] and a["action"] in DECISIONS
    ]


def test_the_example_engine_plays_hand_after_hand_and_a_restarted_bridge_picks_up(
    service, tmp_path, monkeypatch
):
    player = Client.register(service, "example-bot")
    log = tmp_path / "bridge.log"
    stall = tmp_path / "stalled"
    # The first bridge's engine plays 3 decisions, then thinks for ever on the 4th: the
    # bridge is killed (engine and all) with that turn pending.
    monkeypatch.setenv("STALL_FILE", str(stall))
    first = bridge(
        service,
        player.token,
        f"{sys.executable} {MISBEHAVING} stall 3",
        "--move-ms",
        "20000",
        log=log,
    )
    deadline = time.monotonic() + 60
    while not stall.exists():
        assert first.poll() is None, log.read_text()
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.05)
    # kill -9 of the bridge alone: its engine (a session of its own) dies with it.
    engines = psutil.Process(first.pid).children()
    assert len(engines) == 1
    first.kill()
    first.wait()
    gone, alive = psutil.wait_procs(engines, timeout=10)
    assert not alive, "the engine outlived its bridge"
    # Started again (no table given: it finds the one it sits at), it answers the pending
    # turn and plays on: the hand under way and one more.
    second = bridge(service, player.token, EXAMPLE, "--hands", "2", log=log)
    assert finished(second, log) == 0, log.read_text()
    text = log.read_text()
    assert "engine lowest-single (by ddz) started" in text
    assert "2 hands played" in text

    played = hands(player, 2)
    for hand in played:
        assert hand["record"]["result"] is not None  # ended
        decisions = by_the_player(hand)
        assert decisions and all(a.get("by", "player") == "player" for a in decisions)
    # Never taken over (the restart was quicker than the turn's 30 s), streams resumed.
    assert taken_over(player, played) == []
    assert [item.type for item in items(player)].count("left") == 1
    player.close()


def test_two_bridges_play_at_a_private_table(service, tmp_path):
    host = Client.register(service, "host-bot")
    guest = Client.register(service, "guest-bot")
    # System bots take the two seats left once the table has not changed for 5 s.
    table = host.create_table(private=True, bots_after=5, next_hand_seconds=0)
    log = tmp_path / "bridge.log"
    at_table = ["--table", table["table_id"], "--hands", "1"]
    first = bridge(service, host.token, EXAMPLE, *at_table, log=log)
    second = bridge(service, guest.token, EXAMPLE, *at_table, "--invite", table["invite"], log=log)
    assert finished(first, log) == 0 and finished(second, log) == 0, log.read_text()
    (hand,) = hands(host, 1)
    seats = hand["record"]["seats"]
    assert [s["player"] for s in seats if not s["bot"]] == [host.player_id, guest.player_id]
    for player in (host, guest):
        (mine,) = hands(player, 1)
        assert all(a.get("by", "player") == "player" for a in by_the_player(mine))
        player.close()


def test_two_bridges_of_one_player_answer_each_turn_once_and_both_leave(service, tmp_path):
    player = bot_account(service, "twin-bot")
    table = player.create_table(bots_after=0, next_hand_seconds=0)
    log = tmp_path / "bridge.log"
    at_table = ["--table", table["table_id"], "--hands", "1"]
    twins = [bridge(service, player.token, EXAMPLE, *at_table, log=log) for _ in range(2)]
    # The second to leave finds the seat gone: that is what it asked for, no failure.
    assert [finished(twin, log) for twin in twins] == [0, 0], log.read_text()
    (hand,) = hands(player, 1)
    assert all(a.get("by", "player") == "player" for a in by_the_player(hand))
    player.close()


def test_a_token_revoked_in_play_stops_the_bridge_without_blaming_the_engine(
    service, caplog, monkeypatch
):
    owner = bot_account(service, "revoked-bot")
    tokens = httpx.Client(base_url=service, headers={"Authorization": f"Bearer {owner.token}"})
    second = tokens.post("/v1/me/tokens", json={"label": "bridge"}).json()
    revoke = functools.partial(tokens.delete, f"/v1/me/tokens/{second['token_id']}")
    decide = Engine.decide

    def decide_then_revoke(engine: Engine, *args: Any, **kwargs: Any) -> dict:
        action = decide(engine, *args, **kwargs)
        revoke()  # while the engine thought, the player revoked the bridge's token
        return action

    monkeypatch.setattr(Engine, "decide", decide_then_revoke)
    with Client(service, second["token"]) as player, pytest.raises(ProblemError) as refused:
        Bridge(player, Engine(EXAMPLE), hands=1).run()
    assert refused.value.code == "invalid_token"
    assert not any("failed in match" in m for m in caplog.messages)
    owner.close()
    tokens.close()


def test_the_bridge_plays_on_over_a_network_that_drops(service, caplog):
    # Every stream connection drops after a few chunks; the first command's answer is lost
    # after the service applied it, and the service is then down, then busy (503), each for
    # longer than the client's own retries (5 tries): the bridge waits for it.
    caplog.set_level("INFO", "ddz.bridge")
    caplog.set_level("INFO", "ddz_client")
    network = BadNetwork(stream_chunks=3, outage=8, busy=8)
    with Client.register(service, "dropped-bot", transport=network, backoff=0.01) as player:
        played = Bridge(player, Engine(EXAMPLE), hands=2, retry_seconds=0.01).run()
        assert network.outage == network.busy == 0
        said = caplog.messages
        assert any(m.startswith("playing as dropped-bot (not a bot account") for m in said)
        assert any(m.startswith("the service does not answer (connection refused") for m in said)
        assert any(m.startswith("the service does not answer (503 unavailable") for m in said)
        # The client's own retries are told too, each with its reason and its wait.
        assert any(" 503 unavailable: " in m and "; trying again in " in m for m in said)
        assert any("ConnectError" in m and "; trying again in " in m for m in said)
        # Each hand's result, and the seat's net.
        ended = [m for m in said if m.startswith("hand ") and " ended (match " in m]
        assert len(ended) == 2 and all(" won, landlord seat " in m and ": net " in m for m in ended)
        assert played == 2
        assert network.stream_connections > 3
        # The lost answer's command was sent again with its key and applied once: every
        # decision of the seat is the player's, none refused, never taken over.
        keys = network.command_keys
        assert keys[0] == keys[1] and len(set(keys)) == len(keys) - 1
        played = hands(player, 2)
        for hand in played:
            decisions = by_the_player(hand)
            assert decisions and all(a.get("by", "player") == "player" for a in decisions)
        assert taken_over(player, played) == []


@pytest.mark.parametrize(
    ("mode", "code"),
    [("crash", "engine_crashed"), ("illegal", "engine_illegal"), ("slow", "engine_timeout")],
)
def test_a_failing_engine_is_logged_and_the_system_plays_its_seat(service, tmp_path, mode, code):
    player = Client.register(service, f"{mode}-bot")
    log = tmp_path / "bridge.log"
    process = bridge(
        service,
        player.token,
        f"{sys.executable} {MISBEHAVING} {mode} 2",
        "--hands",
        "2",
        "--move-ms",
        "1000",
        log=log,
    )
    assert finished(process, log) == 0, log.read_text()
    text = log.read_text()
    assert f"engine {mode} failed in match" in text and f": {code}: " in text
    assert "the system plays our seat to the end of this hand" in text
    first, second = hands(player, 2)
    # The engine's 2 good decisions, then the system's to the end of the hand.
    decisions = by_the_player(first)
    assert [a.get("by", "player") for a in decisions[:2]] == ["player", "player"]
    assert {a["by"] for a in decisions[2:]} == {"bot"}
    assert any(
        a["action"] == "disconnect" and a["seat"] == first["seat"]
        for a in first["record"]["actions"]
    )
    # The next hand, with the engine started again, begins as the player's own.
    assert by_the_player(second)[0].get("by", "player") == "player"
    assert [item.data["reason"] for item in taken_over(player, [first, second])] == ["left"] * 2
    player.close()


def test_a_bridge_gives_up_after_three_failing_hands_and_leaves_the_table(service, tmp_path):
    player = Client.register(service, "crash-bot")
    log = tmp_path / "bridge.log"
    process = bridge(service, player.token, f"{sys.executable} {MISBEHAVING} crash 0", log=log)
    assert finished(process, log) == 1, log.read_text()
    assert "ddz bridge: engine crash failed 3 hands in a row" in log.read_text()
    for hand in hands(player, 3):
        assert any(
            a["action"] == "disconnect" and a["seat"] == hand["seat"]
            for a in hand["record"]["actions"]
        )
    assert player.my_tables() == []
    player.close()


def test_with_strict_an_engine_failure_is_the_exit_status(service, tmp_path):
    """One hand, in which the engine crashed: played (by the system), but --strict says so
    in its exit status; without it the last line says so."""
    for strict, status in ((["--strict"], 1), ([], 0)):
        player = Client.register(service, "strict-bot")
        log = tmp_path / f"bridge{status}.log"
        process = bridge(
            service,
            player.token,
            f"{sys.executable} {MISBEHAVING} crash 1",
            "--hands",
            "1",
            *strict,
            log=log,
        )
        assert finished(process, log) == status, log.read_text()
        text = log.read_text()
        assert "ddz bridge: 1 hand played, net " in text
        assert "(the engine failed in 1 hand: the system played them)" in text
        assert "(the system played our seat: the engine failed)" in text
        player.close()


def test_ctrl_c_stops_the_bridge_quietly_and_keeps_its_seat(service, tmp_path):
    player = Client.register(service, "interrupted-bot")
    log = tmp_path / "bridge.log"
    process = bridge(service, player.token, EXAMPLE, log=log)
    deadline = time.monotonic() + 60
    while "seated at table" not in log.read_text():
        assert process.poll() is None and time.monotonic() < deadline, log.read_text()
        time.sleep(0.05)
    engines = psutil.Process(process.pid).children()
    process.send_signal(signal.SIGINT)  # as Ctrl-C at its terminal, to the bridge alone
    assert finished(process, log) == 130, log.read_text()
    text = log.read_text()
    assert "ddz bridge: stopped after " in text and "the seat is kept" in text
    assert "Traceback" not in text, text
    assert not psutil.wait_procs(engines, timeout=10)[1], "the engine outlived its bridge"
    assert len(player.my_tables()) == 1
    player.close()


def test_two_bridged_bot_accounts_play_rated_hands_on_the_ladder(service, tmp_path):
    """Two bot accounts ask the lobby for the ladder (a stake of their own, so that they
    meet each other): they are seated together, system bots in the other seats, play
    unattended, and their hands are rated."""
    person = Client.register(service, "not-a-program")
    with pytest.raises(ProblemError) as refused:
        person.quick_match(ladder=True)
    assert refused.value.status == 403 and refused.value.code == "bot_account_required"
    person.close()
    # Two people's: the lobby never seats one person's bot accounts together.
    accounts = [bot_account(service, f"ladder-{i}") for i in range(2)]
    logs = [tmp_path / f"ladder{i}.log" for i in range(2)]
    bridges = [
        bridge(service, a.token, EXAMPLE, "--ladder", "--unit", "7.00", "--hands", "2", log=log)
        for a, log in zip(accounts, logs)
    ]
    for process, log in zip(bridges, logs):
        assert finished(process, log) == 0, log.read_text()
    first, second = (hands(a, 2) for a in accounts)
    assert [h["record"]["match_id"] for h in first] == [h["record"]["match_id"] for h in second]
    for hand in first:
        seats = hand["record"]["seats"]
        assert sum(s["bot_account"] for s in seats) == 2 and sum(s["bot"] for s in seats) == 2
    # Rated by the service's worker once settled: each account's profile, the bots' board.
    deadline = time.monotonic() + 60
    for account in accounts:
        while True:
            profile = httpx.get(f"{service}/v1/players/{account.player_id}").json()
            if profile["hands"] >= 2:
                break
            assert time.monotonic() < deadline, profile
            time.sleep(0.2)
        assert profile["bot_account"] and profile["ratings"][0]["provisional"]
    board = httpx.get(f"{service}/v1/leaderboards", params={"kind": "bots", "limit": 100}).json()
    assert {a.player_id for a in accounts} <= {p["player_id"] for p in board["players"]}
    for account in accounts:
        account.close()


def test_a_refused_token_exits_2_and_says_why(service, tmp_path):
    log = tmp_path / "bridge.log"
    # Beginning with "-", as one token in 64 does: still the token, not another option.
    process = bridge(service, "-not-a-token", EXAMPLE, log=log)
    assert finished(process, log) == 2
    assert "ddz bridge: 401 invalid_token" in log.read_text()
