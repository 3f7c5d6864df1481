"""What every seat may see (docs/rules.md §6), through ``view(state, seat)`` and
``visible(event, seat)``: its own hand; every seat's card count; the marked card and its
holder; every bid, pass and play; the bottom only as landlord; the landlord's hand after
摊打; the reported cards after 报到; the seed only after the end. The operator sees everything.

The main check plays whole hands and, after every event, collects every card code each seat
can see in its view and in the event, and compares it with what the seat may know then.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
import re
from collections import Counter

import pytest
from hidden import reshuffled

from service.game import (
    OPERATOR,
    Bid,
    DealHand,
    Disconnect,
    Event,
    MatchSettings,
    Pass,
    Play,
    Report,
    Resume,
    ShowHand,
    State,
    can,
    decide,
    evolve,
    initial_state,
    offered,
    replay,
    seat_view,
    view,
    visible,
)
from service.game.events import (
    BOT,
    PLAYER,
    BidMade,
    Disconnected,
    HandDealt,
    HandShown,
    LandlordChosen,
    MatchCreated,
    Passed,
    Played,
    Reported,
    Resumed,
    SeatTaken,
)
from service.game.views import SeatView
from service.rules import DECK, Card, legal_plays, parse_ranks, pick_cards, rank_index

PLAYERS = ("alice", "bob", "carol", "dave")
RULESETS = ("shanghai-platform", "shanghai-local")
SEED = bytes.fromhex("c0de" * 16)
VIEWERS = (0, 1, 2, 3, None)  # the four seats and an onlooker
CODE = re.compile(r"(?:[SHCD][3-9TJQKA2]|[BR]J)\Z")


# --------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------


def seated(ruleset=None, *, bots=()) -> list[Event]:
    events: list[Event] = [MatchCreated("match-views", MatchSettings.build(ruleset=ruleset))]
    for seat in range(4):
        events.append(
            SeatTaken(seat, None, True) if seat in bots else SeatTaken(seat, PLAYERS[seat], False)
        )
    return events


def craft(
    hands: dict[int, str], bottom: str = "", *, marked_seat: int = 0, marked: str | None = None
) -> HandDealt:
    """A deal with these ranks in these hands; the rest of the 108 cards spread round-robin."""
    pool = sorted(DECK)

    def take(ranks: str) -> list[Card]:
        out = []
        for ch in ranks.replace(" ", ""):
            card = next(c for c in pool if c.rank == rank_index(ch))
            pool.remove(card)
            out.append(card)
        return out

    dest = [take(hands.get(seat, "")) for seat in range(4)] + [take(bottom)]
    size = [25, 25, 25, 25, 8]
    i = 0
    for card in pool:
        while len(dest[i % 5]) >= size[i % 5]:
            i += 1
        dest[i % 5].append(card)
        i += 1
    assert [len(d) for d in dest] == size
    assert Counter(c for d in dest for c in d) == Counter(DECK)
    card = next(
        c for c in dest[marked_seat] if (c.rank_char == marked if marked else not c.is_joker)
    )
    return HandDealt(
        hashlib.sha256(SEED).hexdigest(),
        SEED.hex(),
        tuple(tuple(d) for d in dest[:4]),
        tuple(dest[4]),
        card,
        marked_seat,
    )


def codes(cards) -> list[str]:
    return [c.code for c in cards]


def as_shown(cards) -> list[str]:
    """Card codes as a view shows them: by rank (3 … 2, small joker, big joker), then suit S H C D."""
    return codes(sorted(cards, key=lambda card: (card.rank, "SHCDJ".index(card.suit))))


def by_for(state: State, seat: int) -> str:
    return BOT if state.is_system(seat) else PLAYER


def after(state: State, *commands) -> State:
    for command in commands:
        for event in decide(state, command):
            state = evolve(state, event)
    return state


def play(state: State, ranks: str, seat: int | None = None) -> Play:
    seat = state.turn if seat is None else seat
    return Play(
        seat,
        pick_cards(state.hands[seat], parse_ranks(ranks.replace(" ", ""))),
        by_for(state, seat),
    )


def pass_until(state: State, seat: int) -> State:
    while state.turn != seat:
        state = after(state, Pass(state.turn, by_for(state, state.turn)))
    return state


def legal(state: State, seat: int):
    return list(
        legal_plays(
            state.hands[seat],
            state.lead,
            ruleset=state.table.ruleset,
            bombs_left=state.bombs_left(seat),
            locked=state.locked if seat == state.landlord else frozenset(),
        )
    )


def random_command(state: State, rng: random.Random):
    seat = state.turn
    by = by_for(state, seat)
    if state.phase == "bidding":
        return Bid(seat, rng.choice([0] + [v for v in (1, 2, 3) if v > state.highest_bid]), by)
    if state.phase == "show_hand":
        return ShowHand(seat, rng.random() < 0.5, by)
    if state.phase == "report":
        return Report(seat, rng.choice(["play", "no_play", "decline"]), by)
    options = legal(state, seat) + ([None] if state.lead is not None else [])
    choice = rng.choice(options)
    return (
        Pass(seat, by)
        if choice is None
        else Play(seat, pick_cards(state.hands[seat], choice.counts), by)
    )


def play_out(
    events: list[Event], rng: random.Random, *, first=(), disconnects: float = 0.05
) -> list[Event]:
    """The events of a whole hand: these, then ``first`` commands, then random legal
    decisions, with player seats disconnecting and resuming now and then."""
    log = list(events)
    state = replay(log)
    pending = list(first)
    while state.phase != "ended":
        seat = rng.randrange(4)
        if pending:
            command = pending.pop(0)
        elif rng.random() < disconnects and not state.seats[seat].bot:
            command = Resume(seat) if state.disconnected[seat] else Disconnect(seat)
        else:
            command = random_command(state, rng)
        for event in decide(state, command):
            state = evolve(state, event)
            log.append(event)
    return log


def dealt_hands(ruleset: str, count: int):
    """Whole hands from real deals (``DealHand`` command), some seats bots."""
    for i in range(count):
        rng = random.Random(f"{ruleset}-{i}")
        bots = tuple(s for s in range(4) if rng.random() < 0.3)
        events = seated(ruleset, bots=bots)
        events += decide(replay(events), DealHand(rng.randbytes(32)))
        yield play_out(events, rng)


#: The landlord-to-be (seat 0, marked) holds seven 3s and the four jokers, and bids 3 first:
#: 头撂, then 摊打 or not, then 报到 (play, no_play or decline) at random.
REPORT_DEAL = craft({0: "3333333 BBRR", 1: "3"})


def report_hands(ruleset: str, count: int):
    for i in range(count):
        rng = random.Random(f"report-{ruleset}-{i}")
        yield play_out([*seated(ruleset), REPORT_DEAL], rng, first=[Bid(0, 3)])


# --------------------------------------------------------------------------
# What a seat may know, and every card code it sees
# --------------------------------------------------------------------------


class Knowledge:
    """Which cards each viewer may know at this point of the hand, as a multiset of codes
    (each code exists twice). A seat knows all of its own cards (with the bottom once it is
    landlord); of another seat, the cards that seat played, the marked card, and — of the
    landlord — the reported cards after 报到 and the whole hand after 摊打."""

    def __init__(self):
        self.deal: HandDealt | None = None
        self.landlord: int | None = None
        self.played = [Counter() for _ in range(4)]
        self.reported: Counter = Counter()
        self.shown = False

    def see(self, event: Event) -> None:
        if isinstance(event, HandDealt):
            self.deal = event
        elif isinstance(event, LandlordChosen):
            self.landlord = event.seat
        elif isinstance(event, HandShown) and event.value:
            self.shown = True
        elif isinstance(event, Reported):
            self.reported = Counter(codes(event.cards))
        elif isinstance(event, Played):
            self.played[event.seat] += Counter(codes(event.cards))

    def holding(self, seat: int) -> Counter:
        held = Counter(codes(self.deal.hands[seat]))
        if seat == self.landlord:
            held += Counter(codes(self.deal.bottom))
        return held

    def allowed(self, viewer) -> Counter:
        known: Counter = Counter()
        if self.deal is None:
            return known
        for seat in range(4):
            held = self.holding(seat)
            if seat == viewer or (self.shown and seat == self.landlord):
                known += held
                continue
            seen = Counter(self.played[seat])
            if seat == self.landlord:
                seen += self.reported
            if seat == self.deal.marked_seat:
                seen[self.deal.marked_card.code] += 1
            known += Counter({code: min(n, held[code]) for code, n in seen.items()})
        return known


def card_lists(document):
    """Every list of card codes in a JSON document (a lone code counts as a list of one)."""
    if isinstance(document, dict):
        for value in document.values():
            yield from card_lists(value)
    elif isinstance(document, list):
        if document and all(isinstance(x, str) and CODE.match(x) for x in document):
            yield document
        else:
            for value in document:
                yield from card_lists(value)
    elif isinstance(document, str) and CODE.match(document):
        yield [document]


def check_hand(log: list[Event]) -> dict:
    """Walks a whole hand and checks, after every event and for every viewer, the view
    and the event as that viewer sees them. Returns what happened, for coverage checks."""
    seen = Counter()
    know = Knowledge()
    state = initial_state
    seed = next(e.seed for e in log if isinstance(e, HandDealt))
    turns: list[dict] = []  # the history every view must show, from the events themselves
    for event in log:
        state = evolve(state, event)
        know.see(event)
        if isinstance(event, Played):
            turns.append({"seat": event.seat, "action": "play", "cards": as_shown(event.cards)})
        elif isinstance(event, Passed):
            turns.append({"seat": event.seat, "action": "pass", "cards": []})
        seen[event.type] += 1
        ended = state.phase == "ended"
        for viewer in VIEWERS:
            v = view(state, viewer)
            e = visible(event, viewer)
            documents = [json.loads(json.dumps(v)), json.loads(json.dumps(e))]
            if not ended:
                allowed = know.allowed(viewer)
                for document in documents:
                    assert seed not in json.dumps(document), (viewer, event.type)
                    assert "hands" not in document
                    for cards in card_lists(document):
                        extra = Counter(cards) - allowed
                        assert not extra, (
                            f"seat {viewer} sees {sorted(extra.elements())} in {event.type} / view"
                        )
            check_view_fields(state, viewer, v)
            assert v["history"] == turns
            check_counting(state, viewer, v)
        check_operator(state, event)
    seen["show_hand=true"] += know.shown
    seen[f"report={state.report}"] += 1
    return seen


def check_view_fields(state: State, viewer, v: dict) -> None:
    """The fields of a seat's view, one by one."""
    landlord = state.landlord
    ended = state.phase == "ended"
    assert v["seat"] == viewer
    assert v["hand"] == (as_shown(state.hands[viewer]) if viewer is not None else [])
    if state.seats[0] is not None and all(state.seats):
        assert [s["cards"] for s in v["seats"]] == [len(h) for h in state.hands]
    assert v["marked_card"] == (state.marked_card.code if state.marked_card else None)
    assert v["marked_seat"] == state.marked_seat
    assert v["commitment"] == state.commitment
    assert v["bids"] == list(state.bids)
    if landlord is not None and viewer == landlord:
        assert v["bottom"] == as_shown(state.bottom)
    else:
        assert v["bottom"] is None
    if state.show_hand:
        assert v["landlord_hand"] == as_shown(state.hands[landlord])
    else:
        assert v["landlord_hand"] is None
    if state.report in ("play", "no_play"):
        # The cards shown at 报到, whether still in the hand or played since.
        reported = list(state.reported_cards)
        units = Counter(c.rank for c in reported)
        assert units and all(n >= 7 or (r >= 13 and n == 2) for r, n in units.items())
        assert Counter(v["reported_cards"]) == Counter(codes(reported))
    else:
        assert v["reported_cards"] == []
    if state.lead is not None:
        assert (
            v["lead"]["cards"] == as_shown(state.lead_cards)
            and v["lead"]["seat"] == state.lead_seat
        )
    assert v["seed"] == (state.seed if ended else None)
    assert v["result"] == (state.result.to_json() if ended else None)


