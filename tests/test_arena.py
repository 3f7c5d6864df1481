"""``ddz arena`` and the engine host: an engine (docs/bot-protocol.md) measured on the pure
engine in duplicate against the house bot or another engine; an engine that crashes,
answers garbage or an illegal action, or runs out of time is named and stopped."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from service.app.engine import Engine, EngineGarbage
from service.cli import main
from service.game.record import load, verify

# Slow: starts servers or other processes (bin/test --fast leaves it out).
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = f"{sys.executable} {ROOT / 'examples' / 'engine.py'}"
SEED = "ab" * 32


def misbehaving(mode: str, after: int = 0) -> str:
    return f"{sys.executable} {ROOT / 'tests' / 'engines' / 'misbehaving.py'} {mode} {after}"


def arena(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["arena", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_same_seed_gives_the_same_figures_and_records_that_verify(capsys, tmp_path):
    runs = []
    for name in ("one", "two"):
        code, out, _ = arena(
            capsys,
            "--engine",
            EXAMPLE,
            "--deals",
            "4",
            "--seed",
            SEED,
            "--ruleset",
            "shanghai-local",
            "--records",
            str(tmp_path / name),
        )
        assert code == 0
        runs.append(out.replace(str(tmp_path / name), "DIR"))
    assert runs[0] == runs[1]
    assert "lowest-single against house bot (normal): shanghai-local" in runs[0]
    assert "8 hands" in runs[0] and "95% CI" in runs[0]
    assert "as landlord won" in runs[0] and "as farmer won" in runs[0]
    records = sorted((tmp_path / "one").glob("*.json"))
    assert len(records) == 8
    assert [r.read_bytes() for r in records] == [
        (tmp_path / "two" / r.name).read_bytes() for r in records
    ]
    for path in records:
        document = load(path.read_bytes())
        verify(document)
        assert {seat["player"] for seat in document["seats"] if not seat["bot"]} <= {
            f"lowest-single#{s}" for s in range(4)
        }


def test_an_engine_against_itself_comes_out_at_zero(capsys):
    code, out, _ = arena(
        capsys, "--engine", EXAMPLE, "--engine", EXAMPLE, "--deals", "3", "--seed", SEED
    )
    assert code == 0
    assert "lowest-single (1) against lowest-single (2)" in out
    assert "+0.00  95% CI [+0.00, +0.00]" in out


def test_the_engine_sees_only_its_seat_and_may_log(capsys, caplog, tmp_path, monkeypatch):
    spied = tmp_path / "spied.jsonl"
    monkeypatch.setenv("SPY_FILE", str(spied))
    caplog.set_level("INFO", "ddz.engine")
    code, _, _ = arena(
        capsys, "--engine", misbehaving("spy"), "--deals", "1", "--seed", SEED, "--log"
    )
    assert code == 0
    assert "spy: deciding in bidding" in caplog.messages
    by_process: dict[int, list[dict]] = {}
    for line in spied.read_text().splitlines():
        # Not even in a match's id: with the run's seed an engine could deal every hand.
        assert SEED not in line
        entry = json.loads(line)
        by_process.setdefault(entry["pid"], []).append(entry["message"])
    # Started once to learn its name (before any play), then each seat its own process.
    named = [p for p, said in by_process.items() if said[-1]["type"] == "quit" and len(said) == 3]
    assert len(named) == 1
    del by_process[named[0]]
    assert len(by_process) == 4
    seats = set()
    for messages in by_process.values():
        kinds = [m["type"] for m in messages]
        assert kinds[:3] == ["hello", "options", "new_hand"] and kinds[-1] == "quit"
        assert kinds.count("new_hand") == kinds.count("hand_over") == 1
        seat = messages[2]["seat"]
        seats.add(seat)
        for message in messages:
            if message["type"] == "decide":
                view = message["view"]
                assert view["seat"] == seat and view["actions"] == message["actions"]
                assert "hands" not in view and view["seed"] is None
                # The API's seats say whose is a program's: the engines' seats.
                assert [s["bot_account"] for s in view["seats"]] == [
                    not s["bot"] for s in view["seats"]
                ]
                assert view["bottom"] is None or view["landlord"] == seat
                assert message["time_left_ms"] == 2000
            if message["type"] == "hand_over":
                assert message["result"] is not None and message["view"]["seed"] is not None
    assert seats == {0, 1, 2, 3}


@pytest.mark.parametrize(
    ("mode", "code", "said"),
    [
        ("crash", "engine_crashed", "crash: exited (exit status 3)"),
        ("illegal", "engine_illegal", "the hand does not hold: S3, S3, S3"),
        ("slow", "engine_timeout", "slow: no answer within 300 ms"),
        ("garbage", "engine_garbage", "wrote 'I think I will play a three'"),
        ("twice", "engine_garbage", "unasked"),
        ("long", "engine_garbage", "wrote a line longer than 1048576 bytes"),
    ],
)
def test_a_failing_engine_is_named_and_the_arena_exits_1(capsys, mode, code, said):
    status, out, err = arena(
        capsys,
        "--engine",
        misbehaving(mode, after=2),
        "--deals",
        "1",
        "--seed",
        SEED,
        "--move-ms",
        "300",
    )
    assert status == 1 and out == ""
    assert err.startswith(f"ddz arena: {code}: ") and said in err


def test_options_go_only_to_an_engine_that_declares_them():
    with pytest.raises(EngineGarbage, match="declares no option depth"):
        Engine(EXAMPLE, options={"depth": 3}).start()


@pytest.mark.parametrize(
    ("engine", "said"),
    [
        ("", "ddz arena: engine_crashed: engine '' did not start: the command is empty"),
        ("python3 'engine.py", "did not start: No closing quotation"),
        ("/no/such/engine", "did not start: [Errno 2] No such file or directory"),
    ],
)
def test_an_engine_that_cannot_start_is_named_without_a_traceback(capsys, engine, said):
    status, out, err = arena(capsys, "--engine", engine, "--deals", "1", "--seed", SEED)
    assert status == 1 and out == ""
    assert said in err and "Traceback" not in err


def test_records_that_cannot_be_written_are_refused_before_play(capsys, tmp_path):
    occupied = tmp_path / "a-file"
    occupied.write_text("")
    status, out, err = arena(
        capsys, "--engine", EXAMPLE, "--deals", "1", "--records", str(occupied)
    )
    assert status == 2 and out == ""
    assert err == f"ddz: --records {occupied}: File exists\n"


@pytest.mark.parametrize("move_ms", ["0", "-5", "soon"])
def test_a_time_per_decision_is_at_least_1_ms(capsys, move_ms):
    with pytest.raises(SystemExit) as refused:
        main(["arena", "--engine", EXAMPLE, "--move-ms", move_ms])
    assert refused.value.code == 2
    assert "--move-ms: a whole number of at least 1" in capsys.readouterr().err


def test_one_deal_gives_no_confidence_interval(capsys):
    code, out, _ = arena(capsys, "--engine", EXAMPLE, "--deals", "1", "--seed", SEED)
    assert code == 0
    assert "95% CI n/a (1 deal)" in out and "95% CI [" not in out


def arena_json(capsys, *args: str) -> dict:
    code, out, err = arena(capsys, *args, "--json")
    assert code == 0, err
    return json.loads(out)


def test_four_copies_of_one_engine_at_one_table_come_out_at_exactly_zero(capsys):
    """Every seating of each deal: each copy plays each seat as often, so a deterministic
    engine against itself wins exactly what it loses."""
    found = arena_json(capsys, *["--engine", EXAMPLE] * 4, "--deals", "2", "--seed", SEED)
    run = found["runs"][0]
    assert run["deals"] == 2 and run["hands"] == 2 * 24 and run["failure"] is None
    assert [r["name"] for r in run["results"]] == [f"lowest-single ({i})" for i in (1, 2, 3, 4)]
    for result in run["results"]:
        assert result["points"] == {"mean": 0.0, "low": 0.0, "high": 0.0}
        assert result["landlord"]["hands"] == 12 and result["farmer"]["seats"] == 36


def test_engines_and_levels_at_one_table_give_the_same_figures_in_two_processes(capsys, tmp_path):
    args = ["--engine", EXAMPLE, "--bot", "easy", "--bot", "normal", "--deals", "3", "--seed", SEED]
    one = arena_json(capsys, *args, "--records", str(tmp_path / "one"))
    two = arena_json(capsys, *args, "--jobs", "2", "--records", str(tmp_path / "two"))
    assert one["runs"] == two["runs"] and two["jobs"] == 2
    names = [r["name"] for r in one["runs"][0]["results"]]
    assert names == ["lowest-single", "house bot (easy)", "house bot (normal)"]
    assert one["runs"][0]["hands"] == 3 * 36
    records = sorted(p.name for p in (tmp_path / "one").glob("*.json"))
    assert len(records) == 3 * 36
    assert records == sorted(p.name for p in (tmp_path / "two").glob("*.json"))
    for name in records[:3]:
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes()
        verify(load((tmp_path / "one" / name).read_bytes()))
    points = [r["points"]["mean"] for r in one["runs"][0]["results"]]
    assert abs(sum(points)) < 1e-9  # zero-sum: what one wins the others lose


def test_a_round_robin_and_a_gauntlet_play_each_pairing(capsys):
    contestants = ["--engine", EXAMPLE, "--bot", "easy", "--bot", "normal"]
    robin = arena_json(capsys, *contestants, "--deals", "2", "--seed", SEED, "--round-robin")
    pairs = [run["contestants"] for run in robin["runs"]]
    assert pairs == [
        ["lowest-single", "house bot (easy)"],
        ["lowest-single", "house bot (normal)"],
        ["house bot (easy)", "house bot (normal)"],
    ]
    assert [o["name"] for o in robin["overall"]][0] == "house bot (normal)"
    gauntlet = arena_json(capsys, *contestants, "--deals", "2", "--seed", SEED, "--gauntlet")
    assert [run["contestants"][0] for run in gauntlet["runs"]] == ["lowest-single"] * 2
    assert gauntlet["runs"] == robin["runs"][:2]
    code, out, _ = arena(capsys, *contestants, "--deals", "2", "--seed", SEED, "--gauntlet")
    assert code == 0 and out.startswith("gauntlet of 3: shanghai-platform")
    assert "lowest-single against house bot (normal): " in out


def test_a_stopping_rule_ends_the_run_early(capsys):
    found = arena_json(
        capsys,
        "--bot",
        "easy",
        "--bot",
        "normal",
        "--deals",
        "40",
        "--seed",
        SEED,
        "--width",
        "1000",
    )
    run = found["runs"][0]
    assert run["deals"] == 10 and "wide, within 1000" in run["stopped"]


def test_a_failure_names_the_deal_hand_seat_and_decision_and_keeps_the_records(capsys, tmp_path):
    status, out, err = arena(
        capsys,
        "--engine",
        misbehaving("crash", after=10),
        "--deals",
        "3",
        "--seed",
        SEED,
        "--records",
        str(tmp_path),
    )
    assert status == 1 and out == ""
    said = re.search(
        r"deal (\d+), hand (\d+), seat (\d), the decision in \w+ at version \d+\); "
        r"(\d+) hands played before it, their records \((\d+)\) kept",
        err,
    )
    assert err.startswith("ddz arena: engine_crashed: ") and said, err
    deal, hand, _, played, kept = map(int, said.groups())
    assert played == 2 * deal and kept == played + hand
    assert len(list(tmp_path.glob("*.json"))) == kept >= 1


def test_more_than_four_at_one_table_are_refused(capsys):
    status, out, err = arena(capsys, *["--bot", "easy"] * 5, "--deals", "1")
    assert status == 2 and out == ""
    assert "4 contestants at one table at most" in err
