"""Scout Arena: a referee, protocol, clients and ladder for the card game SCOUT.

Our processes start bot programs (tournaments, their worker nodes) while grpc's threads run.
With grpc's fork support on, its handlers restart grpc's threads in each forked child before
the child execs; those hit a closed epoll descriptor ("epoll_wait error: Bad file descriptor")
and abort the child, so a bot failed to start now and then. No child of ours uses grpc before
it execs, so fork support is off in every process that imports this package before grpc
starts (an explicit GRPC_ENABLE_FORK_SUPPORT in the environment still wins).
"""

import os

os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

__version__ = "0.1.0"
