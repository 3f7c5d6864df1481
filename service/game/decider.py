"""``decide(state, command) -> events``: every rule of docs/rules.md §4-5 about who may do what
and when. Pure; refuses with a :class:`GameError` whose ``code`` names the rule.

Each action also has ``can_<action>(state, …) -> bool`` and ``verify_<action>`` (raises)
in the PokerKit manner; ``decide`` is built from the ``verify`` checks.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from ..rules import (
    SEATS,
    Combination,
    ReportChoice,
    RulesError,
    commitment,
    deal,
    locked_ranks,
    verify_play,
)
from ..rules.deal import SEED_BYTES
from .commands import (
    Bid,
    Command,
    CreateMatch,
    DealHand,
    Disconnect,
    Pass,
    Play,
    Report,
    Resume,
    Settle,
    ShowHand,
    TakeSeat,
)
from .errors import GameError
from .events import (
    BOT,
    PLAYER,
    BidMade,
    Disconnected,
    Event,
    HandDealt,
    HandEnded,
    HandShown,
    LandlordChosen,
    MatchCreated,
    Passed,
    Played,
    Reported,
    Resumed,
    SeatTaken,
    Settled,
)
from .settlement import FARMERS, LANDLORD, MAX_BID, Factors, HandOutcome, HandResult, settle
from .state import (
    BIDDING,
    BIDS,
    DEALING,
    DECISION_PHASES,
    ENDED,
    NEW,
    PLAYING,
    REPORT,
    SEATING,
    SHOW_HAND,
    State,
    evolve,
    open_bids,
    replay,
)

DISCONNECT_REASONS = ("deadline", "left")


def _phase(state: State, *phases: str) -> None:
    if state.phase not in phases:
        if state.phase == ENDED:
            raise GameError("the hand has ended", "match_ended")
        raise GameError(
            f"not allowed in phase {state.phase!r} (allowed in: {', '.join(phases)})", "wrong_phase"
        )


def _seat(seat: object) -> None:
    if type(seat) is not int or not 0 <= seat < SEATS:
        raise GameError(f"seat must be 0, 1, 2 or 3, not {seat!r}", "invalid_seat")


def _turn(state: State, seat: int, by: str) -> None:
    """The seat acts now, and by the right hand: its player, or the system for a bot seat
    or a disconnected player (who must ``resume`` to act again)."""
    _seat(seat)
    if state.turn != seat:
        raise GameError(f"it is seat {state.turn}'s turn, not seat {seat}'s", "not_your_turn")
    if by not in (PLAYER, BOT):
        raise GameError(f"'by' must be {PLAYER!r} or {BOT!r}", "invalid_command")
    if by == PLAYER and state.is_system(seat):
        raise GameError(
            "the system plays this seat; resume to take control back", "seat_under_system_control"
        )
    if by == BOT and not state.is_system(seat):
        raise GameError(
            "this seat's player is connected and acts for it", "seat_not_under_system_control"
        )


def _landlord(state: State, seat: int) -> None:
    if seat != state.landlord:
        raise GameError("only the landlord decides this", "not_landlord")


# --- verify / can / decide per action --------------------------------------------------


def verify_create_match(state: State, command: CreateMatch) -> None:
    if state.phase != NEW:
        raise GameError("the match exists already", "match_exists")
    if not isinstance(command.match_id, str) or not command.match_id:
        raise GameError("a match needs an id", "invalid_command")


def verify_take_seat(state: State, command: TakeSeat) -> None:
    _phase(state, SEATING)
    _seat(command.seat)
    if state.seats[command.seat] is not None:
        raise GameError(f"seat {command.seat} is taken", "seat_taken")
    if command.bot == (command.player is not None):
        raise GameError("a seat takes either a player or a bot", "invalid_command")
    if command.player is not None and any(
        s is not None and s.player == command.player for s in state.seats
    ):
        raise GameError("this player already has a seat at this match", "already_seated")


def verify_deal(state: State, command: DealHand) -> None:
    _phase(state, DEALING)
    if not isinstance(command.seed, bytes) or len(command.seed) != SEED_BYTES:
        raise GameError("a seed is 32 bytes", "invalid_command")


def verify_bid(state: State, command: Bid) -> None:
    _phase(state, BIDDING)
    _turn(state, command.seat, command.by)
    if command.value not in BIDS or type(command.value) is not int:
        raise GameError("a bid is 1, 2 or 3, or 0 to pass", "invalid_bid")
    if command.value not in open_bids(state.highest_bid):
        raise GameError(f"a bid must be higher than {state.highest_bid}", "bid_too_low")


def verify_show_hand(state: State, command: ShowHand) -> None:
    _phase(state, SHOW_HAND)
    _turn(state, command.seat, command.by)
    _landlord(state, command.seat)
    if type(command.value) is not bool:
        raise GameError("show_hand takes true or false", "invalid_command")


def verify_report(state: State, command: Report) -> None:
    _phase(state, REPORT)
    _turn(state, command.seat, command.by)
    _landlord(state, command.seat)
    if command.value not in tuple(ReportChoice):
        raise GameError(f"report takes one of {', '.join(ReportChoice)}", "invalid_report")


def verify_play_command(state: State, command: Play) -> Combination:
    """The reading the play is recorded as; raises if it is not legal now."""
    _phase(state, PLAYING)
    _turn(state, command.seat, command.by)
    assert state.table is not None
    try:
        return verify_play(
            state.hands[command.seat],
            command.cards,
            state.lead,
            ruleset=state.table.ruleset,
            bombs_left=state.bombs_left(command.seat),
            locked=state.locks(command.seat),
            lead_cards=state.lead_cards,
        )
    except RulesError as exc:
        raise GameError(str(exc), exc.code) from None


def verify_pass(state: State, command: Pass) -> None:
    _phase(state, PLAYING)
    _turn(state, command.seat, command.by)
    if state.lead is None:
        raise GameError("the seat that leads must play", "leader_cannot_pass")


def verify_disconnect(state: State, command: Disconnect) -> None:
    _phase(state, *DECISION_PHASES)
    _seat(command.seat)
    if command.reason not in DISCONNECT_REASONS:
        raise GameError(f"reason is one of {', '.join(DISCONNECT_REASONS)}", "invalid_command")
    taken = state.seats[command.seat]
    assert taken is not None  # every seat is taken before the deal
    if taken.bot:
        raise GameError("a bot seat cannot disconnect", "bot_seat")
    if state.disconnected[command.seat]:
        raise GameError("the seat is disconnected already", "already_disconnected")


def verify_resume(state: State, command: Resume) -> None:
    _phase(state, *DECISION_PHASES)
    _seat(command.seat)
    if not state.disconnected[command.seat]:
        raise GameError("the seat is not disconnected", "not_disconnected")


def verify_settle(state: State, command: Settle) -> None:
    if state.phase != ENDED:
        raise GameError("only an ended hand is settled", "wrong_phase")
    if state.settled:
        raise GameError("the hand is settled already", "already_settled")


def _decide_create_match(state: State, c: CreateMatch) -> list[Event]:
    verify_create_match(state, c)
    return [MatchCreated(c.match_id, c.table)]


def _decide_take_seat(state: State, c: TakeSeat) -> list[Event]:
    verify_take_seat(state, c)
    return [SeatTaken(c.seat, c.player, c.bot)]


def _decide_deal(state: State, c: DealHand) -> list[Event]:
    verify_deal(state, c)
    d = deal(c.seed)
    return [
        HandDealt(commitment(c.seed), c.seed.hex(), d.hands, d.bottom, d.marked_card, d.marked_seat)
    ]


def _decide_bid(state: State, c: Bid) -> list[Event]:
    verify_bid(state, c)
    events: list[Event] = [BidMade(c.seat, c.value, c.by)]
    after = evolve(state, events[0])
    turns_taken = sum(b is not None for b in after.bids)
    if c.value == MAX_BID or turns_taken == SEATS:
        if after.highest_bid:
            landlord, bid = after.highest_bidder, after.highest_bid
        else:
            landlord, bid = after.marked_seat, 1  # all passed: the marked card's holder, at 1
        assert landlord is not None
        events.append(LandlordChosen(landlord, bid, state.bottom))
    return events


def _decide_show_hand(state: State, c: ShowHand) -> list[Event]:
    verify_show_hand(state, c)
    return [HandShown(c.seat, c.value, state.hands[c.seat] if c.value else (), c.by)]


def _decide_report(state: State, c: Report) -> list[Event]:
    verify_report(state, c)
    units = state.reportable_units() if c.value != ReportChoice.DECLINE else []
    locked = tuple(sorted(locked_ranks(units)))
    cards = tuple(card for card in state.hands[c.seat] if card.rank in locked)
    event = Reported(c.seat, ReportChoice(c.value), len(units), cards, locked, c.by)
    if c.value != ReportChoice.NO_PLAY:
        return [event]
    # 不打: the hand ends at once, a landlord win by the 报到 formula.
    return [event, _hand_ended(evolve(state, event), LANDLORD)]


def _decide_play(state: State, c: Play) -> list[Event]:
    combination = verify_play_command(state, c)
    # _value_, the member's own attribute: ``value`` is a property of Enum's, a call.
    played = Played(c.seat, tuple(c.cards), combination.type._value_, combination.rank, c.by)
    if len(c.cards) < len(state.hands[c.seat]):
        return [played]
    # The seat goes out: the result needs the state after the play (its bomb counts).
    after = evolve(state, played)
    return [played, _hand_ended(after, LANDLORD if c.seat == state.landlord else FARMERS)]


def _decide_pass(state: State, c: Pass) -> list[Event]:
    verify_pass(state, c)
    return [Passed(c.seat, c.by)]


def _decide_disconnect(state: State, c: Disconnect) -> list[Event]:
    verify_disconnect(state, c)
    return [Disconnected(c.seat, c.reason)]


def _decide_resume(state: State, c: Resume) -> list[Event]:
    verify_resume(state, c)
    return [Resumed(c.seat)]


def _decide_settle(state: State, c: Settle) -> list[Event]:
    verify_settle(state, c)
    assert state.result is not None  # the hand has ended
    settlement = state.result.settlement.to_json()
    return [Settled(tuple(settlement["net"]), settlement["house"])]


def outcome(state: State, winner: str) -> HandOutcome:
    """What settlement needs to know of a hand that ends with ``winner``."""
    assert state.marked_card is not None and state.landlord is not None and state.bid is not None
    factors = Factors(
        marked_joker=state.marked_card.is_joker,
        first_bid_three=state.first_bid_three,
        show_hand=bool(state.show_hand),
        report=None if state.report == ReportChoice.DECLINE else state.report,
        report_units=state.report_units,
        bombs=state.bombs,
    )
    return HandOutcome(state.landlord, state.bid, winner, factors, state.first_disconnect)


#: Settlements by outcome and the table's terms: settling is exact arithmetic on fractions
#: and decimals (a twentieth of a simulated hand's time), and the same few outcomes recur.
_settle = functools.lru_cache(maxsize=1 << 12, typed=True)(settle)


def _hand_ended(state: State, winner: str) -> HandEnded:
    table = state.table
    assert table is not None and state.seed is not None
    result = outcome(state, winner)
    settlement = _settle(
        result,
        unit=table.unit,
        cap=table.cap,
        rake=table.rake,
        bombs_double=table.ruleset.bombs_double,
    )
    return HandEnded(state.seed, HandResult(result, settlement))


# Each handler takes the command class it is filed under (hence Any, which the dict's pairs
# make safe).
_DECIDE: dict[type[Command], Callable[[State, Any], list[Event]]] = {
    CreateMatch: _decide_create_match,
    TakeSeat: _decide_take_seat,
    DealHand: _decide_deal,
    Bid: _decide_bid,
    ShowHand: _decide_show_hand,
    Report: _decide_report,
    Play: _decide_play,
    Pass: _decide_pass,
    Disconnect: _decide_disconnect,
    Resume: _decide_resume,
    Settle: _decide_settle,
}

_VERIFY: dict[type[Command], Callable[[State, Any], object]] = {
    CreateMatch: verify_create_match,
    TakeSeat: verify_take_seat,
    DealHand: verify_deal,
    Bid: verify_bid,
    ShowHand: verify_show_hand,
    Report: verify_report,
    Play: verify_play_command,
    Pass: verify_pass,
    Disconnect: verify_disconnect,
    Resume: verify_resume,
    Settle: verify_settle,
}


def decide(state: State, command: Command) -> list[Event]:
    """The events that ``command`` causes, or a :class:`GameError` saying which rule it breaks."""
    handler = _DECIDE.get(type(command))
    if handler is None:
        raise GameError(f"unknown command {command!r}", "invalid_command")
    return handler(state, command)


def applied(state: State, command: Command) -> State:
    """The state after ``command``: its events decided and folded in, for play that keeps
    no events (checking a record, calibrating the bot)."""
    return replay(decide(state, command), state)


def can(state: State, command: Command) -> bool:
    """Whether ``decide`` would accept the command."""
    try:
        _VERIFY[type(command)](state, command)
    except GameError:
        return False
    return True
