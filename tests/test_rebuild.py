"""``ddz rebuild``: every read model made again from the events. A database with a table
that played a hand (its player timed out and left with it), a lobby ticket seated at a
table of bots whose hand is under way, a ticket still waiting and a hand of bots settled;
each read model (and the ledger, which refuses changes, so it is damaged the way a
restored or hand-edited database could be: rows gone) is then damaged; ``--check`` lists
every difference and writes nothing; the rebuild makes every row again exactly as it was,
and ``--check`` then finds nothing."""

from __future__ import annotations

import io
import sys
import threading
import uuid

import psycopg
import pytest
from api_support import OP, bearer
from jobs import bot_match, drain, new_player, new_table, run_burst

import workers.context
from service.cli import main

# Slow: plays hands through real workers and waits for a deadline (bin/test --fast leaves it out).
pytestmark = pytest.mark.slow

#: Each read model as a sorted list of rows (the ledger's without the ids and times a
#: rewritten row gets anew; a ticket without the time it was last changed).
SNAPSHOT = {
    "matches": "SELECT * FROM matches ORDER BY match_id",
    "tables": "SELECT * FROM tables ORDER BY table_id",
    "table_hands": "SELECT * FROM table_hands ORDER BY match_id",
    "player_streams": "SELECT * FROM player_streams ORDER BY player_id, stream_id, from_version",
    "lobby_tickets": "SELECT ticket_id, player_id, settings, allow_bots, status, table_id,"
    " created_at FROM lobby_tickets ORDER BY ticket_id",
    "settlements": "SELECT match_id, result FROM settlements ORDER BY match_id",
    "ledger_entries": "SELECT match_id, movement, account, seat, kind, amount FROM ledger_entries"
    " ORDER BY match_id, movement, account, seat, amount",
    "player_figures": "SELECT * FROM player_figures ORDER BY player_id",
    "ledger_totals": "SELECT * FROM ledger_totals ORDER BY slot",
}


def snapshot(db) -> dict[str, list[tuple]]:
    return {name: db.execute(sql).fetchall() for name, sql in SNAPSHOT.items()}


def rebuild(*arguments: str) -> tuple[int, str]:
    """``ddz rebuild`` in this process (on DATABASE_URL, set by jobs_env): its exit status
    and what it printed on stdout."""
    out, err = io.StringIO(), io.StringIO()
    stdout, stderr = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out, err
    try:
        status = main(["rebuild", *arguments])
    finally:
        sys.stdout, sys.stderr = stdout, stderr
    assert "streams" in err.getvalue()  # the progress, on stderr
    return status, out.getvalue()


def played(api, rconn, monkeypatch) -> dict[str, str]:
    """The data described in the module's doc; the ids of what the test damages."""
    _, gone = new_player(api, "gone")
    table_id = new_table(api, gone, bots_after=0, next_hand_seconds=0, turn_seconds=1)["table_id"]
    run_burst(rconn)  # the bots take the other seats, and the hand is dealt

    def left() -> bool:
        r = api.get(f"/v1/tables/{table_id}", headers=bearer(gone))
        return r.json["hands"] == 1

    drain(rconn, until=left)
    monkeypatch.setenv("DDZ_LOBBY_BOTS_AFTER", "0")
    workers.context.context.cache_clear()
    _, lone = new_player(api, "lone")
    seated = api.post("/v1/lobby/tickets", json={"unit": "7.00"}, headers=bearer(lone)).json
    _, picky = new_player(api, "picky")
    body = {"unit": "9.00", "allow_bots": False}
    assert api.post("/v1/lobby/tickets", json=body, headers=bearer(picky)).status_code == 201
    ctx = workers.context.context()
    assert ctx.tables.match_tickets(0, 0) == 1
    run_burst(rconn)
    bots = bot_match(api)
    drain(
        rconn,
        until=lambda: api.get(f"/v1/matches/{bots}/settlement", headers=OP).status_code == 200,
    )
    return {"table": table_id, "ticket": seated["ticket_id"], "bots": bots}


