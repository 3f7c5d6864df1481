"""How fast the operators' console answers with a long history: every list page (the
match list, the players page, the audit trail) at its first page, deep pages and sorts,
and the Ledger page, at a number of players and settled hands seeded in bulk.

    python benchmarks/console_bench.py [--players P] [--hands N] [--samples S] [--rounds R]
                                       [--smoke]

Seeds a scratch database by SQL, set-wise (``generate_series``, no row sent from here):
``--players`` players (1 % of them bot accounts), ``--hands`` ended and settled matches
spread over the last 365 days, each with the settlement, ledger entries and stored
verdict of one hand played on the pure engine (one person at seat 2, drawn from the
players, bots at the others; one hand in fifty with a disconnect of that person), a
thousand matches under way, and an audit trail of ``--hands``/10 entries; then the
players' figures as ``ddz rebuild`` makes them (``player_figures_made()``). It prints how
long each step took. Then it signs an operator in and times each page ``--samples`` times
through the app (no HTTP in between: what is measured is the page's own work, its queries
and its template), the whole round ``--rounds`` times, and prints each page's median and
p95. Deep pages are reached as the pager reaches them (its link's key, taken from the page
before) and by an old link's page number (``?page=N``, which skips keys).

The targets (issue 41): every page in 300 ms or less at 100,000 players and 1,000,000
hands (the defaults: seeding takes a few minutes).
"""

from __future__ import annotations

import html
import re
import statistics
import time
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from common import command_line, flushed, parse, percentile, scratch_database

from service.api import create_app
from service.config import Config
from service.game import MatchSettings
from service.game.bot.levels import policy
from service.game.simulate import hand_seed, play_hand
from service.store.ledger import movements

PASSWORD = "a long benchmark passphrase"
#: Matches under way beside the settled history (the house sort lists them last).
PLAYING = 1000
#: One hand in this many has a disconnect of its person.
DISCONNECT_EVERY = 50
#: A page deep in a list: as far as an operator paging back through a year goes, and
#: where the old lists' OFFSET cost the most.
DEEP = 2000

#: The pages timed: (label, path). A path with ``{deep}`` is a deep page, reached twice:
#: by the key its previous page's link gives, and by the old link's page number.
PAGES = (
    ("Ledger page", "/console/ledger"),
    ("match list", "/console/matches"),
    ("match list, page {deep}", "/console/matches?page={deep}"),
    ("match list, oldest first", "/console/matches?order=asc"),
    ("match list, by the house", "/console/matches?sort=house"),
    ("match list, by the house, page {deep}", "/console/matches?sort=house&page={deep}"),
    ("match list, ended", "/console/matches?status=ended"),
    ("match list, one month", "/console/matches?since={month}&until={month_end}"),
    ("match list, by a player's name", "/console/matches?player=player-777"),
    ("match list, by many players' names", "/console/matches?status=ended&player=player-7"),
    ("players page", "/console/players"),
    ("players page, page {deep}", "/console/players?page={deep}"),
    ("players page, by name", "/console/players?sort=name&order=asc"),
    ("players page, by balance", "/console/players?sort=balance"),
    ("players page, by hands", "/console/players?sort=hands"),
    ("players page, by disconnects, lowest", "/console/players?sort=disconnects&order=asc"),
    ("players page, bot accounts", "/console/players?kind=bot_accounts&sort=hands"),
    ("players page, search a name", "/console/players?q=player-4242"),
    ("players page, search many names", "/console/players?q=player-7&sort=balance"),
    ("audit trail", "/console/audit"),
    ("audit trail, page {deep}", "/console/audit?page={deep}"),
)


