"""The command-line flags every server command shares (the referee, its nodes, the ladder,
tournaments and SPRT runs): a time control and the TLS of a listening port, spelled and read
back in one place so that the commands cannot drift apart."""

from __future__ import annotations

import argparse
import os
import ssl
from pathlib import Path
from typing import TYPE_CHECKING

from scout_rules.protocol import DEFAULT_DECISION_MS, DEFAULT_TIME_BANK_MS, TimeControl

from scout_arena.clierrors import nonnegative_int, positive_int, positive_ms

if TYPE_CHECKING:  # the listener brings gRPC: imported when a TLS config is made
    from .listener import TlsConfig
    from .metrics_http import MetricsAccess


def add_time_control_flags(parser: argparse.ArgumentParser, *, defaults: bool = True) -> None:
    """``--decision-ms`` and ``--time-bank-ms``; without ``defaults`` they are None unless
    given (so that a config file's values stand)."""
    parser.add_argument("--decision-ms", type=positive_ms, metavar="MS",
                        default=DEFAULT_DECISION_MS if defaults else None)
    parser.add_argument("--time-bank-ms", type=nonnegative_int, metavar="MS",
                        default=DEFAULT_TIME_BANK_MS if defaults else None)


def time_control(args: argparse.Namespace) -> TimeControl:
    """The time control that `add_time_control_flags` (with defaults) read."""
    return TimeControl(args.decision_ms, args.time_bank_ms)


def add_tls_flags(parser: argparse.ArgumentParser) -> None:
    """``--tls-cert``, ``--tls-key`` and ``--tls-client-ca`` of a listening port."""
    parser.add_argument("--tls-cert", metavar="PEM", help="serve over TLS with this certificate")
    parser.add_argument("--tls-key", metavar="PEM", help="the certificate's private key")
    parser.add_argument("--tls-client-ca", metavar="PEM", help="require client certificates")


def tls_config(args: argparse.Namespace) -> TlsConfig | None:
    """The TLS that `add_tls_flags` read (None: plaintext); ValueError when only one of the
    certificate and its key is given."""
    if bool(args.tls_cert) != bool(args.tls_key):
        raise ValueError("--tls-cert and --tls-key go together")
    if not args.tls_cert:
        if args.tls_client_ca:
            raise ValueError("--tls-client-ca needs --tls-cert and --tls-key")
        return None
    from .listener import TlsConfig

    config = TlsConfig(Path(args.tls_cert), Path(args.tls_key),
                       Path(args.tls_client_ca) if args.tls_client_ca else None)
    check_pem(config.cert, config.key)
    if config.client_ca is not None:
        try:
            ssl.create_default_context(cafile=str(config.client_ca))
        except (OSError, ssl.SSLError) as exc:
            raise ValueError(f"--tls-client-ca {str(config.client_ca)[:100]!r}: not a PEM "
                             f"CA certificate ({_reason(exc)})") from None
    return config


def _reason(exc: Exception) -> str:
    return (exc.strerror if isinstance(exc, OSError) and exc.strerror else None) or \
        getattr(exc, "reason", None) or type(exc).__name__


def check_pem(cert: Path, key: Path) -> None:
    """ValueError unless ``cert`` and ``key`` are a readable PEM certificate and its key (grpc
    would only say "Failed to bind", hiding the cause)."""
    for flag, path in (("--tls-cert", cert), ("--tls-key", key)):
        if not path.is_file():
            raise ValueError(f"{flag}: no such file: {str(path)[:100]!r}")
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise ValueError(f"--tls-cert/--tls-key: not a PEM certificate and its private key "
                         f"({_reason(exc)})") from None


def add_metrics_access_flags(parser: argparse.ArgumentParser) -> None:
    """``--metrics-token``, ``--metrics-tls-cert`` and ``--metrics-tls-key``: who may read the
    metrics endpoint, and over TLS (the probes /livez and /readyz stay open)."""
    parser.add_argument("--metrics-token", metavar="TOKEN",
                        default=os.environ.get("SCOUT_METRICS_TOKEN"),
                        help="require 'Authorization: Bearer TOKEN' on /metrics (default: "
                             "$SCOUT_METRICS_TOKEN; none: open to whoever reaches the port)")
    parser.add_argument("--metrics-tls-cert", metavar="PEM",
                        help="serve metrics and probes over HTTPS with this certificate")
    parser.add_argument("--metrics-tls-key", metavar="PEM", help="its private key")


def metrics_access(args: argparse.Namespace) -> MetricsAccess:
    """What `add_metrics_access_flags` read; ValueError when it does not hold together."""
    from .metrics_http import MetricsAccess

    access = MetricsAccess(args.metrics_token,
                           Path(args.metrics_tls_cert) if args.metrics_tls_cert else None,
                           Path(args.metrics_tls_key) if args.metrics_tls_key else None)
    for flag, path in (("--metrics-tls-cert", access.cert), ("--metrics-tls-key", access.key)):
        if path is not None and not path.is_file():
            raise ValueError(f"{flag}: no such file: {str(path)[:200]!r}")
    return access


def add_hosting_flags(parser: argparse.ArgumentParser) -> None:
    """``--no-hosting``, ``--hosting-dir`` and ``--hosted-data-mb``: the same for a ladder and
    for a referee node, both of which may run uploaded bots in the sandbox."""
    hosting = parser.add_argument_group(
        "hosted bots", "run uploaded bots in the sandbox (docs/deploy.md#hosted-bots)")
    hosting.add_argument("--no-hosting", action="store_true",
                         help="host no uploaded bots, even where this machine can (a ladder "
                              "then refuses uploads)")
    hosting.add_argument("--hosting-dir", metavar="DIR",
                         help="hosting's working folder: cached code, runs' folders, "
                              "validation (default: a new temporary folder)")
    hosting.add_argument("--hosted-data-mb", type=positive_int, default=16, metavar="MB",
                         help="the largest data folder a hosted bot keeps between matches "
                              "(default 16)")
