"""The ``ddz`` command."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, TextIO

from .rules import SEATS, RulesError, Ruleset, beats, classify, deal, new_seed, parse_seed

if TYPE_CHECKING:
    from .store.operators import Operators


def answer_rules_query(line: bytes) -> dict[str, Any]:
    """One JSON answer for one JSON request line of ``ddz rules``; never raises."""
    try:
        request = json.loads(line)
    except (ValueError, RecursionError) as exc:
        return {"error": f"malformed JSON: {exc}"}
    if not isinstance(request, dict):
        return {"error": "each line must be a JSON object"}
    unknown = set(request) - {"cards", "over", "ruleset"}
    if unknown:
        return {"error": f"unknown fields: {', '.join(sorted(unknown))}"}
    cards = request.get("cards")
    if not isinstance(cards, str):
        return {"error": "'cards' must be a rank string such as \"TJQKA\""}
    try:
        ruleset = Ruleset.by_name(request.get("ruleset"))
    except RulesError as exc:
        return {"error": str(exc)}
    if "over" in request:
        over = request["over"]
        if not isinstance(over, str):
            return {"error": "'over' must be a rank string such as \"TJQKA\""}
        try:
            return {"beats": beats(cards, over, ruleset)}
        except RulesError as exc:
            return {"error": str(exc)}
    try:
        combination = classify(cards, ruleset)
    except RulesError as exc:
        return {"valid": False, "error": str(exc)}
    return {"valid": True, "type": combination.type.value, "rank": combination.rank}


def run_rules(stdin: BinaryIO, stdout: TextIO) -> int:
    # Bytes in, so that a line that is not UTF-8 gets its error answer like any other.
    for line in stdin:
        stdout.write(json.dumps(answer_rules_query(line), ensure_ascii=False) + "\n")
        stdout.flush()
    return 0


def run_deal(seed_hex: str | None, stdout: TextIO) -> int:
    seed = parse_seed(seed_hex) if seed_hex is not None else new_seed()
    d = deal(seed)
    document = {
        "seed": d.seed_hex,
        "commitment": d.commitment,
        "hands": [[card.code for card in hand] for hand in d.hands],
        "bottom": [card.code for card in d.bottom],
        "marked_card": d.marked_card.code,
        "marked_seat": d.marked_seat,
    }
    stdout.write(json.dumps(document) + "\n")
    return 0


def run_verify(paths: list[str], stdout: TextIO) -> int:
    """Checks each hand record; prints OK or the first discrepancy; exit status 1 if any fails."""
    from .game.record import Discrepancy, load, verify

    failed = False
    for path in paths:
        prefix = f"{path}: " if len(paths) > 1 else ""
        try:
            if _is_archive(path):
                failed = _verify_archive(path, prefix, stdout) or failed
                continue
            with open(path, "rb") as f:
                document = load(f.read())
            verify(document)
        except OSError as exc:
            failed = True
            stdout.write(f"{prefix}cannot read the record: {exc}\n")
        except Discrepancy as exc:
            failed = True
            stdout.write(f"{prefix}{exc}\n")
        else:
            stdout.write(f"{prefix}OK\n")
    return 1 if failed else 0


def _is_archive(path: str) -> bool:
    from .app.archive import is_archive

    return is_archive(Path(path))


def _verify_archive(path: str, prefix: str, stdout: TextIO) -> bool:
    """An archive of hands (``ddz archive``): each problem, then OK or FAILED with what it
    holds; whether it failed."""
    from .app.archive import verify_archive

    problems, summary = verify_archive(Path(path))
    for problem in problems:
        stdout.write(f"{prefix}{problem}\n")
    stdout.write(f"{prefix}{'FAILED' if problems else 'OK'}: {summary}\n")
    return bool(problems)


def run_archive(before: str | None, out: str, stdout: TextIO, stderr: TextIO) -> int:
    """``ddz archive``: the hands settled before a date written to ``out`` (ddz-archive/1)."""
    from datetime import UTC, datetime, timedelta

    from .app.archive import export_hands
    from .config import Config
    from .store import EventStore, open_pool

    config = Config.from_env()
    if before is None:
        until = datetime.now(UTC) - timedelta(days=config.archive_after_days)
    else:
        try:
            until = datetime.fromisoformat(before)
        except ValueError:
            raise RulesError(
                f"--before takes a date such as 2026-01-31, not {before!r}", "invalid_argument"
            ) from None
        if until.tzinfo is None:
            until = until.replace(tzinfo=UTC)
    pool = open_pool(config.database_url, 2, "ddz-archive", config.db_timeout)

    def progress(hands: int) -> None:
        stderr.write(f"  {hands:,} hands\n")

    try:
        with open(out, "x", encoding="utf-8") as f:
            count = export_hands(pool, EventStore(pool), until, f, progress)
    except FileExistsError:
        raise RulesError(f"{out} exists already: name a new file", "invalid_argument") from None
    finally:
        pool.close()
    stdout.write(f"{count:,} hands settled before {until.isoformat()} written to {out}\n")
    return 0


def run_simulate(
    hands: int, seed: str, ruleset: str | None, out: str | None, stdout: TextIO
) -> int:
    """``seed``: 64 hex characters, as ``ddz deal`` takes; hand i is dealt from a seed
    derived from it and i (its record has it)."""
    import time

    from .game import MatchSettings
    from .game.bot import BotPolicy
    from .game.record import export
    from .game.simulate import Tally, matchup, win_rates

    table = MatchSettings.build(ruleset)
    directory = Path(out) if out else None
    if directory is not None:
        directory.mkdir(parents=True, exist_ok=True)
    bot = BotPolicy()
    tally = Tally()
    started = time.perf_counter()
    played = matchup(hands, seed, table, lambda i: [bot] * SEATS)
    tally.seconds = time.perf_counter() - started
    for i, (events, state, _) in enumerate(played):
        tally.add(events, state)
        if directory is not None:
            with open(directory / f"hand-{i:05d}.json", "w", encoding="utf-8") as f:
                json.dump(export(events), f, ensure_ascii=False, indent=1)
    n = tally.hands
    # Each figure says how many hands (or decisions) it is measured on.
    figures = [
        ("ruleset", table.ruleset.name),
        ("seed", seed),
        ("hands", n),
        ("decisions", f"{tally.turns}  (bids, 摊打, 报到, plays and passes)"),
        (
            "landlord win rate",
            f"{tally.landlord_wins / n:.1%}  ({tally.landlord_wins} of {n} hands)",
        ),
        ("mean multiplier", f"{float(tally.multiplier_total / n):.2f}  (over {n} hands)"),
        ("bombs per hand", f"{tally.bombs / n:.2f}  ({tally.bombs} bombs in {n} hands)"),
        ("报到 (report)", f"{tally.reports} of {n} hands"),
        ("头撂 (first bid 3)", f"{tally.first_bid_threes} of {n} hands"),
        (
            "decisions per second",
            f"{tally.turns / tally.seconds:,.0f}  (bot policy, {tally.turns} decisions)",
        ),
    ]
    # The CJK labels take two columns per character.
    lines = [
        f"{label}{' ' * (22 - len(label) - sum(ord(c) > 0x2E80 for c in label))}{value}"
        for label, value in figures
    ]
    lines.append(
        "bot against random-legal play, win rates (each over the hands where the matchup arose):"
    )
    for label, (rate, count) in win_rates(hands, seed, table).items():
        lines.append(f"  {label:<34} {f'{rate:.1%}' if count else 'n/a'}  ({count} hands)")
    if directory is not None:
        lines.append(f"records written to    {directory}")
    stdout.write("\n".join(lines) + "\n")
    return 0


def run_pit(
    deals: int,
    seed: str,
    ruleset: str | None,
    players: list[str],
    budget_ms: float,
    stdout: TextIO,
    cpu_budget: bool = False,
    doubling: str = "both",
) -> int:
    """``ddz simulate --pit A B``: A against B in duplicate, with and without bomb doubling
    (``doubling``: both, or only ``yes`` or ``no``)."""
    import time

    from .game import MatchSettings
    from .game.bot.levels import contestant
    from .game.simulate import DUPLICATE_SEATS, duplicate, won_share

    first, second = players
    clock = time.process_time if cpu_budget else time.perf_counter
    hands = deals * len(DUPLICATE_SEATS)
    stdout.write(
        f"{first} against {second}: points per hand of {first} (all its seats, in stakes), "
        f"95% CI; {deals} deals, each played twice with the seats swapped ({hands} hands)\n"
    )
    for bombs_double in DOUBLING[doubling]:
        table = MatchSettings.build(ruleset, bombs_double=bombs_double)
        result = duplicate(
            deals,
            seed,
            table,
            contestant(first, seed=f"{seed}:a", budget=budget_ms / 1000, clock=clock),
            contestant(second, seed=f"{seed}:b", budget=budget_ms / 1000, clock=clock),
        )
        label = "bombs double" if bombs_double else "bombs do not double"
        stdout.write(
            f"  {table.ruleset.name}, {label:<20} {result.mean:+8.2f}"
            f"  [{result.low:+.2f}, {result.high:+.2f}]\n"
        )
        for name, landlord, farmer in zip(players, result.landlord, result.farmer, strict=True):
            stdout.write(
                f"    {name} won {won_share(*landlord)} as landlord,"
                f" {won_share(*farmer)} as a farmer\n"
            )
    return 0


#: ``--doubling``: the tables to play, by whether bombs double.
DOUBLING = {"both": (True, False), "yes": (True,), "no": (False,)}


def run_calibrate(
    hands: int, seed: str, ruleset: str | None, doubling: str, out: str | None, stdout: TextIO
) -> int:
    """``ddz simulate --calibrate``: the gains of bidding and 摊打 by estimated chance, for
    each ruleset (or ``ruleset``) with and without doubling; the :mod:`calibrated` module
    for them written to ``out``."""
    from .game import MatchSettings
    from .game.bot.calibration import Calibration, calibrate, markdown, module_source
    from .game.bot.levels import NORMAL, policy
    from .game.simulate import hand_seed
    from .rules import RULESETS

    names = [ruleset] if ruleset else sorted(RULESETS)
    tables: dict[tuple[str, bool], Calibration] = {}
    for name in names:
        for bombs_double in DOUBLING[doubling]:
            table = MatchSettings.build(name, bombs_double=bombs_double)
            found = calibrate(hands, seed, table, policy(NORMAL), hand_seed)
            tables[(table.ruleset.name, bombs_double)] = found
            label = f"{table.ruleset.name}, bombs {'double' if bombs_double else 'do not double'}"
            stdout.write("\n".join(markdown(label, found)) + "\n\n")
            stdout.flush()
    if out is not None:
        command = f"ddz simulate --calibrate --hands {hands} --seed {seed}"
        with open(out, "w", encoding="utf-8") as f:
            f.write(module_source(tables, command))
        stdout.write(f"written to {out}\n")
    return 0


def engine_options(pairs: list[str]) -> dict[str, Any]:
    """``--option NAME=VALUE`` pairs: each value as JSON when it reads as JSON (``3``,
    ``true``), else as the string."""
    options: dict[str, Any] = {}
    for pair in pairs:
        name, equals, value = pair.partition("=")
        if not equals or not name:
            raise RulesError(f"--option takes NAME=VALUE, not {pair!r}", "invalid_argument")
        try:
            options[name] = json.loads(value)
        except ValueError:
            options[name] = value
    return options


def run_arena(args: argparse.Namespace, seed: str, stdout: TextIO) -> int:
    """``ddz arena``: engines and house bot levels at one table, in a round robin or a
    gauntlet, each deal at every seating."""

    from .app.arena import (
        DEFAULT_LEVEL,
        GAUNTLET,
        ROUND_ROBIN,
        TABLE,
        TABLE_MODE,
        Contestant,
        StopRule,
        run,
    )
    from .app.engine import EngineError
    from .game import MatchSettings

    contestants = [
        Contestant(engine=value) if kind == "engine" else Contestant(level=value)
        for kind, value in args.contestants or []
    ]
    if len(contestants) == 1 and contestants[0].engine is not None:
        contestants.append(Contestant(level=DEFAULT_LEVEL))  # an engine against the house bot
    mode = ROUND_ROBIN if args.round_robin else GAUNTLET if args.gauntlet else TABLE_MODE
    if len(contestants) < 2:
        raise RulesError("an arena needs an --engine and another contestant", "invalid_argument")
    if mode == TABLE_MODE and len(contestants) > TABLE:
        raise RulesError(
            f"{TABLE} contestants at one table at most: more play a --round-robin or a --gauntlet",
            "invalid_argument",
        )
    stop = None
    if args.sprt is not None or args.width is not None:
        stop = StopRule(None if args.sprt is None else tuple(args.sprt), args.width)
    if args.records:
        try:  # before any engine starts: a run that cannot keep its records is refused
            Path(args.records).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            message = f"--records {args.records}: {exc.strerror}"
            raise RulesError(message, "invalid_argument") from None
    if args.log:
        import logging

        logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        arena = run(
            contestants,
            args.deals,
            seed,
            MatchSettings.build(args.ruleset),
            mode=mode,
            move_ms=args.move_ms,
            options=engine_options(args.option),
            records=Path(args.records) if args.records else None,
            jobs=args.jobs,
            stop=stop,
        )
    except EngineError as exc:  # an engine that cannot start: before any play
        print(f"ddz arena: {exc.code}: {exc}", file=sys.stderr)
        return 1
    hands = sum(r.hands for r in arena.runs)
    if args.json:
        stdout.write(json.dumps(arena.to_json(), indent=1) + "\n")
    elif arena.failure is None:
        lines = arena.lines()
        if args.records:
            lines.append(f"records written to {args.records}")
        stdout.write("\n".join(lines) + "\n")
    if arena.failure is not None:
        kept = sum(r.records for r in arena.runs)
        where = f" in {args.records}" if args.records else ""
        print(
            f"ddz arena: {arena.failure.line()}; {hands} hands played before it"
            + (f", their records ({kept}) kept{where}" if args.records else ""),
            file=sys.stderr,
        )
        return 1
    rate = f" ({hands / arena.seconds:.1f} hands a second)" if arena.seconds else ""
    print(
        f"ddz arena: {hands} hands in {arena.seconds:.1f} s{rate}, --jobs {arena.jobs}",
        file=sys.stderr,
    )
    return 0


class Contestants(argparse.Action):
    """``--engine`` and ``--bot``: the contestants, in the order given."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        kind = "engine" if option_string == "--engine" else "bot"
        namespace.contestants = [*(getattr(namespace, "contestants", None) or []), (kind, values)]


