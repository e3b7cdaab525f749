"""Scout Arena: a referee, protocol, clients and ladder for the card game SCOUT."""

__version__ = "0.1.0"