def test_rebuild_makes_every_read_model_again_exactly_and_check_finds_each_damage(
    api, db, rconn, jobs_env, monkeypatch, worker_database_url
):
    ids = played(api, rconn, monkeypatch)
    status, out = rebuild("--check")
    assert (status, out) == (0, ""), out
    before = snapshot(db)
    table_id, bots = ids["table"], ids["bots"]
    (hand,) = db.execute(
        "SELECT match_id FROM table_hands WHERE table_id = %s", (table_id,)
    ).fetchone()
    (lobby_table,) = db.execute(
        "SELECT table_id FROM lobby_tickets WHERE ticket_id = %s", (ids["ticket"],)
    ).fetchone()
    (under_way,) = db.execute(
        "SELECT match_id FROM matches WHERE status = 'playing' AND match_id IN"
        " (SELECT match_id FROM table_hands WHERE table_id = %s)",
        (lobby_table,),
    ).fetchone()
    orphan = uuid.uuid4()
    (gone,) = db.execute("SELECT player_id FROM players WHERE name = 'gone'").fetchone()

    # The damage: each read model wrong in each way it can be.
    db.execute(
        "UPDATE matches SET status = 'playing', phase = 'playing' WHERE match_id = %s", (hand,)
    )
    db.execute(
        "UPDATE matches SET deadline = deadline + interval '1 hour' WHERE match_id = %s",
        (under_way,),
    )
    db.execute(
        "INSERT INTO matches (match_id, ruleset, turn_seconds, status, phase, version, seats)"
        " VALUES (%s, 'shanghai-platform', 30, 'open', 'seating', 1, '[]')",
        (orphan,),
    )
    db.execute("UPDATE tables SET seats = '[]', due_at = now() WHERE table_id = %s", (table_id,))
    db.execute("UPDATE tables SET hands = 7 WHERE table_id = %s", (lobby_table,))
    db.execute("DELETE FROM table_hands WHERE match_id = %s", (hand,))
    db.execute("UPDATE table_hands SET number = 9 WHERE table_id = %s", (lobby_table,))
    db.execute("UPDATE player_streams SET until_version = NULL WHERE stream_id = %s", (table_id,))
    db.execute("DELETE FROM player_streams WHERE stream_id = %s", (lobby_table,))
    db.execute(
        "INSERT INTO player_streams (player_id, stream_id, from_version) VALUES (%s, %s, 1)",
        (uuid.uuid4(), table_id),
    )
    db.execute(
        "UPDATE lobby_tickets SET status = 'waiting', table_id = NULL WHERE ticket_id = %s",
        (ids["ticket"],),
    )
    db.execute("UPDATE player_figures SET hands = hands + 5 WHERE player_id = %s", (gone,))
    # The ledger refuses deletes: as a restore from a damaged backup could leave it.
    with db.transaction():
        db.execute("SET LOCAL session_replication_role = replica")
        db.execute("DELETE FROM ledger_entries WHERE match_id = %s", (hand,))
        db.execute("DELETE FROM ledger_entries WHERE match_id = %s", (bots,))
        db.execute("DELETE FROM settlements WHERE match_id = %s", (bots,))
        db.execute("DELETE FROM ledger_verdicts WHERE match_id IN (%s, %s)", (hand, bots))
    damaged = snapshot(db)
    assert damaged != before

    status, out = rebuild("--check")
    assert status == 1
    assert snapshot(db) == damaged  # checking writes nothing
    lines = out.splitlines()
    for expected in (
        f"matches {hand}: status is 'playing', the events say 'ended'",
        f"matches {under_way}: deadline is",
        f"matches {orphan}: no such stream",
        f"tables {table_id}: ",
        f"tables {lobby_table}: hands is 7",
        f"table_hands {hand}: missing",
        f"lobby_tickets {ids['ticket']}: waiting at None, its seating says seated at {lobby_table}",
        f"settlements {bots}: missing, its events say settled",
        f"ledger_entries {hand}: missing",
    ):
        assert any(line.startswith(expected) for line in lines), (expected, out)
    # Its balance differs too: the entries of its hand are gone.
    figures = [line for line in lines if line.startswith(f"player_figures {gone}: balance is")]
    assert figures and "hands is 6, the ledger and the events say 1" in figures[0], out
    assert any("no such join" in line for line in lines)
    assert any(line.startswith("player_streams") and "missing" in line for line in lines)
    assert any(line.startswith("player_streams") and "until None" in line for line in lines)
    assert any(f"hand 9 of table {lobby_table}" in line for line in lines)

    status, out = rebuild()
    assert status == 0, out
    assert snapshot(db) == before
    # What it wrote was checked, and its verdict stored, as the settlement job does.
    verdicts = db.execute(
        "SELECT match_id::text, problems FROM ledger_verdicts WHERE match_id IN (%s, %s)",
        (hand, bots),
    ).fetchall()
    assert sorted(verdicts) == sorted([(str(hand), []), (bots, [])])
    status, out = rebuild("--check")
    assert (status, out) == (0, ""), out