def check_counting(state: State, viewer, v: dict) -> None:
    """What the view derives from the history: the cards the viewer has not seen are
    exactly those the other seats hold (with the bottom until it is taken), and each
    seat's bomb allowance is the rules' own."""
    if state.phase in ("new", "seating", "dealing"):
        return
    hidden = Counter(
        card.rank_char for seat in range(4) if seat != viewer for card in state.hands[seat]
    )
    if state.landlord is None:
        hidden += Counter(card.rank_char for card in state.bottom)
    assert {rank: n for rank, n in v["unseen"].items() if n} == dict(hidden)
    assert [s["bombs_left"] for s in v["seats"]] == [
        state.bombs_left(seat) if state.landlord is not None else None for seat in range(4)
    ]


def check_operator(state: State, event: Event) -> None:
    assert visible(event, OPERATOR) == event.to_json()
    o = view(state, OPERATOR)
    if state.phase in ("new", "seating", "dealing"):
        return
    assert o["hands"] == [as_shown(h) for h in state.hands]
    assert o["seed"] == state.seed
    if state.landlord is not None:
        assert o["bottom"] == as_shown(state.bottom)
        assert o["landlord_hand"] == as_shown(state.hands[state.landlord])


@pytest.mark.slow
@pytest.mark.parametrize("ruleset", RULESETS)
def test_a_seat_sees_only_what_it_may_know_in_dealt_hands(ruleset):
    seen = Counter()
    for log in dealt_hands(ruleset, 30):
        seen += check_hand(log)
    # the hands went through what matters here
    assert (
        seen["play"] > 500
        and seen["pass"] > 100
        and seen["disconnect"] > 0
        and seen["hand_ended"] == 30
    )