def seed(url: str, players: int, hands: int, say: Callable[[str], None]) -> None:
    """``hands`` settled matches of one template hand, :data:`PLAYING` matches under way,
    ``players`` players with their figures, and an audit trail."""
    import psycopg
    from psycopg.types.json import Jsonb

    table = MatchSettings.build()
    bots = [policy("normal", seed=f"console-bench:{n}") for n in range(4)]
    _, state = play_hand(table, hand_seed("console-bench", 0), bots)
    assert state.result is not None
    result = Jsonb(state.result.to_json())
    template = [
        (movement, seat, kind, amount)
        for movement, entries in enumerate(movements(state))
        for _, seat, kind, amount in entries
    ]
    assert sum((a for *_, a in template), Decimal(0)) == 0
    seats = (
        "jsonb_build_array(jsonb_build_object('player', null, 'bot', true),"
        " jsonb_build_object('player', null, 'bot', true),"
        " jsonb_build_object('player', player, 'bot', false),"
        " jsonb_build_object('player', null, 'bot', true))"
    )
    steps: list[tuple[str, str, Any]] = [
        (
            "players",
            "INSERT INTO players (player_id, name, bot_account, created_at)"
            " SELECT gen_random_uuid(), 'player-' || n, n %% 100 = 0,"
            " now() - interval '400 days' + n * interval '1 minute'"
            " FROM generate_series(1, %s) n",
            (players,),
        ),
        (
            "hands drawn",
            "CREATE TEMP TABLE seeded AS SELECT gen_random_uuid() AS match_id,"
            " (array(SELECT player_id FROM players ORDER BY player_id))[1 + n %% %s] AS player,"
            " n %% %s = 0 AS dropped,"
            " now() - (n::float / %s) * interval '365 days' AS at"
            " FROM generate_series(1, %s) n",
            (players, DISCONNECT_EVERY, hands, hands),
        ),
        (
            "matches",
            "INSERT INTO matches (match_id, ruleset, turn_seconds, status, phase, version, seats,"
            " settled, created_at, updated_at)"
            f" SELECT match_id, %s, 30, 'ended', 'ended', 80, {seats},"
            " true, at, at + interval '5 minutes' FROM seeded",
            (table.ruleset.name,),
        ),
        (
            "matches under way",
            "INSERT INTO matches (match_id, ruleset, turn_seconds, status, phase, version, seats,"
            " settled, created_at, updated_at)"
            f" SELECT gen_random_uuid(), %s, 30, 'playing', 'play', 30, {seats}, false,"
            " now() - n * interval '1 second', now()"
            " FROM (SELECT player_id AS player, row_number() OVER () AS n FROM players"
            "  LIMIT %s) AS p",
            (table.ruleset.name, PLAYING),
        ),
        (
            "settlements",
            "INSERT INTO settlements (match_id, result, settled_at)"
            " SELECT match_id, %s, at + interval '5 minutes' FROM seeded",
            (result,),
        ),
        (
            "ledger entries",
            "INSERT INTO ledger_entries (match_id, movement, account, seat, kind, amount,"
            " created_at)"
            " SELECT s.match_id, t.movement,"
            " CASE WHEN t.seat IS NULL THEN 'house' WHEN t.seat = 2 THEN 'player:' || s.player"
            "  ELSE 'bots' END, t.seat, t.kind, t.amount, s.at + interval '5 minutes'"
            " FROM seeded s, unnest(%s::int[], %s::int[], %s::text[], %s::numeric[])"
            "  AS t (movement, seat, kind, amount)",
            [list(column) for column in zip(*template)] if template else [[], [], [], []],
        ),
        (
            "verdicts",
            "INSERT INTO ledger_verdicts (match_id, problems, entries, total, checked_at)"
            " SELECT match_id, '{}', %s, 0, at + interval '5 minutes' FROM seeded",
            (len(template),),
        ),
        (
            "disconnects",
            # A disconnect event only (the template hand's record has none): what the
            # players' figures count.
            "INSERT INTO events (stream_id, version, type, schema_version, payload, recorded_at)"
            " SELECT match_id, 40, 'disconnect', 1,"
            " jsonb_build_object('seat', 2, 'reason', 'deadline'), at + interval '2 minutes'"
            " FROM seeded WHERE dropped",
            None,
        ),
        (
            "audit trail",
            "INSERT INTO audit_trail (at, operator, action, match_id, via, address)"
            " SELECT at, 'auditor-' || (hashtext(match_id::text) & 15), 'replay', match_id,"
            " 'console', '10.0.0.1' FROM seeded TABLESAMPLE BERNOULLI (10) ORDER BY at",
            None,
        ),
        (
            "players' figures",
            "INSERT INTO player_figures (player_id, balance, hands, disconnects)"
            " SELECT * FROM player_figures_made()",
            None,
        ),
        (
            "ledger totals",
            "DELETE FROM ledger_totals;"
            " INSERT INTO ledger_totals SELECT * FROM ledger_totals_made()",
            None,
        ),
        # As autovacuum leaves a table that grew: its visibility map set (index-only
        # scans), the seats' index's pending entries merged, the planner's statistics.
        ("vacuum", "VACUUM ANALYZE", None),
    ]
    with psycopg.connect(url, autocommit=True) as conn:
        # Bulk loading: the triggers (each ledger movement's balance, the events' and the
        # ledger's immutability, the figures kept per row) are off; the template balances
        # (checked above) and the figures are made from it all at the end, as a rebuild
        # makes them.
        conn.execute("SET session_replication_role = replica")
        conn.execute("SET maintenance_work_mem = '256MB'")
        for label, sql, params in steps:
            started = time.perf_counter()
            conn.execute(sql, params)
            say(f"  {label}: {time.perf_counter() - started:.1f} s")


