"""``ddz rebuild``: every read model made again from the events
(:mod:`service.store.rebuild`), and the ledger's rows that the events call for but that
are missing (a settlement, or its entries) written from the hand recomputed through the
rules, as the settlement job writes them, each hand written checked and its verdict
stored as the settlement job does. The ledger's rows that exist are never changed
(they refuse it): ``--check`` runs the full ledger check over them. A rebuild also makes
every rating again (:func:`.ratings.rebuild`); ``--check`` leaves them out, since live
ratings may follow the order in which hands were rated rather than settled
(docs/ratings.md)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from psycopg_pool import ConnectionPool

from ..game import State
from ..game.record import export, verify
from ..store import EventStore, ledger
from ..store.ratings import RatingStore
from ..store.rebuild import Found, ReadModels
from . import ratings
from .audit import check_ledger, check_settling


@dataclass
class Rebuilt:
    """What ``ddz rebuild`` found (and wrote): the read models' differences, the ledger's
    missing rows, the ledger check's problems (``--check``)."""

    read_models: Found
    ledger: list[str] = field(default_factory=list)
    written: int = 0
    check: dict[str, Any] | None = None
    #: The settled hands the ratings were made again from (rebuilding only).
    rated: int = 0

    @property
    def ok(self) -> bool:
        """Nothing differs (checking), or nothing is left differing (rebuilding)."""
        if self.check is not None:
            return not (self.read_models.differences or self.ledger or self.check["problems"])
        return not self.read_models.left


def rebuild(
    pool: ConnectionPool,
    store: EventStore,
    write: bool,
    progress: Callable[[Found], None] | None = None,
) -> Rebuilt:
    """Compares (and, with ``write``, rebuilds) every read model, then the ledger's rows
    that the events call for; checking, also the full ledger check."""
    found = ReadModels(pool).run(write, progress)
    rebuilt = Rebuilt(found)
    settlements, entries = ledger.unbooked(pool)
    for match_id in settlements:
        rebuilt.ledger.append(f"settlements {match_id}: missing, its events say settled")
        if write:
            state = _recomputed(store, match_id)
            with store.connection(transaction=True) as conn:
                if ledger.write_settlement(conn, match_id, state):
                    rebuilt.written += 1 + len(ledger.movements(state))
                    rebuilt.ledger += check_settling(pool, conn, match_id, state)
    for match_id in entries:
        state = _recomputed(store, match_id)
        if not ledger.movements(state):
            continue  # no point moved: no entry is due
        rebuilt.ledger.append(f"ledger_entries {match_id}: missing")
        if write:
            with store.connection(transaction=True) as conn:
                rebuilt.written += ledger.write_entries(conn, match_id, state)
                rebuilt.ledger += check_settling(pool, conn, match_id, state)
    if write:
        rebuilt.rated = ratings.rebuild(store, RatingStore(pool))
    else:
        rebuilt.check = check_ledger(pool, store)
    return rebuilt


def _recomputed(store: EventStore, match_id: uuid.UUID) -> State:
    """The hand recomputed from its events through the rules (as the settlement job does)."""
    return verify(export(e.event for e in store.read(match_id)))