#: How to install the Python client into the Python running this command (``bin/run``
#: installs it).
CLIENT_INSTALL = (
    "bin/run installs it; into this Python: "
    f"{sys.executable} -m pip install {Path(__file__).resolve().parents[1] / 'clients' / 'python'}"
)


def run_bridge(args: argparse.Namespace) -> int:
    """``ddz bridge``: an engine playing on the service through the Python client."""
    import logging

    try:
        from ddz_client import Client, ProblemError
    except ImportError:
        print(
            f"ddz bridge: needs the Python client (ddz_client); {CLIENT_INSTALL}", file=sys.stderr
        )
        return 2
    from .app.bridge import Bridge, GaveUp, Lobby, hand_count
    from .app.engine import Engine, EngineError

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # a line per request drowns the play
    engine = Engine(args.engine, host="ddz bridge", options=engine_options(args.option))
    with Client(args.url, args.token) as client:
        bridge = Bridge(
            client,
            engine,
            table_id=args.table,
            invite=args.invite,
            lobby=Lobby(args.ruleset, args.unit, args.cap, ladder=args.ladder),
            hands=args.hands,
            move_ms=args.move_ms,
            commands_per_second=args.commands_per_second,
        )
        try:
            played = bridge.run()
        except (GaveUp, EngineError) as exc:
            print(f"ddz bridge: {exc}", file=sys.stderr)
            return 1
        except ProblemError as exc:
            print(f"ddz bridge: {exc.status} {exc.code}: {exc.detail}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            # The engine was told to quit on the way out; the seat stays the player's.
            print(
                f"ddz bridge: stopped after {hand_count(bridge.played)}; the seat is kept "
                "(started again, the bridge picks up the hand under way)",
                file=sys.stderr,
            )
            return 130
    failed = (
        f" (the engine failed in {hand_count(bridge.failed_hands)}: the system played them)"
        if bridge.failed_hands
        else ""
    )
    print(
        f"ddz bridge: {hand_count(played)} played, net {bridge.net:+.2f}{failed}", file=sys.stderr
    )
    return 1 if args.strict and bridge.failed_hands else 0


def run_migrate(stdout: TextIO) -> int:
    from .config import Config
    from .store import migrate

    applied = migrate(Config.from_env().database_url)
    stdout.write(f"applied: {', '.join(applied)}\n" if applied else "nothing to apply\n")
    return 0


def run_rebuild(check: bool, stdout: TextIO, stderr: TextIO) -> int:
    """``ddz rebuild``: the read models made again from the events (``--check``: compared
    only); the differences on stdout, the progress on stderr. Exit status 1 when ``--check``
    finds anything different (the ledger check's problems included), or when a rebuild
    leaves a read model's row differing; a rebuild never looks at existing ledger rows."""
    import time

    from .app.rebuild import rebuild
    from .config import Config
    from .store import EventStore, open_pool
    from .store.rebuild import Found, ReadModels

    config = Config.from_env()
    pool = open_pool(config.database_url, 2, "ddz-rebuild", config.db_timeout)
    try:
        total = ReadModels(pool).streams()
        verb = "checking" if check else "rebuilding"
        stderr.write(f"ddz rebuild: {verb} the read models of {total:,} streams\n")
        started = time.monotonic()
        told = [started]

        def progress(found: Found) -> None:
            now = time.monotonic()
            if now - told[0] >= 2 or found.streams == total:
                told[0] = now
                stderr.write(
                    f"  {found.streams:,} of {total:,} streams ({found.streams / max(total, 1):.0%}),"
                    f" {len(found.differences):,} differences, {now - started:.0f} s\n"
                )
                stderr.flush()

        rebuilt = rebuild(pool, EventStore(pool), write=not check, progress=progress)
    finally:
        pool.close()
    found = rebuilt.read_models
    for line in found.differences + rebuilt.ledger:
        stdout.write(line + "\n")
    differing = len(found.differences) + len(rebuilt.ledger)
    summary = [f"{differing:,} differences in {time.monotonic() - started:.1f} s"]
    if rebuilt.check is not None:
        for problem in rebuilt.check["problems"]:
            stdout.write(problem + "\n")
        verdict = "ok" if not rebuilt.check["problems"] else "problems"
        summary.append(
            f"the ledger check: {verdict} ({rebuilt.check['entries']:,} entries over"
            f" {rebuilt.check['matches']:,} settled matches, total {rebuilt.check['total']})"
        )
    else:
        summary.append(f"{found.written + rebuilt.written:,} rows written")
        summary.append(f"ratings made again from {rebuilt.rated:,} settled hands")
        for line in found.left:
            stdout.write(f"left: {line}\n")
        if found.left:
            summary.append(f"{len(found.left):,} left differing")
    stderr.write("ddz rebuild: " + "; ".join(summary) + "\n")
    return 0 if rebuilt.ok else 1


def run_ratings_rebuild(stdout: TextIO) -> int:
    """``ddz ratings rebuild``: every rating made again from the events (docs/ratings.md)."""
    from .app.ratings import rebuild
    from .config import Config
    from .store import EventStore, open_pool
    from .store.ratings import RatingStore

    def progress(hands: int) -> None:
        stdout.write(f"{hands:,} hands read\n")
        stdout.flush()

    config = Config.from_env()
    pool = open_pool(config.database_url, 2, "ddz-ratings", config.db_timeout)
    try:
        hands = rebuild(EventStore(pool), RatingStore(pool), progress)
    finally:
        pool.close()
    stdout.write(f"ratings rebuilt from {hands:,} settled hands\n")
    return 0


def run_worker(burst: bool) -> int:
    import logging
    import threading

    from workers.context import context
    from workers.sweeper import keep_alive, run_periodically, sweep
    from workers.worker import JobWorker

    from . import census
    from .app import logs
    from .app.work import queue

    # One JSON line per bot turn, turn timeout and settlement (workers.jobs), per lost job
    # enqueued again, per outage step; RQ's own logger only from WARNING, so that its two
    # lines per job do not drown them. A lost Redis is told by the sweeper's timer, once
    # per back-off step: RQ's main loop and its pubsub thread would tell it every retry.
    logs.configure()
    logging.getLogger("rq.worker").addFilter(
        lambda record: "could not connect to Redis" not in str(record.msg)
    )
    ctx = context()  # built once, before the timer threads share it
    census.start_if_asked("worker")
    if ctx.config.worker_metrics:
        from prometheus_client import start_http_server

        host, _, port = ctx.config.worker_metrics.rpartition(":")
        start_http_server(int(port), addr=host or "127.0.0.1")
    worker = JobWorker([queue(ctx.redis)], connection=ctx.redis)
    # Back at work as soon as Redis is (RQ waits up to 60 s between its tries).
    worker.max_connection_wait_time = ctx.config.max_backoff_seconds
    stop = threading.Event()
    # Alive before it takes a job: a started job whose worker's heartbeat lapses is
    # enqueued again by the other workers' timers.
    heartbeat = keep_alive(stop, worker.name)
    # Work lost while no worker ran (or with Redis) is found again before anything else;
    # then deadlines are scanned every second and the sweep runs every 15 s.
    sweep()
    run_periodically(stop)
    logging.getLogger("workers").info(
        "worker %s: working on queue %s", worker.name, worker.queue_names()[0]
    )
    try:
        worker.work(burst=burst, logging_level="WARNING")
    finally:
        stop.set()
        # Its heartbeat removed before the process ends (a daemon thread would be cut off):
        # /readyz and the other workers' rescue then know at once that it is gone.
        heartbeat.join(timeout=2)
    return 0


def run_operator(args: argparse.Namespace, stdin: TextIO, stdout: TextIO) -> int:
    """``ddz operator add|token|list|revoke|remove``: operators' accounts on DATABASE_URL,
    or on the embedded database of ``ddz serve`` on ``--data``."""
    import getpass
    import warnings

    from .serve import NoDatabase, database_of
    from .store import open_pool
    from .store.operators import OperatorExists, OperatorRevoked, Operators, check_name

    password = ""
    if args.action == "add":
        # Asked before the database is reached (or started): a mistake is told at once.
        try:
            check_name(args.name)
        except ValueError as exc:
            print(f"ddz operator: {exc}", file=sys.stderr)
            return 2
        if args.password_stdin:
            password = stdin.readline().rstrip("\n")
        else:
            # Asked on the terminal only: without one, getpass would read stdin with the
            # echo on (or die of EOFError on an empty one).
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("error", getpass.GetPassWarning)
                    password = getpass.getpass(f"password for {args.name}: ")
                    again = getpass.getpass("again: ")
            except getpass.GetPassWarning:
                print(
                    "ddz operator: no terminal to ask for the password on; give it on the"
                    " first line of stdin with --password-stdin, as in"
                    f" printf '%s\\n' \"$PASSWORD\" | ddz operator add {args.name}"
                    f" --role {args.role} --password-stdin",
                    file=sys.stderr,
                )
                return 2
            except EOFError:  # Ctrl-D at the prompt
                print("ddz operator: no password given", file=sys.stderr)
                return 2
            if again != password:
                print("ddz operator: the passwords differ", file=sys.stderr)
                return 2
        if len(password) < 12:
            print("ddz operator: a password has at least 12 characters", file=sys.stderr)
            return 2
    try:
        with database_of(args.data, "operator") as url:
            pool = open_pool(url, 1, "ddz-cli")
            try:
                return _operate(args, Operators(pool), password, stdout)
            except (OperatorExists, OperatorRevoked) as exc:
                print(f"ddz operator: {exc}", file=sys.stderr)
                return 2
            finally:
                pool.close()
    except NoDatabase as exc:
        print(f"ddz operator: {exc}", file=sys.stderr)
        return 1


def _operate(args: argparse.Namespace, operators: Operators, password: str, stdout: TextIO) -> int:
    if args.action == "list":
        for found, created_at in operators.all():
            revoked = "\trevoked" if found.revoked else ""
            stdout.write(f"{found.name}\t{found.role}\t{created_at:%Y-%m-%d %H:%M}{revoked}\n")
        return 0
    if args.action == "add":
        operators.add(args.name, args.role, password)
        _audit_cli(operators, "add", args.name)
        stdout.write(f"operator {args.name} added ({args.role})\n")
        return 0
    named = next((o for o, _ in operators.all() if o.name == args.name), None)
    if named is None or named.operator_id is None:
        print(f"ddz operator: no operator named {args.name!r}", file=sys.stderr)
        return 2
    if args.action == "revoke":
        count = operators.revoke(args.name)
        _audit_cli(operators, "revoke", args.name)
        stdout.write(f"{count} token(s) of {args.name} revoked, sessions ended, password refused\n")
    elif args.action == "remove":
        operators.remove(args.name)
        _audit_cli(operators, "remove", args.name)
        stdout.write(f"operator {args.name} removed, with their tokens\n")
    else:
        token = operators.issue(named.operator_id, args.label)
        _audit_cli(operators, "token", args.name)
        # The token is shown once: only its hash is kept.
        stdout.write(token + "\n")
    return 0


def _audit_cli(operators: Operators, action: str, name: str) -> None:
    """What the CLI did to an operator, to the audit trail: by ``cli:<the system user>``,
    from this host."""
    import getpass
    import socket

    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no user name in the environment or the password database
        user = str(os.getuid())
    operators.audit(f"cli:{user}", action, "cli", subject=name, address=socket.gethostname())


def run_openapi(stdout: TextIO) -> int:
    import yaml

    from .api import openapi_document

    stdout.write(yaml.safe_dump(openapi_document(), sort_keys=False, allow_unicode=True))
    return 0


def positive(text: str) -> int:
    """An argument that is a whole number of at least 1."""
    try:
        number = int(text)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"a whole number of at least 1, not {text!r}")
    return number


