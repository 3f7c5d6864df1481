"""The event store as several processes use it: each keeps its own cache of the states it
last saw, decides on that, and appends only if the stream is still there. These tests run
two stores (two API workers, say) over one database and check that a store that is behind
never appends on a stale state, never refuses on one, and never applies a key twice."""

from __future__ import annotations

import dataclasses
import logging
import time
import uuid

import psycopg
import pytest
from psycopg_pool import ConnectionPool
from store_support import execute

from service.game import (
    Bid,
    CreateMatch,
    Disconnect,
    GameError,
    MatchSettings,
    TakeSeat,
    deadline,
)
from service.store import (
    Announcer,
    EventStore,
    IdempotencyMismatch,
    Notifier,
    Players,
    VersionConflict,
    open_pool,
)
from service.store import events as store_events
from service.store import pool as store_pool
from service.store.events import StateCache
from service.store.pool import Checkout
from service.store.tables import TableStore


@pytest.fixture(scope="module")
def pool(database_url):
    pool = open_pool(database_url, 4, "ddz-test-store")
    yield pool
    pool.close()


@pytest.fixture()
def stores(pool):
    """Two stores with caches of their own, as two processes have."""
    return EventStore(pool, StateCache()), EventStore(pool, StateCache())


def new_match(store: EventStore) -> uuid.UUID:
    match_id = uuid.uuid4()
    execute(
        store, match_id, lambda _: CreateMatch(str(match_id), MatchSettings.build()), new_match=True
    )
    return match_id


#: Players' ids as the API makes them: the database is shared with the API's tests, whose
#: match list looks the seated players up.
PLAYERS = [str(uuid.uuid4()) for _ in range(4)]


def seat(n: int, player: str | None = None):
    return lambda _: TakeSeat(n, player or PLAYERS[n])


def versions(store: EventStore, match_id: uuid.UUID) -> list[int]:
    return [e.version for e in store.read(match_id)]


def test_a_store_behind_appends_after_the_events_it_missed(stores):
    a, b = stores
    match_id = new_match(a)  # a has the match at version 1 in its cache
    execute(b, match_id, seat(0))
    # Seat 1 is free on a's stale state too: the append must not go in at version 2.
    outcome = execute(a, match_id, seat(1))
    assert [e.version for e in outcome.events] == [3]
    assert [s.player if s else None for s in outcome.state.seats][:2] == PLAYERS[:2]
    assert versions(a, match_id) == [1, 2, 3]
    assert a.load(match_id).state == b.load(match_id).state


def test_a_store_behind_refuses_on_the_latest_state(stores):
    a, b = stores
    match_id = new_match(a)
    execute(b, match_id, seat(1))
    # On a's stale state the player of seat 1 has no seat and seat 2 is free; on the latest
    # it has one.
    with pytest.raises(GameError) as refused:
        execute(a, match_id, seat(2, PLAYERS[1]))
    assert refused.value.code == "already_seated"
    assert versions(a, match_id) == [1, 2]


def dealt(store: EventStore) -> uuid.UUID:
    match_id = new_match(store)
    for n in range(4):
        execute(
            store,
            match_id,
            seat(n),
        )
    return match_id


def test_a_store_behind_accepts_what_only_the_latest_state_allows(stores):
    a, b = stores
    match_id = dealt(a)
    first = a.load(match_id).state.turn
    execute(b, match_id, lambda _: Bid(first, 0))
    # On a's stale state it is still the first seat's turn; on the latest, the next's.
    outcome = execute(a, match_id, lambda _: Bid((first + 1) % 4, 1))
    assert outcome.events[0].event.payload()["seat"] == (first + 1) % 4
    assert outcome.state.version == b.load(match_id).state.version


def test_an_expected_version_a_store_is_stale_at_is_a_conflict(stores):
    a, b = stores
    match_id = new_match(a)
    execute(b, match_id, seat(0))
    with pytest.raises(VersionConflict):
        execute(a, match_id, seat(1), expected_version=1)
    assert versions(a, match_id) == [1, 2]


@pytest.mark.parametrize("retried_by", ["same store", "other store"])
def test_a_key_applies_once_even_when_the_repeat_is_legal_again(pool, stores, retried_by):
    """A retry decided anew could be legal again (here: another free seat); the key,
    written with the first events, still makes it the first outcome."""
    a, b = stores
    match_id = new_match(a)
    b.load(match_id)
    player, _ = Players(pool).create("retrier")
    key = (player, f"{match_id}:k", b"digest")
    first = execute(a, match_id, seat(0), idempotency=key)
    retry = execute(a if retried_by == "same store" else b, match_id, seat(1), idempotency=key)
    assert retry.replayed
    assert [e.version for e in retry.events] == [e.version for e in first.events] == [2]
    assert retry.state == first.state
    assert versions(a, match_id) == [1, 2]
    with pytest.raises(IdempotencyMismatch):
        execute(b, match_id, seat(1), idempotency=(key[0], key[1], b"another request"))


