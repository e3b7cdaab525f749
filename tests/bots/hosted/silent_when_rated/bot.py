"""A hosted bot that plays its validation (matches named check-...) and then never connects
in a ladder match: it sleeps until it is stopped."""
import os
import sys
import time

from scout_client.cli import main

if not os.environ.get("SCOUT_MATCH_ID", "").startswith("check-"):
    print("not connecting to this ladder match", file=sys.stderr, flush=True)
    while True:
        time.sleep(60)
sys.exit(main(["run", "greedy"]))