@pytest.mark.slow
@pytest.mark.parametrize("ruleset", RULESETS)
def test_a_seat_sees_only_what_it_may_know_after_show_hand_and_report(ruleset):
    seen = Counter()
    for log in report_hands(ruleset, 16):
        seen += check_hand(log)
    assert seen["show_hand=true"] > 0 and seen["show_hand"] == 16
    assert seen["report=play"] > 0 and seen["report=no_play"] > 0 and seen["report=decline"] > 0


@pytest.mark.slow
def test_a_view_is_the_same_whatever_the_hidden_cards():
    """Deal the cards a seat cannot see differently among the other seats (same counts) at
    every turn: its whole view, the history and the counts derived from it included, does
    not change."""
    rng = random.Random(5)
    checked = 0
    for log in dealt_hands("shanghai-platform", 4):
        state = initial_state
        for event in log:
            state = evolve(state, event)
            if state.phase not in ("playing", "report", "show_hand"):
                continue
            for viewer in range(4):
                assert view(reshuffled(state, viewer, rng), viewer) == view(state, viewer)
                checked += 1
    assert checked > 400


# --------------------------------------------------------------------------
# Each rule of §6, on its own
# --------------------------------------------------------------------------


def dealt(deal: HandDealt = REPORT_DEAL, ruleset=None) -> tuple[list[Event], State]:
    events = [*seated(ruleset), deal]
    return events, replay(events)