def test_since_gives_the_events_after_a_version_and_the_latest_state(stores):
    a, b = stores
    match_id = new_match(a)
    execute(b, match_id, seat(0))
    execute(b, match_id, seat(1))
    found, latest = a.since(match_id, 2)  # a's cache is at 1, the reader at 2
    assert [e.version for e in found] == [3]
    assert latest.state == b.load(match_id).state
    assert latest.last_recorded_at == found[-1].recorded_at
    assert [e.version for e in a.since(match_id, 0)[0]] == [1, 2, 3]
    assert a.since(match_id, None)[0] == [] and a.since(match_id, 3)[0] == []


def wait_until_listening(notifier: Notifier, pool) -> None:
    """Returns once the notifier's LISTEN is in place. Its connection's first wake may come
    before any watch is registered, so a notification of a match of its own is sent again
    until it wakes this."""
    marker = uuid.uuid4()
    deadline = time.monotonic() + 10
    with notifier.watch(marker) as woken, pool.connection() as conn:
        while not woken.wait(0.1):
            assert time.monotonic() < deadline, "the listener did not connect"
            conn.execute("SELECT pg_notify(%s, %s)", (store_events.NOTIFY_CHANNEL, str(marker)))


@pytest.fixture()
def listening(database_url, pool, stores):
    """A's notifier, listening."""
    a, _ = stores
    notifier = Notifier(database_url, on_event=a.learn)
    wait_until_listening(notifier, pool)
    yield notifier
    notifier.close()


def heard(notifier: Notifier, pool, payload: str | None = None) -> None:
    """Returns once the notifier has handled every notification sent so far (and
    ``payload``): they arrive in order, and a last one for a match of its own wakes this."""
    marker = uuid.uuid4()
    with notifier.watch(marker) as woken, pool.connection() as conn:
        if payload is not None:
            conn.execute("SELECT pg_notify(%s, %s)", (store_events.NOTIFY_CHANNEL, payload))
        conn.execute("SELECT pg_notify(%s, %s)", (store_events.NOTIFY_CHANNEL, str(marker)))
        assert woken.wait(10)


def cached_version(store: EventStore, match_id: uuid.UUID) -> int:
    return store.cache.get(match_id).state.version


def test_a_store_learns_the_events_another_appended_from_notifications(pool, stores, listening):
    a, b = stores
    match_id = new_match(a)
    for n in range(4):  # seats, then the deal (every hand, the commitment) and a bid
        execute(
            b,
            match_id,
            seat(n),
        )
    execute(b, match_id, lambda state: Bid(state.turn, 1))
    heard(listening, pool)
    learned = a.cache.get(match_id)
    fresh = EventStore(pool, StateCache()).load(match_id)
    assert learned.state.version == fresh.state.version == 7
    assert learned == fresh  # the state and the time of the last event, as the table has them


def test_an_event_too_large_for_a_notification_still_wakes_readers(
    monkeypatch, pool, stores, listening
):
    a, b = stores
    match_id = new_match(a)
    monkeypatch.setattr(store_events, "NOTE_ROOM", 10)
    with listening.watch(match_id) as woken:
        execute(b, match_id, seat(0))
        heard(listening, pool)
        assert woken.is_set()
    assert cached_version(a, match_id) == 1  # not learned: a reads what it missed
    assert [e.version for e in execute(a, match_id, seat(1)).events] == [3]


def test_a_notification_with_an_unreadable_event_still_wakes_readers(
    pool, stores, listening, caplog
):
    a, _ = stores
    match_id = new_match(a)
    secret = "no-log-shows-this"
    caplog.set_level(logging.WARNING, logger="service.store.notify")
    heard(listening, pool)
    with listening.watch(match_id) as woken:
        heard(listening, pool, f"{match_id}:2:[{secret}")
        assert woken.is_set()
    assert cached_version(a, match_id) == 1
    assert "could not read the event" in caplog.text and secret not in caplog.text


