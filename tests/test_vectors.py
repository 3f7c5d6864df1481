"""Every conformance vector, through the library and through `ddz rules`."""

import json
import subprocess
import sys

import pytest

from service.rules import InvalidCombination, Ruleset, beats, classify


def engine_answer(vector):
    ruleset = Ruleset.by_name(vector.get("ruleset"))
    if "over" in vector:
        return {"beats": beats(vector["cards"], vector["over"], ruleset)}
    try:
        combination = classify(vector["cards"], ruleset)
    except InvalidCombination:
        return {"valid": False}
    return {"valid": True, "type": combination.type.value, "rank": combination.rank}


def test_vectors_file_is_complete(vectors):
    assert len(vectors) >= 75
    assert {v["ruleset"] for v in vectors} == {"shanghai-platform", "shanghai-local"}


def test_every_vector_through_the_library(vectors):
    failures = [(v, engine_answer(v)) for v in vectors if engine_answer(v) != v["expect"]]
    assert failures == []


@pytest.mark.slow
def test_every_vector_through_ddz_rules(vectors):
    requests = "".join(
        json.dumps({k: v[k] for k in ("cards", "over", "ruleset") if k in v}) + "\n"
        for v in vectors
    )
    out = subprocess.run(
        [sys.executable, "-m", "service.cli", "rules"],
        input=requests,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert len(out) == len(vectors)
    for vector, line in zip(vectors, out):
        answer = json.loads(line)
        if vector["expect"].get("valid") is False:
            assert answer["valid"] is False and answer["error"], vector
        else:
            assert answer == vector["expect"], vector
