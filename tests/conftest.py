import json
import re
from pathlib import Path

import pytest
from argon2 import PasswordHasher
from hypothesis import settings
from hypothesis import strategies as st

from service.rules import RANKS, RULESETS
from service.store import operators

#: Fixture modules: the servers of the session, the worker tests' own service, the
#: operations tests' own service, and the check that no test leaves a process running.
pytest_plugins = ["servers", "jobs", "handplay", "processes"]
#: Support modules whose helpers assert: pytest explains their failed asserts as it does
#: those of test modules and plugins.
pytest.register_assert_rewrite("api_support", "bad_network", "contract", "processes")

# Property tests check what the engine does, not how fast (speed is measured by
# benchmarks/): no deadline per example, which a busy machine would miss.
settings.register_profile("ddz", deadline=None)
settings.load_profile("ddz")

DATA = Path(__file__).parent / "data"

#: How a module marks every test of its own slow.
SLOW_THROUGHOUT = re.compile(r"^pytestmark = pytest\.mark\.slow$", re.MULTILINE)


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """``-m "not slow"`` (``bin/test --fast``) does not import a module whose tests are all
    slow: they would all be deselected, once every worker had spent its seconds collecting
    them (schemathesis' generated cases, the browsers' drivers)."""
    if (
        config.option.markexpr == "not slow"
        and collection_path.name.startswith("test_")
        and collection_path.suffix == ".py"
        and SLOW_THROUGHOUT.search(collection_path.read_text(encoding="utf-8"))
    ):
        return True
    return None


@pytest.fixture(scope="session", autouse=True)
def cheap_password_hashes():
    """Operators' passwords hashed by argon2 at its lowest cost in the tests' processes:
    they check who gets in, not what a guess costs (a quarter of a second of CPU per hash or
    check at the service's cost, a hundred of them in a run)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(
            operators, "_HASHER", PasswordHasher(time_cost=1, memory_cost=8, parallelism=1)
        )
        yield


#: A rank string that two decks can hold (each of 3…2 at most 8 times, each joker twice).
POOL = "".join(ch * 8 for ch in RANKS[:13]) + "BBRR"


def rank_strings(max_size: int, alphabet: str = RANKS):
    """Rank strings drawn from a few ranks of ``alphabet``, so that structures
    (sequences, full houses, planes with pairs, bombs) are common."""

    @st.composite
    def build(draw):
        ranks = draw(st.lists(st.sampled_from(alphabet), min_size=1, max_size=6, unique=True))
        pool = "".join(ch * (2 if ch in "BR" else 8) for ch in ranks)
        size = draw(st.integers(min_value=1, max_value=min(max_size, len(pool))))
        picked = draw(st.permutations(pool))[:size]
        return "".join(picked)

    return build()


rulesets = st.sampled_from(sorted(RULESETS))


@pytest.fixture(scope="session")
def vectors():
    with open(DATA / "vectors.jsonl", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]