#: The key of the next page in a page's pager.
NEXT = re.compile(r'<a href="\?([^"]*)" id="next">')


def signed_in(app: Any) -> Any:
    browser = app.test_client()
    page = browser.get("/console/sign-in").get_data(as_text=True)
    token = page.split('name="csrf_token" value="')[1].split('"')[0]
    signed = browser.post(
        "/console/sign-in", data={"name": "bench", "password": PASSWORD, "csrf_token": token}
    )
    assert signed.status_code == 302, signed.status_code
    return browser


def by_key(browser: Any, path: str) -> str:
    """The path of the page after ``path`` as its pager links it (by the last row's key)."""
    answer = browser.get(path)
    assert answer.status_code == 200, (path, answer.status_code)
    found = NEXT.search(answer.get_data(as_text=True))
    assert found is not None, f"{path} has no next page"
    return path.split("?")[0] + "?" + html.unescape(found.group(1))


def timed(browser: Any, path: str, samples: int) -> list[float]:
    times = []
    for _ in range(samples + 1):
        begun = time.perf_counter()
        answer = browser.get(path)
        times.append(time.perf_counter() - begun)
        assert answer.status_code == 200, (path, answer.status_code)
    return times[1:]  # the first warms up


def main() -> None:
    parser = command_line(__doc__, postgres=True, redis_database=True)
    parser.add_argument("--players", type=int, default=100_000)
    parser.add_argument("--hands", type=int, default=1_000_000)
    parser.add_argument("--samples", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--deep", type=int, default=DEEP, help="the deep pages' number")
    args = parse(parser, players=300, hands=3000, samples=3, rounds=1, deep=3)
    with scratch_database(args.admin_url) as (_, url), flushed(args.redis_url) as redis_url:
        print(f"seeding {args.players:,} players and {args.hands:,} settled hands:", flush=True)
        started = time.perf_counter()
        seed(url, args.players, args.hands, lambda line: print(line, flush=True))
        print(f"seeded in {time.perf_counter() - started:.1f} s", flush=True)
        app = create_app(Config(database_url=url, redis_url=redis_url, rate_limits=False))
        app.extensions["ddz"].operators.add("bench", "auditor", PASSWORD)
        browser = signed_in(app)
        month = time.strftime("%Y-%m", time.gmtime(time.time() - 180 * 86400))
        values = {"deep": args.deep, "month": f"{month}-01", "month_end": f"{month}-28"}
        paths: list[tuple[str, str]] = []
        for label, path in PAGES:
            if "{deep}" in path:
                before = path.replace("{deep}", str(args.deep - 1))
                paths.append((label.format(**values) + ", by key", by_key(browser, before)))
                paths.append((label.format(**values) + ", by number", path.format(**values)))
            else:
                paths.append((label, path.format(**values)))
        sizes = f"{args.players:,} players, {args.hands:,} hands"
        for round_ in range(1, args.rounds + 1):
            print(f"round {round_} of {args.rounds} ({sizes}):", flush=True)
            for label, path in paths:
                times = timed(browser, path, args.samples)
                print(
                    f"  {label:<52} median {statistics.median(times) * 1e3:8.1f} ms"
                    f"   p95 {percentile(times, 0.95) * 1e3:8.1f} ms   ({len(times)} samples)",
                    flush=True,
                )
        app.extensions["ddz"].close()


if __name__ == "__main__":
    main()