def engine_arguments(parser: argparse.ArgumentParser, move_ms: int, limit: str) -> None:
    """The engine host's arguments of ``ddz arena`` and ``ddz bridge``."""
    parser.add_argument(
        "--move-ms",
        type=positive,
        default=move_ms,
        metavar="MS",
        help=f"an engine's time per decision{limit} (default {move_ms})",
    )
    parser.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="an option the engine declares, sent to it (repeatable)",
    )


#: Where ``ddz serve``'s embedded servers keep their data, relative to where it runs.
DATA = ".ddz-data"

SEED_HELP = "32-byte seed as 64 hex characters, as ddz deal and ddz simulate print it (default: a fresh random seed)"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ddz", description="Shanghai Dou Dizhu (上海斗地主) game server tools"
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser(
        "rules",
        help="classify and compare plays: JSON lines in on stdin, one JSON line out for each",
        description='Reads JSON lines such as {"cards": "TJQKA"} or {"cards": "KKKK", "over": "AA", '
        '"ruleset": "shanghai-local"} and answers each with one JSON line, until EOF.',
    )
    deal_parser = commands.add_parser(
        "deal", help="print the deal of a seed as JSON (docs/hand-record.md)"
    )
    deal_parser.add_argument("--seed", metavar="HEX", help=SEED_HELP)
    verify_parser = commands.add_parser(
        "verify",
        help="check hand records (ddz-hand/1): deal, commitment, every action, settlement",
        description="Re-derives the deal from the seed, checks the commitment, replays every action "
        "through the rules and recomputes the settlement. Prints OK or the first discrepancy with its "
        "action index; exits 1 when a record fails. An archive of ddz archive (ddz-archive/1) is "
        "checked hand by hand, with the ledger check of its entries.",
    )
    verify_parser.add_argument("files", nargs="+", metavar="FILE")
    simulate_parser = commands.add_parser(
        "simulate",
        help="play hands bot against bot on the pure engine and print a summary",
        description="Plays N hands with the bot policy at every seat, deterministically from --seed "
        "(64 hex characters, as ddz deal takes), "
        "writes one hand record per hand into --out, and prints figures, with the bot's win rates "
        "against the random-legal baseline.",
    )
    simulate_parser.add_argument("--hands", type=int, default=100, metavar="N")
    simulate_parser.add_argument(
        "--seed", metavar="HEX", help=SEED_HELP + "; the hands' seeds derive from it"
    )
    simulate_parser.add_argument(
        "--ruleset", default=None, metavar="R", help="shanghai-platform (default) or shanghai-local"
    )
    simulate_parser.add_argument(
        "--out",
        default=None,
        metavar="DIR",
        help="write hand records (.json) here; with --calibrate, the file to write the table to",
    )
    simulate_parser.add_argument(
        "--pit",
        nargs=2,
        metavar=("A", "B"),
        help="instead: A against B in duplicate over --hands deals, with and without bomb "
        "doubling; each is a level (easy, normal, hard) or a baseline (bot: the bot before "
        "levels; max-bid: that bot always bidding the highest; normal-thresholds: normal "
        "bidding and showing its hand by thresholds of its estimated chance)",
    )
    simulate_parser.add_argument(
        "--doubling",
        choices=sorted(DOUBLING),
        default="both",
        help="--pit and --calibrate: the tables with bombs doubling, without, or both (default)",
    )
    simulate_parser.add_argument(
        "--calibrate",
        action="store_true",
        help="instead: measure what bidding and 摊打 gain the normal level by its estimated "
        "chance of winning, over --hands hands per ruleset and doubling (docs/bot.md); with "
        "--out FILE, write service/game/bot/calibrated.py's table there",
    )
    simulate_parser.add_argument(
        "--budget-ms",
        type=float,
        default=50.0,
        metavar="MS",
        help="the hard level's search time per decision (default 50)",
    )
    simulate_parser.add_argument(
        "--cpu-budget",
        action="store_true",
        help="count that time in CPU time of this process, not wall time: the same search "
        "however loaded the machine is (for measuring)",
    )
    arena_parser = commands.add_parser(
        "arena",
        help="measure engines (docs/bot-protocol.md) against each other and the house bot",
        description="Plays --deals deals on the pure engine (no server), each at every seating "
        "so that the luck of the cards cancels out: two contestants in duplicate (each deal "
        "twice, the seats swapped), three or four at one table (every seating), or more in a "
        "--round-robin or a --gauntlet of duplicate matches. A contestant is an --engine or a "
        "house bot --bot level, in the order given; one engine alone plays the house bot at "
        "normal. Prints each one's points per hand with a 95% confidence interval and its "
        "landlord and farmer win rates (--json: every figure). Each seat an engine plays is "
        "its own process. The same --seed gives the same figures. Exits 1 when an engine "
        "crashes, answers garbage or something illegal, or runs out of time, naming the deal, "
        "hand, seat and decision.",
    )
    arena_parser.add_argument(
        "--engine",
        action=Contestants,
        dest="contestants",
        metavar="CMD",
        help="an engine's command line (repeatable)",
    )
    arena_parser.add_argument(
        "--bot",
        action=Contestants,
        dest="contestants",
        choices=("easy", "normal", "hard"),
        help="a house bot level as a contestant (repeatable; one engine alone plays normal)",
    )
    arena_parser.add_argument("--deals", type=int, default=100, metavar="N")
    arena_parser.add_argument(
        "--ruleset", default=None, metavar="R", help="shanghai-platform (default) or shanghai-local"
    )
    arena_parser.add_argument(
        "--seed", metavar="HEX", help=SEED_HELP + "; the deals' seeds derive from it"
    )
    arena_parser.add_argument(
        "--records", default=None, metavar="DIR", help="write each hand's record (.json) here"
    )
    pairs = arena_parser.add_mutually_exclusive_group()
    pairs.add_argument(
        "--round-robin",
        action="store_true",
        help="every pair of contestants in a duplicate match, on the same deals",
    )
    pairs.add_argument(
        "--gauntlet",
        action="store_true",
        help="the first contestant in a duplicate match against each of the others",
    )
    arena_parser.add_argument(
        "--jobs",
        type=positive,
        default=1,
        metavar="N",
        help="play deals in N processes at once (each with its own engines); the same figures",
    )
    stopping = arena_parser.add_mutually_exclusive_group()
    stopping.add_argument(
        "--sprt",
        nargs=2,
        type=float,
        metavar=("M0", "M1"),
        help="stop once an SPRT (5%% errors) tells whether the first contestant's points per "
        "hand are at most M0 or at least M1 (from 10 deals on; --deals is the most)",
    )
    stopping.add_argument(
        "--width",
        type=float,
        metavar="W",
        help="stop once the first contestant's 95%% interval is at most W wide (from 10 deals)",
    )
    arena_parser.add_argument(
        "--json", action="store_true", help="print every figure as one JSON document"
    )
    engine_arguments(arena_parser, 2000, "")
    arena_parser.add_argument(
        "--log", action="store_true", help="show the engines' log messages on stderr"
    )
    bridge_parser = commands.add_parser(
        "bridge",
        help="play an engine (docs/bot-protocol.md) on the service: a table or the lobby, hand after hand",
        description="Takes a seat with the player's --token (at --table, or through the lobby's "
        "quick match with --ruleset/--unit/--cap; a player already seated at a table plays there), "
        "follows the player's own stream and answers each turn with the engine's action. A dropped "
        "connection resumes; a bridge started again picks up the hand under way. An engine that "
        "crashes, answers garbage or something illegal, or runs out of time is logged, the system "
        "plays the seat to the end of that hand, and the engine starts again for the next; after 3 "
        "such hands in a row the bridge leaves the table and exits 1. With --hands N it leaves the "
        "table after N hands and exits 0 (1 with --strict if the engine failed in any). Refusals "
        "of the service exit 2; Ctrl-C stops it quietly (130), keeping the seat.",
    )
    bridge_parser.add_argument(
        "--engine", required=True, metavar="CMD", help="the engine's command line"
    )
    bridge_parser.add_argument("--token", required=True, help="the player's API token")
    bridge_parser.add_argument(
        "--url", default="http://127.0.0.1:8000", help="the service (default http://127.0.0.1:8000)"
    )
    bridge_parser.add_argument("--table", default=None, metavar="ID", help="play at this table")
    bridge_parser.add_argument(
        "--invite", default=None, metavar="CODE", help="a private table's invite"
    )
    bridge_parser.add_argument(
        "--ruleset", default=None, help="the lobby's ruleset (default: the server's)"
    )
    bridge_parser.add_argument("--unit", default=None, help="the lobby's stake unit")
    bridge_parser.add_argument("--cap", default=None, help="the lobby's cap")
    bridge_parser.add_argument(
        "--hands",
        type=int,
        default=None,
        metavar="N",
        help="leave after N hands (default: play on)",
    )
    bridge_parser.add_argument(
        "--ladder",
        action="store_true",
        help="a bot account's ladder: rated tables of bot accounts only, from the lobby with "
        "--ruleset/--unit/--cap, one after another for as long as it runs",
    )
    bridge_parser.add_argument(
        "--strict",
        action="store_true",
        help="exit 1 if the engine failed in any hand (the system played the seat in it)",
    )
    bridge_parser.add_argument(
        "--commands-per-second",
        type=float,
        default=8.0,
        metavar="N",
        help="send at most N commands a second (default 8: below the service's default limit "
        "of 10 a token; bridges of one bot account share that limit)",
    )
    engine_arguments(bridge_parser, 5000, ", at most what is left of the turn")
    commands.add_parser(
        "migrate", help="apply the SQL migrations to DATABASE_URL (safe to run again)"
    )
    archive_parser = commands.add_parser(
        "archive",
        help="export the hands settled before a date, with their ledger entries (ddz-archive/1)",
        description="Writes one JSON line per hand settled before --before (default: "
        "DDZ_ARCHIVE_AFTER_DAYS days ago): its hand record and its ledger entries. ddz verify "
        "checks the file on its own: every record, and the ledger check of its entries. The "
        "database keeps every event and entry (they refuse deletes). Acts on DATABASE_URL.",
    )
    archive_parser.add_argument(
        "--before", default=None, metavar="DATE", help="ISO 8601 date or time (UTC unless given)"
    )
    archive_parser.add_argument("--out", required=True, metavar="FILE", help="a new file")
    rebuild_parser = commands.add_parser(
        "rebuild",
        help="make every read model again from the events (--check: compare only)",
        description="Folds every stream's events into the rows of the read models (matches, "
        "tables, table_hands, player_streams, the lobby's tickets) and writes those that differ, "
        "and writes the settlements and ledger entries the events call for that are missing; online "
        "beside a running service or with it stopped (docs/operations.md). Acts on DATABASE_URL. "
        "Existing settlements and ledger entries are never changed nor looked at: a rebuild "
        "exits 1 only when a read model's row still differs after it. With --check nothing is "
        "written: the differences and the full ledger check (which names a wrong entry) are "
        "printed, and the exit status is 1 when anything differs.",
    )
    rebuild_parser.add_argument(
        "--check", action="store_true", help="compare and report only; exit 1 if anything differs"
    )
    worker_parser = commands.add_parser(
        "worker",
        help="run an RQ worker (bot turns, turn timers, settlement, the sweeper) on REDIS_URL",
    )
    worker_parser.add_argument("--burst", action="store_true", help="quit when the queue is empty")
    serve_parser = commands.add_parser(
        "serve",
        help="run the whole service: migrations, the API under gunicorn, a worker",
        description="Uses DATABASE_URL and REDIS_URL when set; otherwise starts an embedded "
        "PostgreSQL and Redis with their data under --data.",
    )
    serve_parser.add_argument("--host", default="127.0.0.1")
    serve_parser.add_argument("--port", type=int, default=8000)
    serve_parser.add_argument(
        "--workers",
        type=int,
        default=None,
        help="gunicorn worker processes (default: one per core)",
    )
    serve_parser.add_argument(
        "--data", default=DATA, help=f"where embedded servers keep their data (default {DATA})"
    )
    commands.add_parser("openapi", help="print the OpenAPI document generated from the app")
    ratings_parser = commands.add_parser(
        "ratings",
        help="the players' ratings (docs/ratings.md): rebuild makes them again from the events",
    )
    ratings_actions = ratings_parser.add_subparsers(dest="action", required=True)
    ratings_actions.add_parser(
        "rebuild",
        help="every rating made again from the settled hands' events, in the order they were "
        "settled, on DATABASE_URL (ratings of new hands wait meanwhile)",
    )
    operator_parser = commands.add_parser(
        "operator",
        help="operators' accounts: add, token, list, revoke, remove",
        description="Operators sign in to the console (/console/) with a name and password, and "
        "call the API with their tokens; auditors read everything, admins also manage operators "
        "(docs/operations.md). Acts on DATABASE_URL; when it is unset, on the embedded "
        "PostgreSQL of ddz serve on --data (started for the command when no serve runs).",
    )
    operator_actions = operator_parser.add_subparsers(dest="action", required=True)
    add_parser = operator_actions.add_parser(
        "add", help="add an operator (asks for a password at a terminal, or --password-stdin)"
    )
    add_parser.add_argument("name")
    add_parser.add_argument("--role", choices=("auditor", "admin"), required=True)
    add_parser.add_argument(
        "--password-stdin",
        action="store_true",
        help="read the password from the first line of stdin instead of asking (where no"
        " terminal can ask: a script, CI)",
    )
    token_parser = operator_actions.add_parser(
        "token", help="print a new API token of the operator (shown once)"
    )
    token_parser.add_argument("name")
    token_parser.add_argument("--label", default=None)
    operator_actions.add_parser("list", help="list the operators and their roles")
    for action, what in (
        (
            "revoke",
            "revoke the operator: every API token and console session ends, and the password"
            " is refused (remove and add them again to let them back)",
        ),
        ("remove", "remove the operator (and their tokens; the audit trail keeps the name)"),
    ):
        operator_actions.add_parser(action, help=what).add_argument("name")
    for action_parser in operator_actions.choices.values():
        action_parser.add_argument(
            "--data",
            default=DATA,
            help=f"with DATABASE_URL unset: ddz serve's data directory (default {DATA})",
        )
    return parser