def test_a_checkout_ends_a_transaction_left_open_as_psycopgs_with_conn_does(database_url):
    """Committed when the block ends, rolled back when it raises: what the pool's own
    ``connection()`` does, which the checkout replaces (a pool of one connection, so that
    the next checkout looks at the same session)."""
    pool = open_pool(database_url, 1, "ddz-test-checkout")
    try:
        with Checkout(pool) as conn:
            conn.execute("BEGIN")
            conn.execute("CREATE TEMPORARY TABLE kept (x integer)")
        with pytest.raises(ZeroDivisionError), Checkout(pool) as conn:
            conn.execute("BEGIN")
            conn.execute("CREATE TEMPORARY TABLE dropped (x integer)")
            1 / 0  # noqa: B018
        with Checkout(pool) as conn:
            tables = conn.execute(
                "SELECT to_regclass('pg_temp.kept') IS NOT NULL,"
                " to_regclass('pg_temp.dropped') IS NOT NULL"
            ).fetchone()
        assert tables == (True, False)
    finally:
        pool.close()


def test_a_checkout_interrupted_in_its_check_gives_the_connection_back(database_url, monkeypatch):
    """Not only a failed check: anything raised in it (a greenlet's timeout) returns the
    connection to the pool (of one connection here, which the next checkout gets)."""

    class Interrupted(BaseException):
        pass

    def interrupted(conn):
        raise Interrupted

    pool = open_pool(database_url, 1, "ddz-test-checkout", timeout=2)
    try:
        monkeypatch.setattr(store_pool, "_has_input", lambda conn: True)
        monkeypatch.setattr(ConnectionPool, "check_connection", staticmethod(interrupted))
        with pytest.raises(Interrupted), Checkout(pool):
            pass
        monkeypatch.undo()
        with Checkout(pool) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
    finally:
        pool.close()


def test_the_store_reads_on_a_connection_of_its_callers_own(database_url, stores):
    """A connection not from the store's pool (which keeps a cursor on each of its
    connections for the statements run most) reads the same."""
    store, _ = stores
    match_id = new_match(store)
    execute(store, match_id, seat(0))
    with psycopg.connect(database_url, autocommit=True) as conn:
        assert store.read(match_id, 0, conn) == store.read(match_id, 0)


def test_load_many_gives_each_match_its_latest_state_from_one_read(stores):
    a, b = stores
    behind, unknown_to_a, current = new_match(a), new_match(b), new_match(a)
    execute(b, behind, seat(0))  # a's cache has this match at version 1, the table at 2
    loaded = a.load_many([behind, unknown_to_a, current, uuid.uuid4()])
    assert set(loaded) == {behind, unknown_to_a, current}  # no events, no match
    for match_id, found in loaded.items():
        assert found == b.load(match_id)
    assert a.load_many([]) == {}


def test_the_deadline_the_append_writes_is_the_games_deadline(pool, stores):
    """The append statement computes the deadline in SQL, for the deadline scan; the API
    and the workers compute it with game.state.deadline: both give the same instant, for
    no seat to act, a player to act, and the system to act."""
    store, _ = stores
    match_id = uuid.uuid4()
    table = MatchSettings.build(turn_seconds=7)
    execute(store, match_id, lambda _: CreateMatch(str(match_id), table), new_match=True)

    def both() -> tuple:
        loaded = store.load(match_id)
        with pool.connection() as conn:
            (written,) = conn.execute(
                "SELECT deadline FROM matches WHERE match_id = %s", (match_id,)
            ).fetchone()
        return written, deadline(loaded.state, loaded.last_recorded_at)

    assert both() == (None, None)
    for n in range(4):
        execute(
            store,
            match_id,
            seat(n),
        )
    written, computed = both()
    assert written is not None and written == computed
    execute(store, match_id, lambda state: Bid(state.turn, 1))
    written, computed = both()
    assert written is not None and written == computed
    execute(store, match_id, lambda state: Disconnect(state.turn, "left"))
    assert store.load(match_id).state.is_system(store.load(match_id).state.turn)
    written, computed = both()
    assert written == computed


def test_an_append_left_unannounced_still_wakes_the_match_readers(
    monkeypatch, database_url, pool, stores
):
    """A process that dies between an append's commit and its notification: the readers of
    the match are woken by the listener's check of the watched matches' versions."""
    a, b = stores
    match_id = new_match(a)
    notifier = Notifier(database_url, check_seconds=0.2)
    try:
        wait_until_listening(notifier, pool)
        with notifier.watch(match_id) as woken:
            assert woken.wait(10), "the first check wakes a watched match once"
            woken.clear()
            monkeypatch.setattr(EventStore, "announce", staticmethod(lambda *args: None))
            assert not woken.wait(0.6), "woken with nothing new"
            execute(b, match_id, seat(0))
            assert woken.wait(10), "the unannounced append was not found"
    finally:
        notifier.close()


