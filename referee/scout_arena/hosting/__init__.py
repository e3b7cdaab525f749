"""Hosted bots: bots the platform runs itself, each in the sandbox (`scout_arena.sandbox`),
reaching its match's referee only through a Unix socket of its own (`socket`).

`host.Host` starts and supervises the hosted seats of one referee's matches; `node` is the
glue of a referee node that fetches their files from its ladder and reports their runs back.
"""

from .files import CodeCache, DataFolderError, pack_data, sha256_hex, unpack_data
from .host import Host, HostedBot, Launcher, Process, RunReport
from .socket import BotSocket

__all__ = [
    "BotSocket",
    "CodeCache",
    "DataFolderError",
    "Host",
    "HostedBot",
    "Launcher",
    "Process",
    "RunReport",
    "pack_data",
    "sha256_hex",
    "unpack_data",
]
