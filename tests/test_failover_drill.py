"""The failover drill (tests/ha_drill.py): with Patroni managing two PostgreSQL instances
(synchronous_mode) on etcd, and Redis under three sentinels, the service as deployed
(``ddz serve`` with two API processes and its worker, and a second worker) loses its
PostgreSQL primary mid-play, by SIGKILL of the postmaster or by a cut of its network,
then its Redis master: no command answered 200 is missing from the store, every hand is
settled once, the ledger adds to zero and passes its check, no answer is a 5xx but a 503
with Retry-After, every stream resumed with Last-Event-ID delivers every event once, and
the game goes on after each loss. The times it measured are printed (``-s``); their
figures over several runs come from benchmarks/failover_drill.py and are in
docs/operations.md."""

from __future__ import annotations

import pytest
from ha import ETCD, PATRONI
from ha_drill import KINDS, drill

# Slow: starts servers or other processes (bin/test --fast leaves it out).
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not (PATRONI and ETCD),
        reason="needs Debian's patroni and etcd-server (.ci/run installs them)",
    ),
]


@pytest.mark.parametrize("kind", KINDS)
def test_losing_the_primary_then_the_redis_master_loses_nothing(kind, tmp_path):
    figures = drill(kind, tmp_path / "logs")
    print(figures.line())
    assert figures.failures == []
    assert figures.acknowledged > 0 and figures.lost == []
    assert figures.hands > 0 and figures.unsettled == []
    assert figures.ledger["ok"] and figures.ledger["total"] == "0.00", figures.ledger
    assert figures.ledger["unchecked"] == 0
    assert figures.errors == []
    assert figures.stream_problems == []
    for loss in figures.losses:
        assert loss.first_answer is not None, f"no command answered after the {loss.what} was lost"
        assert loss.moved is not None, f"a match stopped after the {loss.what} was lost"
