"""A hosted bot that connects, answers a first request, then its process dies."""
import os
import sys

from scout_client.bots import GreedyBot
from scout_client.runner import run


class Dying(GreedyBot):
    def act(self, observation):  # type: ignore[no-untyped-def]
        print("dying mid-match", file=sys.stderr, flush=True)
        os._exit(7)


run(Dying(), os.environ["SCOUT_ADDRESS"], os.environ["SCOUT_TOKEN"], max_concurrent_matches=1)
