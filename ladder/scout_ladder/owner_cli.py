"""`scout-arena ladder signup|invite|suspend|reinstate|register-bot|rotate-token|submit|versions|
logs|data` (and `retire --address`): an owner's commands, over the ladder's `scout.v1.Owners`
service.

They reach a running ladder (``--address``, TLS flags as the SDK's), never its database. The
owner token comes from ``--owner-token`` or ``SCOUT_OWNER_TOKEN``, the admin's from
``--admin-token`` or ``SCOUT_LADDER_ADMIN_TOKEN``. Every call has a deadline (``--timeout``).
A token the ladder hands out is printed alone on the last line of stdout, so that scripts take
``tail -n 1``. Errors are one line on stderr: exit status 2 for a usage error (no address, no
token, an unreadable upload, a value the ladder calls INVALID_ARGUMENT: a bad name, an upload
its checks refuse), 1 for any other refusal by the ladder (its status and message) or a
version that failed validation.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from scout_arena.text import echo

if TYPE_CHECKING:
    from scout.v1 import owners_pb2, owners_pb2_grpc

SUBMIT_CHUNK_BYTES = 32 * 1024
"""Under the 64 KiB the ladder's server reads per message (listener.SERVER_OPTIONS): a larger
chunk ends the upload RESOURCE_EXHAUSTED."""
POLL_S = 1.0

ParserT = TypeVar("ParserT", bound=argparse.ArgumentParser)


class CliError(Exception):
    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def guarded(command: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """The ladder's refusals and the user's mistakes as one line on stderr and a status."""

    @functools.wraps(command)
    def run(args: argparse.Namespace) -> int:
        import grpc
        from scout_arena.sandbox import UploadError

        try:
            return command(args)
        except CliError as exc:
            message, status = str(exc), exc.status
        except grpc.RpcError as exc:
            code = exc.code() if isinstance(exc, grpc.Call) else None
            details = exc.details() if isinstance(exc, grpc.Call) else str(exc)
            name = code.name if code is not None else "ERROR"
            message = f"{name}: {' '.join((details or '').split())}"
            # The ladder refused a value given here (a name, an upload): a usage error.
            status = 2 if code == grpc.StatusCode.INVALID_ARGUMENT else 1
            if code == grpc.StatusCode.UNAVAILABLE:
                message += f" (is a ladder serving {args.address}?)"
        except UploadError as exc:
            message, status = str(exc), 2
        except OSError as exc:
            message, status = f"{exc.strerror or exc}: {exc.filename or ''}".rstrip(": "), 2
        print(f"scout-arena ladder {args.ladder_command}: {message}", file=sys.stderr)
        return status

    return run


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def _stub(args: argparse.Namespace) -> owners_pb2_grpc.OwnersStub:
    import grpc
    from scout.v1 import owners_pb2_grpc

    if not args.address:
        raise CliError("no ladder address: pass --address HOST:PORT (or set "
                       "SCOUT_LADDER_ADDRESS)", 2)
    ca_cert = args.ca_cert or os.environ.get("SCOUT_CA_CERT") or None
    if args.tls or _env_flag("SCOUT_TLS") or ca_cert or args.client_cert:
        if bool(args.client_cert) != bool(args.client_key):
            raise CliError("--client-cert and --client-key go together", 2)
        credentials = grpc.ssl_channel_credentials(
            root_certificates=Path(ca_cert).read_bytes() if ca_cert else None,
            private_key=Path(args.client_key).read_bytes() if args.client_key else None,
            certificate_chain=Path(args.client_cert).read_bytes() if args.client_cert else None)
        channel = grpc.secure_channel(args.address, credentials)
    else:
        channel = grpc.insecure_channel(args.address)
    return owners_pb2_grpc.OwnersStub(channel)


def _owner_auth(args: argparse.Namespace) -> tuple[tuple[str, str], ...]:
    """The owner token's metadata; the admin's when --admin-token is given (it acts on any
    bot)."""
    if getattr(args, "admin_token", None):
        return _admin_auth(args)
    token = args.owner_token or os.environ.get("SCOUT_OWNER_TOKEN", "")
    if not token:
        raise CliError("no owner token: pass --owner-token or set SCOUT_OWNER_TOKEN (from "
                       "`scout-arena ladder signup`)", 2)
    return (("authorization", f"Bearer {token}"),)


def _admin_auth(args: argparse.Namespace, required: bool = True) -> tuple[tuple[str, str], ...]:
    token = args.admin_token or os.environ.get("SCOUT_LADDER_ADMIN_TOKEN", "")
    if not token:
        if not required:
            return ()
        raise CliError("this needs the ladder's admin token: --admin-token or "
                       "SCOUT_LADDER_ADMIN_TOKEN", 2)
    return (("authorization", f"Bearer {token}"),)


def cmd_signup(args: argparse.Namespace) -> int:
    from scout.v1 import owners_pb2

    answer = _stub(args).Signup(owners_pb2.SignupRequest(name=args.owner,
                                                         invite_code=args.invite or ""),
                                metadata=_admin_auth(args, required=False), timeout=args.timeout)
    print(f"signed up {answer.owner.name}", file=sys.stderr)
    print("owner token (shown once; only its hash is stored; export it as SCOUT_OWNER_TOKEN):",
          file=sys.stderr)
    print(answer.owner_token)
    return 0


def cmd_invite(args: argparse.Namespace) -> int:
    from scout.v1 import owners_pb2

    answer = _stub(args).CreateInvite(owners_pb2.CreateInviteRequest(),
                                      metadata=_admin_auth(args), timeout=args.timeout)
    print("invite code (single use):", file=sys.stderr)
    print(answer.invite_code)
    return 0


def cmd_suspend(args: argparse.Namespace) -> int:
    from scout.v1 import owners_pb2

    owner = _stub(args).SuspendOwner(owners_pb2.SuspendOwnerRequest(name=args.owner,
                                                                    reason=args.reason),
                                     metadata=_admin_auth(args), timeout=args.timeout)
    print(f"suspended {owner.name}: {owner.suspended_reason}")
    return 0


def cmd_reinstate(args: argparse.Namespace) -> int:
    from scout.v1 import owners_pb2

    owner = _stub(args).ReinstateOwner(owners_pb2.ReinstateOwnerRequest(name=args.owner),
                                       metadata=_admin_auth(args), timeout=args.timeout)
    print(f"reinstated {owner.name}")
    return 0


def cmd_register_bot(args: argparse.Namespace) -> int:
    from scout.v1 import owners_pb2

    kind = owners_pb2.BOT_KIND_HOSTED if args.hosted else owners_pb2.BOT_KIND_REMOTE
    answer = _stub(args).RegisterBot(owners_pb2.RegisterOwnedBotRequest(name=args.bot,
                                                                        kind=kind),
                                     metadata=_owner_auth(args), timeout=args.timeout)
    if not answer.token:
        print(f"registered hosted bot {answer.bot.name}: submit a version with "
              f"`scout-arena ladder submit {answer.bot.name} PATH`")
        return 0
    print(f"registered {answer.bot.name} version {answer.bot.version}", file=sys.stderr)
    print("bot token (shown once; only its hash is stored):", file=sys.stderr)
    print(answer.token)
    return 0


def cmd_rotate_token(args: argparse.Namespace) -> int:
    from scout.v1 import owners_pb2

    answer = _stub(args).RotateBotToken(owners_pb2.RotateBotTokenRequest(name=args.bot),
                                        metadata=_owner_auth(args), timeout=args.timeout)
    print(f"new token for {answer.bot.name} (the old one stopped working; shown once):",
          file=sys.stderr)
    print(answer.token)
    return 0


def cmd_retire_remote(args: argparse.Namespace) -> int:
    """`ladder retire BOT --address`: through the service, as the owner (or the admin)."""
    from scout.v1 import owners_pb2

    _stub(args).RetireBot(owners_pb2.RetireOwnedBotRequest(name=args.name),
                          metadata=_owner_auth(args), timeout=args.timeout)
    print(f"retired {args.name}")
    return 0


def _status_name(status: owners_pb2.VersionStatus.ValueType) -> str:
    """``VERSION_STATUS_ACTIVE`` -> ``active``."""
    from scout.v1 import owners_pb2

    return owners_pb2.VersionStatus.Name(status).removeprefix("VERSION_STATUS_").lower()


def cmd_submit(args: argparse.Namespace) -> int:
    from scout.v1 import owners_pb2
    from scout_arena.sandbox import UploadLimits, load_upload

    metadata = _owner_auth(args)
    stub = _stub(args)
    data = load_upload(Path(args.path), UploadLimits())

    def chunks() -> Iterator[owners_pb2.SubmitVersionChunk]:
        yield owners_pb2.SubmitVersionChunk(bot=args.bot)
        for start in range(0, len(data), SUBMIT_CHUNK_BYTES):
            yield owners_pb2.SubmitVersionChunk(data=data[start:start + SUBMIT_CHUNK_BYTES])

    stored = stub.SubmitVersion(chunks(), metadata=metadata, timeout=args.timeout)
    print(f"submitted {stored.bot} version {stored.version} ({stored.archive_size} bytes, "
          f"sha256 {stored.archive_sha256[:12]}); {_status_name(stored.status)}", flush=True)
    if args.no_wait:
        return 0
    version = stored
    deadline = time.monotonic() + args.wait
    while version.status == owners_pb2.VERSION_STATUS_VALIDATING:
        if time.monotonic() >= deadline:
            raise CliError(f"{stored.bot} version {stored.version} is still validating after "
                           f"{args.wait:g} s; see `scout-arena ladder versions {stored.bot}`", 1)
        time.sleep(POLL_S)
        version = stub.GetVersion(owners_pb2.GetVersionRequest(bot=stored.bot,
                                                               version=stored.version),
                                  metadata=metadata, timeout=args.timeout)
    if version.status == owners_pb2.VERSION_STATUS_REJECTED:
        print(f"{version.bot} version {version.version} was rejected: {version.reason}",
              file=sys.stderr)
        if version.validation_output:
            print("its output:", file=sys.stderr)
            print(version.validation_output.rstrip("\n"), file=sys.stderr)
        return 1
    print(f"{version.bot} version {version.version} passed validation: "
          f"{_status_name(version.status)}")
    return 0


def cmd_versions(args: argparse.Namespace) -> int:
    from scout.v1 import owners_pb2

    answer = _stub(args).ListVersions(owners_pb2.ListVersionsRequest(bot=args.bot),
                                      metadata=_owner_auth(args), timeout=args.timeout)
    for v in answer.versions:
        line = f"v{v.version} {_status_name(v.status)} {v.created_at}"
        if v.runtime:
            line += f" {v.runtime} {' '.join(v.command)}"
        print(line + (f" -- {v.reason}" if v.reason else ""))
    return 0


def cmd_logs(args: argparse.Namespace) -> int:
    from scout.v1 import owners_pb2

    answer = _stub(args).GetRunLogs(owners_pb2.GetRunLogsRequest(bot=args.bot,
                                                                 limit=args.limit),
                                    metadata=_owner_auth(args), timeout=args.timeout)
    if not answer.runs:
        print(f"no hosted runs of {args.bot} yet", file=sys.stderr)
    for run in reversed(answer.runs):  # oldest first: the newest ends the terminal's page
        print(f"=== {run.match_id} (version {run.version}, {run.created_at}): "
              f"{run.outcome_reason}")
        print(run.output_tail.rstrip("\n"))
    return 0


def cmd_data(args: argparse.Namespace) -> int:
    from scout.v1 import owners_pb2

    from .datafolder import unpack_data_archive

    dest = Path(args.dir)
    if dest.is_symlink() or (dest.exists() and (not dest.is_dir() or any(dest.iterdir()))):
        raise CliError(f"{dest} exists and is not an empty folder", 2)
    with tempfile.SpooledTemporaryFile(max_size=8 * 2**20) as archive:
        for chunk in _stub(args).DownloadData(owners_pb2.DownloadDataRequest(bot=args.bot),
                                              metadata=_owner_auth(args),
                                              timeout=args.timeout):
            archive.write(chunk.data)
        archive.seek(0)
        files = unpack_data_archive(archive, dest)
    print(f"wrote {files} files of {args.bot}'s data folder to {dest}")
    return 0


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < 1e6:
        raise argparse.ArgumentTypeError(f"seconds above 0, got {echo(text)}")
    return value


def _reason(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("a reason is not empty (it is shown on the owner's "
                                         "bots)")
    return text


def _limit(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= 100:
        raise argparse.ArgumentTypeError(f"a number from 1 to 100, got {echo(text)}")
    return value


def add_client_options(p: argparse.ArgumentParser, *, admin: bool = False,
                       owner: bool = True, address_required: bool = True) -> None:
    """--address, the tokens, the TLS flags (as the SDK's) and --timeout."""
    default = os.environ.get("SCOUT_LADDER_ADDRESS")
    p.add_argument("--address", metavar="HOST:PORT", default=default,
                   required=address_required and not default,
                   help="the ladder (default: $SCOUT_LADDER_ADDRESS)")
    if owner:
        p.add_argument("--owner-token", metavar="TOKEN",
                       help="the owner token (default: $SCOUT_OWNER_TOKEN)")
    if admin or owner:
        p.add_argument("--admin-token", metavar="TOKEN",
                       help="the ladder's admin token (default: $SCOUT_LADDER_ADMIN_TOKEN)"
                       if admin else "act as the admin instead of an owner")
    p.add_argument("--tls", action="store_true",
                   help="connect with TLS (also SCOUT_TLS=1; implied by a certificate)")
    p.add_argument("--ca-cert", metavar="PEM", help="CA to trust (default: $SCOUT_CA_CERT)")
    p.add_argument("--client-cert", metavar="PEM", help="client certificate")
    p.add_argument("--client-key", metavar="PEM", help="key of the client certificate")
    p.add_argument("--timeout", type=_seconds, default=60.0, metavar="SECONDS",
                   help="deadline of each call (default 60)")


def add_owner_commands(ladder_sub: argparse._SubParsersAction[ParserT]) -> None:
    """Adds the owner's commands to ``scout-arena ladder``."""
    signup = ladder_sub.add_parser("signup", help="make an owner account; prints its token")
    signup.add_argument("owner", metavar="OWNER")
    signup.add_argument("--invite", metavar="CODE", help="an invite code (--registration invite)")
    add_client_options(signup, owner=False, admin=True)
    signup.set_defaults(func=guarded(cmd_signup))

    invite = ladder_sub.add_parser("invite", help="make a single-use signup code (admin)")
    add_client_options(invite, owner=False, admin=True)
    invite.set_defaults(func=guarded(cmd_invite))

    suspend = ladder_sub.add_parser("suspend", help="suspend an owner account (admin)")
    suspend.add_argument("owner", metavar="OWNER")
    suspend.add_argument("--reason", required=True, type=_reason,
                         help="shown on the owner's bots")
    add_client_options(suspend, owner=False, admin=True)
    suspend.set_defaults(func=guarded(cmd_suspend))

    reinstate = ladder_sub.add_parser("reinstate", help="lift a suspension (admin)")
    reinstate.add_argument("owner", metavar="OWNER")
    add_client_options(reinstate, owner=False, admin=True)
    reinstate.set_defaults(func=guarded(cmd_reinstate))

    register = ladder_sub.add_parser("register-bot", help="register a bot of yours; prints "
                                     "its token")
    register.add_argument("bot", metavar="BOT")
    register.add_argument("--hosted", action="store_true",
                          help="the ladder runs it (submit versions); default: you run it")
    add_client_options(register)
    register.set_defaults(func=guarded(cmd_register_bot))

    rotate = ladder_sub.add_parser("rotate-token", help="a new token for a bot of yours")
    rotate.add_argument("bot", metavar="BOT")
    add_client_options(rotate)
    rotate.set_defaults(func=guarded(cmd_rotate_token))

    submit = ladder_sub.add_parser("submit", help="upload a hosted bot's new version and wait "
                                   "for its validation")
    submit.add_argument("bot", metavar="BOT")
    submit.add_argument("path", metavar="PATH",
                        help="a folder, .zip or .tar.gz holding scout-bot.toml")
    submit.add_argument("--wait", type=_seconds, default=600.0, metavar="SECONDS",
                        help="how long to wait for the validation's outcome (default 600)")
    submit.add_argument("--no-wait", action="store_true", help="return once it is stored")
    add_client_options(submit)
    submit.set_defaults(func=guarded(cmd_submit))

    versions = ladder_sub.add_parser("versions", help="a bot's versions and their validation")
    versions.add_argument("bot", metavar="BOT")
    add_client_options(versions)
    versions.set_defaults(func=guarded(cmd_versions))

    logs = ladder_sub.add_parser("logs", help="print a hosted bot's run outputs")
    logs.add_argument("bot", metavar="BOT")
    logs.add_argument("--limit", type=_limit, default=20, metavar="N",
                      help="the newest N runs (default 20, at most 100)")
    add_client_options(logs)
    logs.set_defaults(func=guarded(cmd_logs))

    data = ladder_sub.add_parser("data", help="download a hosted bot's data folder")
    data.add_argument("bot", metavar="BOT")
    data.add_argument("dir", metavar="DIR", help="where to write it (missing or empty)")
    add_client_options(data)
    data.set_defaults(func=guarded(cmd_data))
