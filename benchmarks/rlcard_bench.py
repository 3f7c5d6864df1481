"""The peer engine: random-legal turns per second on noword/rlcard's Shanghai Dou Dizhu
(4 players, 2 decks, simpler rules than ours), to set beside benchmarks/game_bench.py.

    python3 benchmarks/rlcard_bench.py PATH [--hands N] [--smoke]

PATH is a checkout of github.com/noword/rlcard; it needs numpy, which this project does
not, so run it with an interpreter that has it. Only the game package is imported (the
package's ``__init__`` pulls in the RL environments and their dependencies).
"""

from __future__ import annotations

import random
import sys
import time
import types

from common import command_line, parse


def main() -> None:
    parser = command_line(__doc__)
    parser.add_argument("path", help="a checkout of noword/rlcard")
    parser.add_argument("--hands", type=int, default=300)
    parser.add_argument("--seed", type=int, default=7)
    args = parse(parser, hands=3)
    package = types.ModuleType("rlcard")
    package.__path__ = [f"{args.path}/rlcard"]
    sys.modules["rlcard"] = package
    from rlcard.games.shanghaidoudizhu.game import ShanghaiDoudizhuGame

    game = ShanghaiDoudizhuGame()
    game.np_random.seed(args.seed)
    rng = random.Random(args.seed)
    turns = plays = 0
    play_wall = play_cpu = 0.0
    started, cpu = time.perf_counter(), time.process_time()
    for _ in range(args.hands):
        state, _ = game.init_game()
        while not game.is_over():
            bidding = game.need_bid
            if not bidding:  # the play turns alone, beside game_bench's play-outs
                wall_at, cpu_at = time.perf_counter(), time.process_time()
            state, _ = game.step(rng.choice(state["actions"]))
            turns += 1
            if not bidding:
                play_wall += time.perf_counter() - wall_at
                play_cpu += time.process_time() - cpu_at
                plays += 1
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    print(
        f"{'rlcard random-legal turns per second':<40} {turns / wall:12,.0f}"
        f"   per CPU-second {turns / cpu:10,.0f}   ({turns:,} turns, {args.hands} hands)"
    )
    print(
        f"{'rlcard random-legal play turns/s':<40} {plays / play_wall:12,.0f}"
        f"   per CPU-second {plays / play_cpu:10,.0f}   ({plays:,} play turns)"
    )


if __name__ == "__main__":
    main()
