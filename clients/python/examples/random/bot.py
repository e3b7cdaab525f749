"""The SDK's bundled `random` bot as a program of its own, ready to submit to a ladder as it is.

`run` with no address or token follows the launch convention (PROTOCOL.md §11.4): a ladder's
sandbox sets SCOUT_ADDRESS (a `unix:` socket there) and SCOUT_TOKEN, as does a tournament.
"""

import logging

from scout_client import RandomBot, run

if __name__ == "__main__":
    # The owner reads a hosted bot's output (`scout-arena ladder logs BOT`): say what happens.
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    run(RandomBot())
