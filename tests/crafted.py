"""Seat views crafted for one decision (a hand, a lead, the bids so far), shared by the
bot's tests (test_bot, test_levels, test_calibration)."""

from __future__ import annotations

from service.game.settings import MatchSettings
from service.game.state import BIDDING, PLAYING
from service.game.views import SeatInfo, SeatView
from service.rules import Card, classify, rank_index


def cards(ranks: str) -> tuple[Card, ...]:
    """Cards for a rank string (suits do not matter in play; two decks allow repeats)."""
    out = []
    for i, ch in enumerate(ranks):
        r = rank_index(ch)
        out.append(Card(r, "J" if ch in "BR" else "SHCD"[i % 4]))
    return tuple(out)


def make_view(
    hand: str,
    *,
    seat: int = 2,
    landlord: int = 0,
    cards_left: tuple[int, ...] = (28, 20, 20, 20),
    lead: str | None = None,
    lead_seat: int | None = None,
    bids: tuple[int | None, ...] = (1, 0, 0, 0),
    bid: int | None = 1,
    bombs_left: int | None = 1,
    phase: str = PLAYING,
    table: MatchSettings | None = None,
    marked_seat: int = 0,
    first_bid_three: bool = False,
    show_hand: bool | None = None,
    locked: frozenset[int] = frozenset(),
) -> SeatView:
    """A view crafted for one decision of ``seat`` (whose turn it is)."""
    table = table or MatchSettings.build("shanghai-platform")
    held = cards(hand)
    counts = list(cards_left)
    counts[seat] = len(held)
    lead_combination = classify(lead, table.ruleset) if lead else None
    return SeatView(
        match_id="crafted",
        phase=phase,
        version=1,
        seat=seat,
        table=table,
        seats=tuple(SeatInfo(None, True, False, n, 0) for n in counts),
        commitment=None,
        marked_card=None,
        marked_seat=marked_seat,
        hand=held,
        bids=bids,
        landlord=landlord,
        bid=bid,
        bottom=None,
        first_bid_three=first_bid_three,
        show_hand=show_hand,
        landlord_hand=None,
        report=None,
        reported_cards=(),
        locked=locked,
        turn=seat,
        lead=lead_combination,
        lead_seat=lead_seat if lead else None,
        lead_cards=cards(lead) if lead else (),
        passes=0,
        bombs=0,
        bombs_left=None if seat == landlord else bombs_left,
        result=None,
        seed=None,
    )


def first_bid_view(hand: str, table: MatchSettings | None = None) -> SeatView:
    """Seat 0's view as it bids first (no seat has bid yet)."""
    return make_view(
        hand,
        seat=0,
        phase=BIDDING,
        bids=(None,) * 4,
        bid=None,
        landlord=None,
        table=table,
    )
