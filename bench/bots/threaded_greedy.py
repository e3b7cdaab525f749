"""The bundled greedy bot asked the way a plain bot is: in a worker thread (``quick`` off).

`bench/tournament.py` plays it beside the bundled (quick) greedy bot, so the cost of the SDK's
thread hop per decision is measured side by side in one run.
"""

from scout_client.bots import GreedyBot


class ThreadedGreedy(GreedyBot):
    quick = False
