"""``ddz arena``: an engine against the house bot or another engine, on the pure engine (no
server), in duplicate format (:func:`~service.game.simulate.duplicate`: every deal played
twice with the seats swapped, so that the luck of the cards cancels out).

Each seat an engine plays is its own process: a seat sees only its own view
(docs/bot-protocol.md), and two seats of one engine are two players who share nothing.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..game import Event, State, Table
from ..game.bot.levels import policy
from ..game.record import export
from ..game.settlement import LANDLORD
from ..game.simulate import DUPLICATE_SEATS, Duplicate, Player, Refused, duplicate
from .engine import Engine, decide_message, hand_over_message, new_hand_message

#: How long an engine may think per decision in the arena, unless told otherwise.
DEFAULT_MOVE_MS = 2000


class EnginePlayer:
    """An engine at the seats it plays in a simulated hand (a
    :class:`~service.game.simulate.Speaker`): one engine process per seat, started at its
    first decision and told of each hand it plays (``new_hand``, ``hand_over``)."""

    def __init__(
        self, command: str, *, move_ms: int = DEFAULT_MOVE_MS, options: dict[str, Any] | None = None
    ) -> None:
        self.command = command
        self.move_ms = move_ms
        self.options = options or {}
        self.engines: dict[int, Engine] = {}
        self.playing: set[int] = set()  # the seats in a hand (told new_hand, not hand_over)
        self.name = command

    def engine(self, seat: int) -> Engine:
        engine = self.engines.get(seat)
        if engine is None:
            engine = self.engines[seat] = Engine(
                self.command, host="ddz arena", options=self.options
            )
        if not engine.running:
            engine.start()
            self.name = engine.name
        return engine

    def answer(self, document: dict[str, Any]) -> dict[str, Any]:
        document = as_the_api_shows(document)
        seat = document["seat"]
        engine = self.engine(seat)
        if seat not in self.playing:
            engine.tell(new_hand_message(document))
            self.playing.add(seat)
        return engine.decide(decide_message(document, self.move_ms), self.move_ms / 1000)

    def hand_over(self, document: dict[str, Any]) -> None:
        seat = document["seat"]
        if seat in self.playing:
            self.playing.discard(seat)
            self.engines[seat].tell(hand_over_message(as_the_api_shows(document)))

    def close(self) -> None:
        for engine in self.engines.values():
            engine.close()


def as_the_api_shows(document: dict[str, Any]) -> dict[str, Any]:
    """A seat's view as ``GET /v1/matches/{id}`` has it: the turn's ``deadline`` (here
    none: no clock but the engine's) and each seat's ``bot_account`` (an engine's seat is
    a program's, as a bot account's is on the service; the house bot's is the system's)."""
    seats = [{**seat, "bot_account": seat["player"] is not None} for seat in document["seats"]]
    return {**document, "deadline": None, "seats": seats}


@dataclass
class Side:
    """One player's figures over the hands of an arena run."""

    name: str
    landlord_hands: int = 0
    landlord_wins: int = 0
    farmer_seats: int = 0  # seat-hands played as a farmer
    farmer_wins: int = 0

    def add(self, seats: Sequence[int], state: State) -> None:
        assert state.result is not None and state.landlord is not None
        landlord_won = state.result.outcome.winner == LANDLORD
        for seat in seats:
            if seat == state.landlord:
                self.landlord_hands += 1
                self.landlord_wins += landlord_won
            else:
                self.farmer_seats += 1
                self.farmer_wins += not landlord_won


@dataclass
class Arena:
    """What an arena run found: the first player's points per hand against the second
    (:class:`~service.game.simulate.Duplicate`) and each side's win rates."""

    table: Table
    seed: str
    result: Duplicate
    sides: tuple[Side, Side]

    def lines(self) -> list[str]:
        first, second = self.sides
        r = self.result
        lines = [
            f"{first.name} against {second.name}: {self.table.ruleset.name}, seed {self.seed}",
            f"{r.deals} deal{'s' * (r.deals != 1)}, each played twice with the seats swapped"
            f" ({r.hands} hands)",
            f"points per hand of {first.name} (all its seats, in stakes): {r.mean:+.2f}"
            # One deal has no spread to measure: its interval would read as a certainty.
            + (
                f"  95% CI [{r.low:+.2f}, {r.high:+.2f}]"
                if r.deals > 1
                else "  95% CI n/a (1 deal)"
            ),
        ]
        for side in self.sides:
            lines.append(
                f"  {side.name}: as landlord won {_rate(side.landlord_wins, side.landlord_hands)},"
                f" as farmer won {_rate(side.farmer_wins, side.farmer_seats)}"
            )
        return lines


def _rate(wins: int, out_of: int) -> str:
    return f"{wins / out_of:.1%} ({wins} of {out_of})" if out_of else "n/a (0 of 0)"


def run(
    engines: Sequence[str],
    deals: int,
    seed: str,
    table: Table,
    *,
    level: str = "normal",
    move_ms: int = DEFAULT_MOVE_MS,
    options: dict[str, Any] | None = None,
    records: Path | None = None,
) -> Arena:
    """Plays the first engine against the second, or against the house bot at ``level``;
    writes each hand's record into ``records`` (a directory that exists). An engine's
    failure is raised as its :class:`~service.app.engine.EngineError` (an answer the rules
    refuse as :class:`~service.app.engine.EngineIllegal`)."""
    first = EnginePlayer(engines[0], move_ms=move_ms, options=options)
    second: Player = (
        EnginePlayer(engines[1], move_ms=move_ms, options=options)
        if len(engines) > 1
        else policy(level, seed=f"{seed}:house")
    )
    # Started before the hands, so that the records name each engine by its hello.
    first.engine(0)
    if isinstance(second, EnginePlayer):
        second.engine(0)
    sides = (Side(first.name), Side(""))

    def on_hand(deal: int, seats: tuple[int, ...], events: list[Event], state: State) -> None:
        sides[0].add(seats, state)
        sides[1].add([s for s in range(len(state.seats)) if s not in seats], state)
        if records is not None:
            hand = DUPLICATE_SEATS.index(seats)
            with open(records / f"deal-{deal:05d}-{hand}.json", "w", encoding="utf-8") as f:
                json.dump(export(events), f, ensure_ascii=False, indent=1)

    try:
        result = duplicate(deals, seed, table, first, second, on_hand=on_hand)
    except Refused as exc:
        assert isinstance(exc.speaker, EnginePlayer)
        raise exc.speaker.engines[exc.seat].illegal(exc.action, str(exc.error)) from None
    finally:
        first.close()
        if isinstance(second, EnginePlayer):
            second.close()
    sides[0].name = first.name
    sides[1].name = second.name if isinstance(second, EnginePlayer) else f"house bot ({level})"
    if sides[0].name == sides[1].name:
        sides[0].name, sides[1].name = f"{sides[0].name} (1)", f"{sides[1].name} (2)"
    return Arena(table, seed, result, sides)