def test_the_deal_shows_a_seat_its_own_hand_and_every_card_count():
    state = replay(seated())
    [event] = decide(state, DealHand(SEED))
    state = evolve(state, event)
    for seat in range(4):
        e = visible(event, seat)
        assert e["hand"] == codes(event.hands[seat])
        assert e["cards"] == [25, 25, 25, 25]
        assert "hands" not in e and "bottom" not in e and "seed" not in e
        assert e["commitment"] == hashlib.sha256(SEED).hexdigest()
        assert (e["marked_card"], e["marked_seat"]) == (event.marked_card.code, event.marked_seat)
        v = view(state, seat)
        assert v["hand"] == as_shown(event.hands[seat])
        assert [s["cards"] for s in v["seats"]] == [25, 25, 25, 25]
        assert (v["marked_card"], v["marked_seat"]) == (event.marked_card.code, event.marked_seat)
        assert v["commitment"] == event.commitment and v["seed"] is None
    onlooker = visible(event, None)
    assert onlooker["hand"] is None and "hands" not in onlooker
    assert view(state, None)["hand"] == []


def test_bids_passes_plays_disconnects_are_seen_whole_by_every_seat():
    for event in (
        BidMade(0, 1),
        BidMade(1, 0, BOT),
        Passed(2),
        Disconnected(3, "left"),
        Resumed(3),
        Played(1, tuple(REPORT_DEAL.hands[1][:1]), "single", REPORT_DEAL.hands[1][0].rank_char),
    ):
        for viewer in VIEWERS:
            assert visible(event, viewer) == event.to_json()


