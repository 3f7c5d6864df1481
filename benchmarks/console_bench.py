"""How fast the operators' console answers with a long history: the Ledger page and the
match list, at a number of settled hands seeded in bulk.

    python benchmarks/console_bench.py [--hands N] [--samples S] [--smoke]

Seeds a scratch database by SQL (fast: a year's history in seconds): players, then
``--hands`` ended and settled matches spread over the last 365 days, each with the
settlement, ledger entries and stored verdict of one hand played on the pure engine (one
person at seat 2, bots at the others; its person drawn from the players), then signs an
operator in and times each page ``--samples`` times through the app (no HTTP in between:
what is measured is the page's own work, its queries and its template). The target
(issue 31): each page in 300 ms or less at 100,000 settled hands.
"""

from __future__ import annotations

import time
from decimal import Decimal

from common import command_line, flushed, parse, scratch_database, spread

from service.api import create_app
from service.config import Config
from service.game import MatchSettings
from service.game.bot.levels import policy
from service.game.simulate import hand_seed, play_hand
from service.store.ledger import movements

PLAYERS = 1000
PASSWORD = "a long benchmark passphrase"
#: The pages timed: (label, path).
PAGES = (
    ("Ledger page", "/console/ledger"),
    ("match list", "/console/matches"),
    ("match list, page 40", "/console/matches?page=40"),
    ("match list, by a player's name", "/console/matches?player=player-777"),
    ("match list, ended, by 111 players' names", "/console/matches?status=ended&player=player-7"),
)


def seed(url: str, hands: int) -> None:
    """``hands`` settled matches of one template hand, and :data:`PLAYERS` players."""
    import psycopg
    from psycopg.types.json import Jsonb

    table = MatchSettings.build()
    players = [policy("normal", seed=f"console-bench:{n}") for n in range(4)]
    _, state = play_hand(table, hand_seed("console-bench", 0), players)
    assert state.result is not None
    result = Jsonb(state.result.to_json())
    template = [
        (movement, seat, kind, amount)
        for movement, entries in enumerate(movements(state))
        for _, seat, kind, amount in entries
    ]
    count = len(template)
    with psycopg.connect(url, autocommit=True) as conn:
        # Bulk loading: the entries' per-row balance trigger is the database's check of
        # each settlement as it is written; the template balances (movements() says so).
        conn.execute("SET session_replication_role = replica")
        conn.execute(
            "INSERT INTO players (player_id, name, created_at)"
            " SELECT gen_random_uuid(), 'player-' || n,"
            " now() - interval '400 days' FROM generate_series(1, %s) n",
            (PLAYERS,),
        )
        conn.execute(
            "CREATE TEMP TABLE seeded AS SELECT gen_random_uuid() AS match_id,"
            " (array(SELECT player_id FROM players ORDER BY player_id))[1 + n %% %s] AS player,"
            " now() - (n::float / %s) * interval '365 days' AS at"
            " FROM generate_series(1, %s) n",
            (PLAYERS, hands, hands),
        )
        conn.execute(
            "INSERT INTO matches (match_id, ruleset, turn_seconds, status, phase, version, seats,"
            " settled, created_at, updated_at)"
            " SELECT match_id, %s, 30, 'ended', 'ended', 80,"
            " jsonb_build_array(jsonb_build_object('player', null, 'bot', true),"
            "  jsonb_build_object('player', null, 'bot', true),"
            "  jsonb_build_object('player', player, 'bot', false),"
            "  jsonb_build_object('player', null, 'bot', true)),"
            " true, at, at + interval '5 minutes' FROM seeded",
            (table.ruleset.name,),
        )
        conn.execute(
            "INSERT INTO settlements (match_id, result, settled_at)"
            " SELECT match_id, %s, at + interval '5 minutes' FROM seeded",
            (result,),
        )
        conn.execute(
            "INSERT INTO ledger_entries (match_id, movement, account, seat, kind, amount,"
            " created_at)"
            " SELECT s.match_id, t.movement,"
            " CASE WHEN t.seat IS NULL THEN 'house' WHEN t.seat = 2 THEN 'player:' || s.player"
            "  ELSE 'bots' END, t.seat, t.kind, t.amount, s.at + interval '5 minutes'"
            " FROM seeded s, unnest(%s::int[], %s::int[], %s::text[], %s::numeric[])"
            "  AS t (movement, seat, kind, amount)",
            [list(column) for column in zip(*template)] if template else [[], [], [], []],
        )
        conn.execute(
            "INSERT INTO ledger_verdicts (match_id, problems, entries, total, checked_at)"
            " SELECT match_id, '{}', %s, 0, at + interval '5 minutes' FROM seeded",
            (count,),
        )
        conn.execute("ANALYZE")
    assert sum((a for *_, a in template), Decimal(0)) == 0


def main() -> None:
    parser = command_line(__doc__, postgres=True, redis_database=True)
    parser.add_argument("--hands", type=int, default=100_000)
    parser.add_argument("--samples", type=int, default=20)
    args = parse(parser, hands=200, samples=3)
    with scratch_database(args.admin_url) as (_, url), flushed(args.redis_url) as redis_url:
        started = time.perf_counter()
        seed(url, args.hands)
        print(f"seeded {args.hands:,} settled hands in {time.perf_counter() - started:.1f} s")
        app = create_app(Config(database_url=url, redis_url=redis_url, rate_limits=False))
        app.extensions["ddz"].operators.add("bench", "auditor", PASSWORD)
        browser = app.test_client()
        page = browser.get("/console/sign-in").get_data(as_text=True)
        token = page.split('name="csrf_token" value="')[1].split('"')[0]
        signed = browser.post(
            "/console/sign-in", data={"name": "bench", "password": PASSWORD, "csrf_token": token}
        )
        assert signed.status_code == 302, signed.status_code
        for label, path in PAGES:
            times = []
            for _ in range(args.samples + 1):
                begun = time.perf_counter()
                answer = browser.get(path)
                times.append(time.perf_counter() - begun)
                assert answer.status_code == 200, (path, answer.status_code)
            spread(f"{label} ({args.hands:,} hands)", times[1:])  # the first warms up
        app.extensions["ddz"].close()


if __name__ == "__main__":
    main()
