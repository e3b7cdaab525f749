"""A hosted bot that plays its validation (matches named check-...) and then crashes at the
start of every ladder match: it passes its check, then keeps failing."""
import os
import sys

from scout_client.cli import main

if not os.environ.get("SCOUT_MATCH_ID", "").startswith("check-"):
    print("crashing in a ladder match on purpose", file=sys.stderr, flush=True)
    sys.exit(5)
sys.exit(main(["run", "greedy"]))