def test_the_bottom_only_to_the_landlord():
    events, state = dealt(craft({}, marked_seat=2))
    state = after(state, Bid(2, 0), Bid(3, 2), Bid(0, 0))
    [bid, chosen] = decide(state, Bid(1, 0))
    state = replay([bid, chosen], state)
    assert chosen.seat == 3
    bottom = codes(state.bottom)
    assert visible(chosen, 3)["bottom"] == bottom
    assert view(state, 3)["bottom"] == as_shown(state.bottom)
    for viewer in (0, 1, 2, None):
        assert visible(chosen, viewer)["bottom"] is None
        assert view(state, viewer)["bottom"] is None
        assert view(state, viewer)["landlord_hand"] is None
    assert [s["cards"] for s in view(state, 0)["seats"]] == [25, 25, 25, 33]


@pytest.mark.parametrize("value", [True, False])
def test_the_landlords_hand_after_show_hand(value):
    events, state = dealt()
    state = after(state, Bid(0, 3))
    [shown] = decide(state, ShowHand(0, value))
    hand, sorted_hand = codes(state.hands[0]), as_shown(state.hands[0])
    state = evolve(state, shown)
    for viewer in VIEWERS:
        assert visible(shown, viewer)["cards"] == (hand if value else [])
        assert view(state, viewer)["landlord_hand"] == (sorted_hand if value else None)
    # and it stays shown as the landlord plays
    state = after(state, Report(0, "decline"))
    state = after(state, Play(0, (min(state.hands[0]),)))
    for viewer in VIEWERS:
        assert view(state, viewer)["landlord_hand"] == (as_shown(state.hands[0]) if value else None)


def test_a_view_shows_each_set_of_cards_sorted_by_rank_then_suit():
    events, state = dealt()
    state = after(state, Bid(0, 3), ShowHand(0, True))
    order = [suit + rank for rank in "3456789TJQKA2" for suit in "SHCD"] + ["BJ", "RJ"]
    for viewer in (0, 1, OPERATOR):
        v = view(state, viewer)
        shown = (
            [v["landlord_hand"]]
            + ([v["hand"]] if viewer != OPERATOR else [])
            + ([v["bottom"]] if viewer != 1 else [])
        )
        shown += v.get("hands", [])
        for cards in shown:
            assert cards and cards == sorted(cards, key=order.index)
    assert view(state, 0)["hand"] != codes(state.hands[0]), "the deal's own order is not sorted"


def test_a_view_names_the_table_as_ruleset_and_options_like_the_match_list():
    events, state = dealt(ruleset="shanghai-local")
    v = view(state, 0)
    assert "table" not in v
    assert v["ruleset"] == "shanghai-local"
    assert v["options"] == {
        "unit": "1.00",
        "cap": None,
        "rake": "0.00",
        "bombs_double": True,
        "turn_seconds": 30,
        "bot_level": "normal",
    }


def test_the_reported_cards_after_report_play():
    events, state = dealt()
    state = after(state, Bid(0, 1), Bid(1, 0), Bid(2, 0), Bid(3, 0))
    assert state.phase == "report"
    [reported] = decide(state, Report(0, "play"))
    state = evolve(state, reported)
    expected = Counter(codes(c for c in state.hands[0] if c.rank_char in "3BR"))
    assert sum(expected.values()) == 11
    for viewer in VIEWERS:
        assert Counter(visible(reported, viewer)["cards"]) == expected
        assert Counter(view(state, viewer)["reported_cards"]) == expected
        assert view(state, viewer)["landlord_hand"] is None


def test_the_reported_cards_after_report_no_play():
    events, state = dealt()
    state = after(state, Bid(0, 1), Bid(1, 0), Bid(2, 0), Bid(3, 0))
    reported, ended = decide(state, Report(0, "no_play"))
    expected = Counter(codes(c for c in state.hands[0] if c.rank_char in "3BR"))
    for viewer in VIEWERS:
        assert Counter(visible(reported, viewer)["cards"]) == expected


def test_declining_report_shows_nothing():
    events, state = dealt()
    state = after(state, Bid(0, 1), Bid(1, 0), Bid(2, 0), Bid(3, 0))
    [declined] = decide(state, Report(0, "decline"))
    state = evolve(state, declined)
    for viewer in (1, 2, 3, None):
        assert visible(declined, viewer)["cards"] == []
        assert view(state, viewer)["reported_cards"] == []


