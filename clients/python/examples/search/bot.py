"""The bundled `search` bot as a program of its own, ready to submit to a ladder as it is.

It lives in the referee's package (it needs the rules engine), which the ladder's hosted Python
runtime has installed beside the SDK. `run` with no address or token follows the launch
convention (PROTOCOL.md §11.4).
"""

import logging

from scout_arena.search import SearchBot
from scout_client import run

if __name__ == "__main__":
    # The owner reads a hosted bot's output (`scout-arena ladder logs BOT`): say what happens.
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    run(SearchBot())
