"""How a ladder is run: its addresses, tokens, matchmaking, time control and timings."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from scout_arena.server import TlsConfig
from scout_rules.protocol import TimeControl

from .matchmaker import MatchmakerConfig
from .owners_service import Registration
from .submissions import VersionValidator


@dataclass(frozen=True)
class ProbationPolicy:
    """A bot whose recent matches are mostly forfeits or timeouts stops being scheduled until
    it reconnects (a fresh process is presumed fixed) or an owner lifts it."""

    window: int = 6
    min_matches: int = 3
    max_bad_share: float = 0.5


@dataclass
class LadderConfig:
    host: str = "127.0.0.1"
    port: int = 50061
    admin_token: str | None = None
    matchmaker: MatchmakerConfig = field(default_factory=MatchmakerConfig)
    time_control: TimeControl = field(default_factory=TimeControl)
    probation: ProbationPolicy = field(default_factory=ProbationPolicy)
    schedule_interval_s: float = 0.2
    reconnect_grace_s: float = 10.0
    rng_seed: int | None = None
    web_host: str = "127.0.0.1"
    web_port: int | None = None
    """Serve the web pages (scout_ladder.web) on this port too; None: no web server."""
    table_warning_after_s: float = 5.0
    """Warn that the connected bots cannot fill any allowed table once that has lasted this
    long (bots connecting one by one after a restart are not worth a warning)."""
    lease_check_s: float = 5.0
    """How often the lease's connection is checked (PostgreSQL); a lost lease stops the
    ladder."""
    tls: TlsConfig | None = None
    """Serve bots, nodes and clients over TLS (the referee's flags: --tls-cert, --tls-key,
    --tls-client-ca)."""
    node_token: str | None = None
    """Serve `Nodes` with this token and play every match on referee nodes (nodes.proto);
    None: the ladder's own referee plays them."""
    node_heartbeat_s: float = 1.0
    node_heartbeat_timeout_s: float = 5.0
    """A node silent this long is lost: its matches are voided, its bots seated elsewhere."""
    join_timeout_s: float = 10.0
    """How long a node waits for an assigned match's bots; a bot not there by then forfeits."""
    node_rejoin_s: float = 20.0
    """After a restart, how long the nodes have to claim the matches left in flight."""
    registration: Registration = Registration.CLOSED
    """Who may sign up for an owner account (`scout.v1.Owners`, owners_service)."""
    version_validator: VersionValidator | None = None
    """Runs uploaded versions (the hosting code); None: the ladder hosts no bots."""
    hosting: bool = False
    """Host uploaded bots (where the sandbox runs: the ladder's own referee, or nodes that
    can); False: hosted bots are not scheduled and uploads are refused unless
    ``version_validator`` is given. `ladder serve` hosts unless --no-hosting."""
    hosting_dir: Path | None = None
    """Hosting's working folder (code cache, runs, checks); None: a new temporary one."""
    hosted_data_mb: int = 16
    """The largest data folder a hosted bot keeps between matches."""

