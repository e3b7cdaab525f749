"""A hosted bot that plays its validation (matches named check-...) and then, in every ladder
match, hogs what its mode.txt names: "processes" (a fork bomb) or "memory" (allocation without
end). The sandbox must contain it, and only its own seat may suffer."""
import os
import sys
import time
from pathlib import Path

from scout_client.cli import main

if not os.environ.get("SCOUT_MATCH_ID", "").startswith("check-"):
    mode = Path("mode.txt").read_text().strip()
    print(f"hogging {mode} on purpose", file=sys.stderr, flush=True)
    if mode == "processes":
        while True:
            try:
                if os.fork() == 0:
                    time.sleep(600)
                    os._exit(0)
            except OSError:
                time.sleep(0.01)
    hoard = []
    while True:
        hoard.append(bytearray(16 * 1024 * 1024))
sys.exit(main(["run", "greedy"]))