#: Options whose value may begin with "-": a token is URL-safe base64, and argparse takes
#: "--token -x..." for an option without its value (1 token in 64 failed so).
DASHED_VALUES = frozenset({"--token"})


def glued(argv: list[str]) -> list[str]:
    """``argv`` with each ``--token VALUE`` written ``--token=VALUE``.

    >>> glued(["bridge", "--token", "-Ab3", "--url", "u"])
    ['bridge', '--token=-Ab3', '--url', 'u']
    """
    out: list[str] = []
    args = iter(argv)
    for arg in args:
        value = next(args, None) if arg in DASHED_VALUES else None
        out.append(arg if value is None else f"{arg}={value}")
    return out


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(glued(sys.argv[1:] if argv is None else argv))
    try:
        if args.command == "rules":
            return run_rules(sys.stdin.buffer, sys.stdout)
        if args.command == "verify":
            return run_verify(args.files, sys.stdout)
        if args.command == "migrate":
            return run_migrate(sys.stdout)
        if args.command == "archive":
            return run_archive(args.before, args.out, sys.stdout, sys.stderr)
        if args.command == "rebuild":
            return run_rebuild(args.check, sys.stdout, sys.stderr)
        if args.command == "worker":
            return run_worker(args.burst)
        if args.command == "serve":
            from .serve import serve

            return serve(args.host, args.port, args.workers, args.data)
        if args.command == "openapi":
            return run_openapi(sys.stdout)
        if args.command == "ratings":
            return run_ratings_rebuild(sys.stdout)
        if args.command == "operator":
            return run_operator(args, sys.stdin, sys.stdout)
        if args.command == "bridge":
            return run_bridge(args)
        if args.command == "arena":
            if args.deals < 1:
                raise RulesError("--deals must be at least 1", "invalid_argument")
            seed = parse_seed(args.seed).hex() if args.seed is not None else new_seed().hex()
            return run_arena(args, seed, sys.stdout)
        if args.command == "simulate":
            if args.hands < 1:
                raise RulesError("--hands must be at least 1", "invalid_argument")
            seed = parse_seed(args.seed).hex() if args.seed is not None else new_seed().hex()
            if args.pit:
                return run_pit(
                    args.hands,
                    seed,
                    args.ruleset,
                    args.pit,
                    args.budget_ms,
                    sys.stdout,
                    args.cpu_budget,
                    args.doubling,
                )
            if args.calibrate:
                return run_calibrate(
                    args.hands, seed, args.ruleset, args.doubling, args.out, sys.stdout
                )
            return run_simulate(args.hands, seed, args.ruleset, args.out, sys.stdout)
        return run_deal(args.seed, sys.stdout)
    except RulesError as exc:
        print(f"ddz: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C at a prompt: what was started has been stopped
        return 130


if __name__ == "__main__":
    sys.exit(main())