def test_the_seed_only_after_the_end():
    log = next(dealt_hands("shanghai-platform", 1))
    seed = log[-1].seed
    state = initial_state
    for event in log[:-1]:
        state = evolve(state, event)
        for viewer in VIEWERS:
            assert seed not in json.dumps(view(state, viewer))
            assert seed not in json.dumps(visible(event, viewer))
    ended = log[-1]
    state = evolve(state, ended)
    for viewer in VIEWERS:
        assert visible(ended, viewer)["seed"] == seed
        assert view(state, viewer)["seed"] == seed
        assert view(state, viewer)["result"] == ended.result.to_json()
    assert hashlib.sha256(bytes.fromhex(seed)).hexdigest() == view(state, 0)["commitment"]


def test_the_operator_sees_everything_from_the_deal_on():
    events, state = dealt()
    o = view(state, OPERATOR)
    assert o["hands"] == [as_shown(h) for h in REPORT_DEAL.hands]
    assert o["seed"] == REPORT_DEAL.seed
    assert o["bottom"] == as_shown(REPORT_DEAL.bottom)
    for event in events:
        assert visible(event, OPERATOR) == event.to_json()


def test_error_messages_show_no_hidden_card():
    """A refused command's message names no card the commanding seat may not see."""
    from service.game import GameError

    events, state = dealt()
    state = after(state, Bid(0, 1), Bid(1, 0), Bid(2, 0), Bid(3, 0), Report(0, "decline"))
    state = after(state, play(state, "33"))
    for command in (
        Play(2, state.hands[2][:1]),  # not its turn
        Play(1, state.hands[1][:1]),  # a single does not beat a pair
        Play(1, state.hands[1][:3]),  # no combination, or does not beat a pair
        Pass(0),
        Bid(1, 1),
        Report(1, "play"),
        Resume(1),
    ):
        with pytest.raises(GameError) as info:
            decide(state, command)
        message = str(info.value)
        hidden = set(codes(state.hands[0]) + codes(state.hands[2]) + codes(state.hands[3])) - set(
            codes(state.hands[1])
        )
        assert not any(re.search(rf"\b{code}\b", message) for code in hidden), message


# --------------------------------------------------------------------------
# actions(): what the seat may do now
# --------------------------------------------------------------------------


def check_actions(state: State) -> None:
    for seat in range(4):
        actions = offered(state, seat)
        assert view(state, seat)["actions"] == actions
        if state.phase == "ended" or state.seats[seat] is None:
            assert actions == []
            continue
        if state.disconnected[seat]:
            assert actions == [{"action": "resume"}]
            assert can(state, Resume(seat))
            continue
        if state.turn != seat or state.seats[seat].bot:
            assert actions == []
            assert not any(can(state, Bid(seat, v)) for v in range(4))
            assert not can(state, Pass(seat)) and not can(state, ShowHand(seat, False))
            assert not can(state, Report(seat, "decline"))
            continue
        if state.phase == "bidding":
            assert actions == [
                {"action": "bid", "choices": [v for v in range(4) if can(state, Bid(seat, v))]}
            ]
        elif state.phase == "show_hand":
            assert actions == [{"action": "show_hand", "choices": [True, False]}]
            assert can(state, ShowHand(seat, True)) and can(state, ShowHand(seat, False))
        elif state.phase == "report":
            assert actions == [{"action": "report", "choices": ["play", "no_play", "decline"]}]
            assert all(can(state, Report(seat, value)) for value in ("play", "no_play", "decline"))
        else:
            assert state.phase == "playing"
            names = [a["action"] for a in actions]
            moves = legal(state, seat)
            # play is offered exactly when the seat has a legal play; pass when it follows.
            assert names == (["play"] if moves else []) + (
                ["pass"] if can(state, Pass(seat)) else []
            )
            assert moves or state.lead is not None  # a leader always has a play
            for move in moves[:3]:
                assert can(state, Play(seat, pick_cards(state.hands[seat], move.counts)))


@pytest.mark.parametrize("ruleset", RULESETS)
def test_actions_list_what_the_seat_may_do(ruleset):
    logs = list(dealt_hands(ruleset, 6)) + list(report_hands(ruleset, 4))
    for log in logs:
        state = initial_state
        for event in log:
            state = evolve(state, event)
            check_actions(state)


def test_actions_in_bidding():
    events, state = dealt(craft({}))
    state = after(state, Bid(0, 2))
    assert offered(state, 1) == [{"action": "bid", "choices": [0, 3]}]
    assert offered(state, 0) == []
    state = after(state, Disconnect(1))
    assert offered(state, 1) == [{"action": "resume"}]


