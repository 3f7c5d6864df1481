"""How fast a rating settles (docs/ratings.md): the house bot's levels play each other on
the pure engine, each hand at a seating drawn at random, rated after each hand by the
rating code of the service (``service/game/ratings.py``); prints after how many hands
``hard`` ranks above ``normal`` and ``normal`` above ``easy`` by conservative rating, and
stays so to the end of the run.

    python benchmarks/ratings_bench.py [--hands N] [--seed S] [--budget-ms MS] [--hard NAME]
        [--smoke]

The four seats: ``easy``, ``normal``, ``hard`` and a second ``normal`` (the hands need
four players). ``hard`` searches ``--budget-ms`` of CPU time per decision; ``--hard``
seats a variant of it there instead (``ddz simulate --pit``'s names, docs/bot.md). It
prints, too, how often each won as landlord and as a farmer: a rating counts wins.
"""

from __future__ import annotations

import random
import time

from common import command_line, parse

from service.game import MatchSettings
from service.game.bot.levels import contestant
from service.game.ratings import RatedHand, Rating, rate
from service.game.settlement import LANDLORD
from service.game.simulate import hand_seed, play_hand, won_share
from service.game.state import State

PLAYERS = ("easy", "normal", "hard", "normal-2")
#: The orders measured: each (higher, lower).
PAIRS = (("normal", "easy"), ("hard", "normal"))


def rated(state: State, seated: list[str]) -> RatedHand:
    result = state.result
    assert result is not None and state.table is not None
    return RatedHand(
        state.table.ruleset.name,
        tuple(seated),
        result.outcome.landlord,
        result.outcome.winner == "landlord",
        frozenset(),
    )


def main() -> None:
    parser = command_line(__doc__)
    parser.add_argument("--hands", type=int, default=1500)
    parser.add_argument("--seed", default="ratings")
    parser.add_argument("--budget-ms", type=float, default=10.0)
    parser.add_argument("--hard", default="hard", help="the player at the hard seat")
    args = parse(parser, hands=4, budget_ms=1.0)
    table = MatchSettings.build()
    players = {
        name: contestant(
            args.hard if name == "hard" else name.removesuffix("-2"),
            seed=f"{args.seed}:{name}",
            budget=args.budget_ms / 1000,
            clock=time.process_time,
        )
        for name in PLAYERS
    }
    # Each player's hands won and played, as landlord and as a farmer.
    record = {name: [0, 0, 0, 0] for name in PLAYERS}
    ratings: dict[str, Rating] = {}
    draw = random.Random(args.seed)
    # Since when each pair has been in order (None: not now), and in how many hands.
    since: dict[tuple[str, str], int | None] = {pair: None for pair in PAIRS}
    above: dict[tuple[str, str], int] = dict.fromkeys(PAIRS, 0)
    started = time.perf_counter()
    for hand in range(1, args.hands + 1):
        seated = list(PLAYERS)
        draw.shuffle(seated)
        _, state = play_hand(table, hand_seed(args.seed, hand), [players[p] for p in seated])
        assert state.result is not None
        landlord_won = state.result.outcome.winner == LANDLORD
        for seat, name in enumerate(seated):
            landlord = seat == state.landlord
            at = 0 if landlord else 2
            record[name][at] += landlord_won == landlord
            record[name][at + 1] += 1
        for change in rate(rated(state, seated), ratings):
            ratings[change.player] = change.after
        c = {p: ratings[p].conservative for p in PLAYERS}
        for higher, lower in PAIRS:
            if c[higher] > c[lower]:
                above[higher, lower] += 1
                since[higher, lower] = since[higher, lower] or hand
            else:
                since[higher, lower] = None
        if hand % 100 == 0 or hand == args.hands:
            print(
                f"after {hand:5d} hands: "
                + "  ".join(
                    f"{p} {ratings[p].conservative:6.2f} (mu {ratings[p].mu:5.2f},"
                    f" sigma {ratings[p].sigma:4.2f})"
                    for p in sorted(PLAYERS, key=lambda p: -c[p])
                ),
                flush=True,
            )
    seconds = time.perf_counter() - started
    print(
        f"{args.hands} hands in {seconds:.0f} s, {args.hard} searching {args.budget_ms:g} ms"
        " a decision"
    )
    for name in PLAYERS:
        won, led, farmed, farmer = record[name]
        print(
            f"{name} won {won_share(won, led)} as landlord, {won_share(farmed, farmer)} as a farmer"
        )
    for higher, lower in PAIRS:
        share = above[higher, lower] / args.hands
        settled = since[higher, lower]
        print(
            f"{higher} above {lower} by conservative rating: "
            + (
                f"from hand {settled} to the end of the run"
                if settled is not None
                else "not at the end of the run"
            )
            + f"; after {share:.0%} of the hands"
        )


if __name__ == "__main__":
    main()
