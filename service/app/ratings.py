"""Ratings applied (docs/ratings.md): each settled hand rated once, from its events, by the
rating job (``rate_hand``, enqueued after the settlement and found again by the workers'
sweep), for those it rates in fairness (:func:`~service.game.ratings.fairly_rated`); and
every rating made again from the events (``ddz ratings rebuild``), voided hands left out."""

from __future__ import annotations

import uuid
from collections.abc import Callable

from ..game.ratings import Rating, fairly_rated, rate, rated_hand
from ..store import EventStore
from ..store.ratings import RatingStore


def rate_settled(store: EventStore, ratings: RatingStore, match_id: uuid.UUID) -> str:
    """Rates the settled hand, once (a second call, or two at once, rate it once)."""
    dealt = rated_hand(s.event for s in store.read(match_id))
    if dealt is None:
        return "not ended"
    hand = fairly_rated(dealt, ratings.terms(match_id, dealt.rated))
    changes = ratings.rate_hand(
        match_id, hand.ruleset, hand.rated, lambda before: rate(hand, before)
    )
    if changes is None:
        return "rated already"
    return f"rated {len(changes)} players"


def rebuild(
    store: EventStore, ratings: RatingStore, progress: Callable[[int], None] | None = None
) -> int:
    """Every rating made again from the events of the settled hands, in the order they
    were settled; returns how many hands. ``progress`` is told the count now and then."""
    hands = 0
    with ratings.rebuilding() as rebuilding:
        current: dict[str, dict[str, Rating]] = {}
        for match_id, terms in rebuilding.hands():
            dealt = rated_hand(s.event for s in store.read(match_id, 0, rebuilding.conn))
            if dealt is None:
                continue  # a settled hand has ended: nothing is missing but by hand
            hand = fairly_rated(dealt, terms)
            before = current.setdefault(hand.ruleset, {})
            changes = rate(hand, before)
            before.update((c.player, c.after) for c in changes)
            rebuilding.add(match_id, hand.ruleset, changes)
            hands += 1
            if progress is not None and hands % 1000 == 0:
                progress(hands)
    return hands