def test_actions_of_the_leader_and_of_a_follower():
    events, state = dealt(craft({}))
    state = after(state, Bid(0, 1), Bid(1, 0), Bid(2, 0), Bid(3, 0))
    assert state.phase == "playing"
    assert offered(state, 0) == [{"action": "play"}]
    state = after(state, Play(0, (min(state.hands[0]),)))
    assert offered(state, 1) == [{"action": "play"}, {"action": "pass"}]
    assert [offered(state, s) for s in (0, 2, 3)] == [[], [], []]


# --------------------------------------------------------------------------
# The check itself catches leaks
# --------------------------------------------------------------------------


def _leaky_views():
    """``view`` / ``visible`` replacements that each leak one thing a seat may not see."""
    real_view, real_visible = view, visible

    def next_seats_hand(state, seat):
        document = real_view(state, seat)
        if isinstance(seat, int):
            document["peek"] = codes(state.hands[(seat + 1) % 4])
        return document

    def bottom_to_all(event, seat):
        document = real_visible(event, seat)
        if isinstance(event, LandlordChosen):
            document["bottom"] = codes(event.bottom)
        return document

    def one_card_of_the_bottom(state, seat):
        document = real_view(state, seat)
        if state.landlord is not None and seat != state.landlord:
            document["hint"] = state.bottom[0].code
        return document

    def whole_deal(event, seat):
        return event.to_json() if isinstance(event, HandDealt) else real_visible(event, seat)

    return [
        ("view", next_seats_hand),
        ("visible", bottom_to_all),
        ("view", one_card_of_the_bottom),
        ("visible", whole_deal),
    ]


@pytest.mark.slow  # checks hands whole, once per leak
@pytest.mark.parametrize(
    "name, leaky", _leaky_views(), ids=["hand", "bottom", "bottom-card", "deal"]
)
def test_the_visibility_check_catches_a_leak(monkeypatch, name, leaky):
    logs = list(dealt_hands("shanghai-platform", 3))
    check_hand(logs[0])  # sound as it is
    monkeypatch.setattr(f"{__name__}.{name}", leaky)
    with pytest.raises(AssertionError):
        for log in logs:
            check_hand(log)


def test_a_follower_that_beats_nothing_is_offered_only_pass():
    events, state = dealt(craft({0: "BBRR"}), ruleset="shanghai-platform")
    state = after(state, Bid(0, 1), Bid(1, 0), Bid(2, 0), Bid(3, 0), Report(0, "decline"))
    state = after(state, play(state, "BBRR"))
    assert state.turn == 1 and legal(state, 1) == []
    assert offered(state, 1) == [{"action": "pass"}]


def test_a_history_is_shown_the_same_from_a_replayed_state_and_one_view_changes_no_other():
    """Views remember the histories they showed: a state replayed from the events (new
    turn objects), or a view's history list changed by its reader, shows the same history."""
    log = next(iter(dealt_hands("shanghai-platform", 1)))
    count, state = 0, initial_state
    while len(state.history) < 6:
        state = evolve(state, log[count])
        count += 1
    shown = view(state, 0)["history"]
    assert len(shown) == len(state.history) >= 6
    shown.append({"seat": 0, "action": "play", "cards": ["S3"]})
    shown[0] = None
    replayed = replay(log[:count])
    assert replayed.history == state.history and replayed.history[-1] is not state.history[-1]
    for again in (view(state, 0)["history"], view(replayed, 0)["history"]):
        assert again == view(replayed, 2)["history"]
        assert len(again) == len(state.history) and again[0] is not None


def test_a_seat_view_has_every_field_as_its_constructor_would_set_it():
    """seat_view hands a view its dictionary whole, bypassing ``__init__``: it must hold
    exactly the dataclass's fields, for every seat and the operator, in every phase."""
    names = [f.name for f in dataclasses.fields(SeatView)]
    state = initial_state
    for event in next(iter(dealt_hands("shanghai-platform", 1))):
        state = evolve(state, event)
        if state.match_id is None:
            continue
        for seat in (0, 1, 2, 3, None, OPERATOR):
            seen = seat_view(state, seat)
            assert sorted(vars(seen)) == sorted(names)
            assert SeatView(**{name: getattr(seen, name) for name in names}) == seen
