"""An engine that plays as examples/engine.py for its first AFTER decisions, then misbehaves
as MODE: ``crash`` (exits), ``illegal`` (plays a card it does not hold), ``slow`` (answers
after 3 s), ``garbage`` (writes a line that is not JSON), ``twice`` (answers twice, in one
write), ``stall`` (creates the file named by STALL_FILE and never answers), ``long`` (writes a
log line of two million characters). ``spy`` never
misbehaves but appends every message it receives to the file named by SPY_FILE, as
``{"pid": its process id, "message": ...}``, and logs each decision (a ``log`` line).

    python tests/engines/misbehaving.py MODE [AFTER]
"""

import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
from engine import choose  # noqa: E402

mode = sys.argv[1]
after = int(sys.argv[2]) if len(sys.argv) > 2 else 0
decisions = 0
for line in sys.stdin:
    message = json.loads(line)
    if mode == "spy":
        with open(os.environ["SPY_FILE"], "a") as spied:
            spied.write(json.dumps({"pid": os.getpid(), "message": message}) + "\n")
    if message["type"] == "hello":
        print(json.dumps({"type": "hello", "protocol": 1, "name": mode}), flush=True)
    elif message["type"] == "quit":
        break
    elif message["type"] == "decide":
        decisions += 1
        action = choose(message["view"], message["actions"])
        if decisions > after and mode == "crash":
            sys.exit(3)
        if decisions > after and mode == "illegal":
            # No seat holds three of one card (two decks): never legal, in any phase.
            action = {"action": "play", "cards": ["S3", "S3", "S3"]}
        if decisions > after and mode == "slow":
            time.sleep(3)
        if decisions > after and mode == "stall":
            Path(os.environ["STALL_FILE"]).touch()
            time.sleep(3600)
        if decisions > after and mode == "twice":
            answer = json.dumps({"type": "action", "action": action})
            print(f"{answer}\n{answer}", flush=True)
            continue
        if decisions > after and mode == "long":
            print(json.dumps({"type": "log", "message": "x" * 2_000_000}), flush=True)
        if decisions > after and mode == "garbage":
            print("I think I will play a three", flush=True)
            continue
        if mode == "spy":
            print(json.dumps({"type": "log", "message": f"deciding in {message['view']['phase']}"}))
        print(json.dumps({"type": "action", "action": action}), flush=True)