def test_a_rebuild_running_beside_play_never_undoes_an_append(
    api, db, rconn, jobs_env, worker_database_url
):
    """Online: rebuilds run over and over while hands are played, each after a read model
    row was damaged; no append is undone (the last rebuild finds nothing to write, and the
    check nothing different)."""
    from service.app.rebuild import rebuild as rebuild_all
    from service.store import EventStore, open_pool

    stop = threading.Event()
    passes = []
    pool = open_pool(worker_database_url, 2, "rebuild-beside-play")

    def rebuild_on() -> None:
        while not stop.is_set():
            with psycopg.connect(worker_database_url, autocommit=True) as conn:
                conn.execute(
                    "UPDATE matches SET phase = 'damaged' WHERE match_id ="
                    " (SELECT match_id FROM matches ORDER BY random() LIMIT 1)"
                )
            passes.append(rebuild_all(pool, EventStore(pool), write=True).read_models.left)

    thread = threading.Thread(target=rebuild_on)
    thread.start()
    try:
        played = [bot_match(api) for _ in range(3)]
        drain(
            rconn,
            until=lambda: all(
                api.get(f"/v1/matches/{m}/settlement", headers=OP).status_code == 200
                for m in played
            ),
        )
    finally:
        stop.set()
        thread.join()
        pool.close()
    assert len(passes) >= 2 and not any(passes), [p for p in passes if p]
    status, out = rebuild()
    assert status == 0, out
    status, out = rebuild("--check")
    assert (status, out) == (0, ""), out


def test_a_wrong_ledger_entry_is_left_as_it_is_and_only_the_check_names_it(
    api, db, rconn, jobs_env
):
    """The ledger is never rewritten: a rebuild neither changes a wrong entry nor looks at
    it (it exits 0, saying nothing of it); ``--check``, whose ledger check recomputes every
    settled hand, names it and exits 1 (docs/operations.md, "Rebuilding the read models")."""
    # A hand can settle with no point moved (every stake 0 after the cap, no cut, no
    # penalty): hands are played until one has a movement to damage.
    for _ in range(5):
        match_id = bot_match(api)
        drain(
            rconn,
            until=lambda match_id=match_id: (
                api.get(f"/v1/matches/{match_id}/settlement", headers=OP).status_code == 200
            ),
        )
        entries = db.execute(
            "SELECT entry_id FROM ledger_entries WHERE match_id = %s AND movement = 0"
            " ORDER BY entry_id LIMIT 2",
            (match_id,),
        ).fetchall()
        if entries:
            break
    # A point moved from one side of a movement to the other: the movement still adds to
    # zero, but no longer books the settlement (as a hand-edited database could).
    first, second = entries
    with db.transaction():
        db.execute("SET LOCAL session_replication_role = replica")
        db.execute("UPDATE ledger_entries SET amount = amount + 1 WHERE entry_id = %s", first)
        db.execute("UPDATE ledger_entries SET amount = amount - 1 WHERE entry_id = %s", second)
    damaged = snapshot(db)
    status, out = rebuild()
    assert (status, out) == (0, ""), out
    assert snapshot(db)["ledger_entries"] == damaged["ledger_entries"]
    status, out = rebuild("--check")
    assert status == 1 and match_id in out, out
    # The damage undone: another test of this database checks every settled hand.
    with db.transaction():
        db.execute("SET LOCAL session_replication_role = replica")
        db.execute("UPDATE ledger_entries SET amount = amount - 1 WHERE entry_id = %s", first)
        db.execute("UPDATE ledger_entries SET amount = amount + 1 WHERE entry_id = %s", second)