def test_the_announcer_notifies_every_append_in_order(pool, database_url):
    """A process's announcer sends its commands' notifications after they answered: every
    event of every match is announced, each match's in version order, carrying its event
    (another process's cache learns it), also those still waiting when it closes."""
    import threading

    import psycopg

    announcer = Announcer(pool)
    store = EventStore(pool, StateCache(), announcer)
    other = EventStore(pool, StateCache())
    notes: list[str] = []
    with psycopg.connect(database_url, autocommit=True) as listener:
        listener.execute(f"LISTEN {store_events.NOTIFY_CHANNEL}")
        matches = [new_match(store) for _ in range(6)]
        for match_id in matches:
            other.load(match_id)

        def seat_all(match_id: uuid.UUID) -> None:
            for n in range(4):
                execute(store, match_id, seat(n))

        threads = [threading.Thread(target=seat_all, args=(m,)) for m in matches]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        announcer.close()
        expected = sum(len(store.read(m)) for m in matches)
        ours = {str(m) for m in matches}
        # The seats also wake their players' own streams, by the players' names.
        for note in listener.notifies(timeout=5):
            if note.payload.partition(":")[0] in ours:
                notes.append(note.payload)
            if len(notes) == expected:
                break
    seen: dict[str, list[int]] = {}
    for payload in notes:
        match, version, event = payload.split(":", 2)
        assert event, "the note carries its event"
        seen.setdefault(match, []).append(int(version))
        other.learn(uuid.UUID(match), int(version), event)
    for match_id in matches:
        assert seen[str(match_id)] == versions(store, match_id)
        assert other.cache.get(match_id).state == store.load(match_id).state


@dataclasses.dataclass(frozen=True)
class Version:
    version: int
    ended: bool


@dataclasses.dataclass(frozen=True)
class Folded:
    """A stream's folded state as :class:`StateCache` sees it."""

    state: Version

    @property
    def ended(self) -> bool:
        return self.state.ended


def test_hands_that_ended_do_not_push_out_the_states_of_hands_in_play():
    """A process sees every hand end; kept among the live ones, the ended states filled its
    memory for as long as it took ``size`` of them to end, and then pushed out the states
    of the hands still being played."""

    cache: StateCache[Folded] = StateCache(16)
    playing = [uuid.uuid4() for _ in range(15)]
    for stream in playing:
        cache.put(stream, Folded(Version(10, False)))
    ended = [uuid.uuid4() for _ in range(100)]
    for stream in ended:
        cache.put(stream, Folded(Version(5, False)))
        cache.put(stream, Folded(Version(90, True)))
    assert all(cache.get(stream) == Folded(Version(10, False)) for stream in playing)
    assert [cache.get(stream) for stream in ended[-2:]] == [Folded(Version(90, True))] * 2
    assert sum(cache.get(stream) is not None for stream in ended) == 2  # an eighth of 16
    # A late copy of an earlier version does not hide the ended state.
    cache.put(ended[-1], Folded(Version(50, False)))
    assert cache.get(ended[-1]) == Folded(Version(90, True))


def test_a_hand_last_seen_in_play_is_forgotten_once_nobody_uses_it(monkeypatch):
    """A process does not see the end of a hand whose last command another process ran
    (the other API process, a worker's bot turn): its last state of it, in play, stayed
    until ``size`` more hands had come, and its memory grew all that time (an API process
    by some 10 % over the 40 minutes of an hour's soak)."""
    monkeypatch.setattr(StateCache, "IDLE_SECONDS", 0.5)
    cache: StateCache[Folded] = StateCache(2048)
    elsewhere, here = uuid.uuid4(), uuid.uuid4()
    for stream in (elsewhere, here):
        cache.put(stream, Folded(Version(40, False)))
    for _ in range(4):
        time.sleep(0.2)
        assert cache.get(here) is not None  # still played here: kept, however long
    cache.put(uuid.uuid4(), Folded(Version(1, False)))
    assert cache.get(elsewhere) is None
    assert cache.get(here) is not None


def test_a_process_remembers_the_tables_of_the_matches_it_read_last(pool, monkeypatch):
    """What a match is (its table, or none) is read once per process, for the matches read
    most recently: the least recently read goes first, not the whole cache at once."""
    monkeypatch.setattr(TableStore, "HANDS_CACHE", 2)
    tables = TableStore(EventStore(pool, StateCache()))
    reads = []
    run = tables._run
    monkeypatch.setattr(tables, "_run", lambda work, conn=None: reads.append(1) or run(work, conn))
    first, second, third = (uuid.uuid4() for _ in range(3))
    for match_id in (first, second, first, third):
        assert tables.hand_of(match_id) is None  # no table dealt it
    assert len(reads) == 3  # the second read of the first was remembered
    tables.hand_of(first)  # read most recently but one: still remembered
    assert len(reads) == 3
    tables.hand_of(second)  # least recently read when the third came: forgotten
    assert len(reads) == 4
