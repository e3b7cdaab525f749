"""What an operator relies on when running a referee or a ladder: the log names the port a
server bound, health tells the truth (gRPC health and the HTTP /livez and /readyz beside the
metrics), a config file stands in for a long command line, and the metrics endpoint can ask
for a token and speak TLS. Real processes on 127.0.0.1 where the behaviour is the process's."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import ssl
import subprocess
import time
import tomllib
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from referee_support import SCOUT_ARENA, stop
from scout_arena.cli import build_parser
from scout_arena.server import health
from scout_arena.server.configfile import parse_with_config
from scout_ladder.repository import Repository
from scout_ladder.service import Ladder, LadderConfig
from sqlalchemy import create_engine, make_url
from support.ports import free_port
from support.referee_e2e import make_self_signed
from support.tcpproxy import TcpProxy


def wait_for_text(path: Path, pattern: str, timeout: float = 30.0) -> re.Match[str]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = re.search(pattern, path.read_text(errors="replace"))
        if found is not None:
            return found
        time.sleep(0.05)
    raise AssertionError(f"{pattern!r} not in {path}:\n{path.read_text(errors='replace')}")


def test_the_missing_admin_token_warning_names_the_port_the_referee_bound(
        tmp_path: Path) -> None:
    log = tmp_path / "referee.log"
    process = subprocess.Popen(
        [*SCOUT_ARENA, "referee", "serve", "--port", "0", "--records", str(tmp_path / "r")],
        stdout=subprocess.PIPE, stderr=log.open("w"), text=True)
    try:
        assert process.stdout is not None
        address = process.stdout.readline().split("listening on", 1)[1].strip()
        assert not address.endswith(":0")
        warning = wait_for_text(log, r"no --admin-token: .* reaches (\S+) ")
        assert warning.group(1) == address
    finally:
        stop(process)


def health_status(address: str, service: str = "") -> str:
    with grpc.insecure_channel(address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        try:
            reply = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=10)
        except grpc.RpcError as exc:
            return f"error {exc.code().name}"
    return str(health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status))


def http_get(url: str, headers: dict[str, str] | None = None,
             context: ssl.SSLContext | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def eventually(what: str, check: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:g} s: {what}")
        time.sleep(0.2)


def test_ladder_health_turns_not_serving_while_its_database_is_cut_off_and_back_after(
        tmp_path: Path) -> None:
    """A real fault between the ladder and PostgreSQL (a relay that drops every connection):
    gRPC health and /readyz say NOT_SERVING while the database does not answer, and SERVING
    once it does again; the ladder keeps running (it takes its lease again), and /livez
    stays ok all along (restarting the ladder would not bring the database back)."""
    base = os.environ.get("SCOUT_TEST_POSTGRES_URL")
    if not base:
        pytest.skip("SCOUT_TEST_POSTGRES_URL is not set: run `make postgres`")
    url = make_url(base)
    proxy = TcpProxy((url.host or "127.0.0.1", url.port or 5432))
    schema = f"health_{os.getpid()}_{time.monotonic_ns()}"
    proxied = url.set(host="127.0.0.1", port=proxy.port,
                      query={**url.query, "options": f"-csearch_path={schema}"})
    with contextlib.closing(create_engine(url).connect()) as admin:
        admin.exec_driver_sql(f'CREATE SCHEMA "{schema}"')
        admin.commit()
    repo = Repository(proxied.render_as_string(hide_password=False))

    async def scenario() -> list[str]:
        seen: list[str] = []
        ladder = Ladder(repo, LadderConfig(port=0))
        await ladder.start()
        try:
            base_url = ladder.referee.serve_metrics().rsplit("/", 1)[0]

            async def wait(status: str, ready: int) -> None:
                deadline = time.monotonic() + 60
                while True:
                    got = await asyncio.to_thread(health_status, ladder.address)
                    code, _ = await asyncio.to_thread(http_get, f"{base_url}/readyz")
                    if (got, code) == (status, ready):
                        seen.append(f"{got} {code}")
                        return
                    assert time.monotonic() < deadline, (status, got, code)
                    await asyncio.sleep(0.2)

            await wait("SERVING", 200)
            proxy.cut()
            await wait("NOT_SERVING", 503)
            _, why = await asyncio.to_thread(http_get, f"{base_url}/readyz")
            live, _ = await asyncio.to_thread(http_get, f"{base_url}/livez")
            seen.append(f"livez {live}")
            assert "database" in why
            proxy.restore()
            await wait("SERVING", 200)
            assert not ladder.stop_requested.is_set(), ladder.failure
        finally:
            await ladder.stop()
            proxy.close()
        return seen

    try:
        assert asyncio.run(scenario()) == ["SERVING 200", "NOT_SERVING 503", "livez 200",
                                           "SERVING 200"]
    finally:
        repo.close()
        with contextlib.closing(create_engine(url).connect()) as admin:
            admin.exec_driver_sql(f'DROP SCHEMA "{schema}" CASCADE')
            admin.commit()


def start_process(args: list[str], log: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=log.open("w"), text=True)


def read_until(process: subprocess.Popen[str], pattern: str, timeout: float = 60) -> str:
    assert process.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            raise AssertionError(f"the process ended before printing {pattern!r}")
        found = re.search(pattern, line)
        if found is not None:
            return found.group(1)
    raise AssertionError(f"no {pattern!r} within {timeout:g} s")


def test_a_node_is_ready_only_while_attached_to_its_ladder(tmp_path: Path) -> None:
    """Kill -9 the ladder: its node turns NOT_SERVING (gRPC health and /readyz, saying why)
    while /livez stays ok; a ladder back on the port makes the node ready again."""
    port = free_port()
    ladder_args = [*SCOUT_ARENA, "ladder", "serve", "--database",
                   f"sqlite:///{tmp_path / 'ladder.db'}", "--port", str(port),
                   "--node-token", "node-secret", "--no-hosting"]
    ladder = start_process(ladder_args, tmp_path / "ladder.log")
    node: subprocess.Popen[str] | None = None
    try:
        read_until(ladder, r"ladder listening on (\S+)")
        node = start_process(
            [*SCOUT_ARENA, "referee", "serve", "--port", "0", "--records", str(tmp_path / "r"),
             "--join", f"127.0.0.1:{port}", "--node-token", "node-secret", "--no-hosting",
             "--metrics-port", "0", "--admin-token", "adm"], tmp_path / "node.log")
        address = read_until(node, r"referee listening on (\S+)")
        metrics = read_until(node, r"metrics on (\S+)").rsplit("/", 1)[0]
        eventually("the node ready", lambda: http_get(f"{metrics}/readyz")[0] == 200)
        eventually("the node SERVING", lambda: health_status(address) == "SERVING")
        ladder.kill()
        ladder.wait()
        eventually("the node not ready", lambda: http_get(f"{metrics}/readyz")[0] == 503)
        eventually("the node NOT_SERVING", lambda: health_status(address) == "NOT_SERVING")
        assert "not attached" in http_get(f"{metrics}/readyz")[1]
        assert http_get(f"{metrics}/livez")[0] == 200
        ladder = start_process(ladder_args, tmp_path / "ladder2.log")
        read_until(ladder, r"ladder listening on (\S+)")
        eventually("the node ready again", lambda: http_get(f"{metrics}/readyz")[0] == 200)
        eventually("the node SERVING again", lambda: health_status(address) == "SERVING")
    finally:
        for process in (node, ladder):
            if process is not None:
                stop(process)


def test_the_metrics_endpoint_asks_for_its_token_over_tls_and_the_probes_do_not(
        tmp_path: Path) -> None:
    cert, key = make_self_signed(tmp_path)
    process = subprocess.Popen(
        [*SCOUT_ARENA, "referee", "serve", "--port", "0", "--records", str(tmp_path / "r"),
         "--admin-token", "adm", "--metrics-port", "0", "--metrics-token", "m-secret",
         "--metrics-tls-cert", str(cert), "--metrics-tls-key", str(key)],
        stdout=subprocess.PIPE, stderr=(tmp_path / "referee.log").open("w"), text=True)
    try:
        url = read_until(process, r"metrics on (\S+)")
        assert url.startswith("https://")
        trusted = ssl.create_default_context(cafile=str(cert))
        assert http_get(url, context=trusted)[0] == 401
        assert http_get(url, {"Authorization": "Bearer wrong"}, trusted)[0] == 401
        code, body = http_get(url, {"Authorization": "Bearer m-secret"}, trusted)
        assert code == 200 and "scout_running_matches" in body
        base = url.rsplit("/", 1)[0]
        assert http_get(f"{base}/livez", context=trusted) == (200, "ok\n")
        assert http_get(f"{base}/readyz", context=trusted) == (200, "ok\n")
        with pytest.raises(urllib.error.URLError):  # the certificate is not trusted
            http_get(url, {"Authorization": "Bearer m-secret"}, ssl.create_default_context())
        with pytest.raises((urllib.error.URLError, ConnectionError)):  # no plain HTTP
            http_get(url.replace("https://", "http://"))
    finally:
        stop(process)


# --- a config file ------------------------------------------------------------------------

DEPLOY_MD = Path(__file__).resolve().parents[1] / "docs" / "deploy.md"


def documented_configs() -> dict[str, str]:
    """The TOML examples of docs/deploy.md, by the command their first line names."""
    blocks = re.findall(r"```toml\n(.*?)```", DEPLOY_MD.read_text(), re.S)
    return {re.search(r"scout-arena (\w+ serve)", block).group(1): block  # type: ignore[union-attr]
            for block in blocks}


def test_the_documented_config_files_parse_and_set_every_key(tmp_path: Path) -> None:
    configs = documented_configs()
    assert set(configs) == {"ladder serve", "referee serve"}
    for command, text in configs.items():
        path = tmp_path / "config.toml"
        path.write_text(text)
        args = parse_with_config(build_parser(), [*command.split(), "--config", str(path)])
        for key, value in tomllib.loads(text).items():
            got = getattr(args, key.replace("-", "_"))
            assert got == (tuple(int(v) for v in value.split(",")) if key == "table-sizes"
                           else value), key


def test_command_line_options_override_the_config_file(tmp_path: Path) -> None:
    path = tmp_path / "ladder.toml"
    path.write_text("port = 7000\ndecision-ms = 500\nno-hosting = true\n")
    args = parse_with_config(build_parser(), ["ladder", "serve", "--decision-ms", "800",
                                              "--config", str(path)])
    assert (args.port, args.decision_ms, args.no_hosting) == (7000, 800, True)
    referee = tmp_path / "referee.toml"
    referee.write_text('bot-token = ["a=tok-a", "b=tok-b"]\nport = 6000\n')
    args = parse_with_config(build_parser(), ["referee", "serve", "--config", str(referee),
                                              "--port", "6001"])
    assert (args.port, args.bot_token) == (6001, ["a=tok-a", "b=tok-b"])


def test_a_ladder_served_from_a_config_file_listens_where_it_says(tmp_path: Path) -> None:
    """A real `ladder serve --config`: web pages and metrics from the file, the gRPC port
    from the command line."""
    port = free_port()
    config = tmp_path / "ladder.toml"
    config.write_text(f'database = "sqlite:///{tmp_path / "ladder.db"}"\nport = 1\n'
                      'web-port = 0\nmetrics-port = 0\nno-hosting = true\n'
                      'table-sizes = "2,4"\nadmin-token = "adm"\n')
    process = start_process([*SCOUT_ARENA, "ladder", "serve", "--config", str(config),
                             "--port", str(port)], tmp_path / "ladder.log")
    try:
        assert read_until(process, r"ladder listening on (\S+)") == f"127.0.0.1:{port}"
        metrics = read_until(process, r"metrics on (\S+)")
        web = read_until(process, r"web pages on (\S+)")
        assert http_get(metrics)[0] == 200
        assert http_get(web)[0] == 200
        eventually("the ladder SERVING",
                   lambda: health_status(f"127.0.0.1:{port}") == "SERVING")
    finally:
        assert stop(process) == 0


def test_a_stuck_event_loop_is_not_live_and_a_failing_check_is_not_ready(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """What /livez and /readyz read, from another thread, as the probes' HTTP thread does."""
    monkeypatch.setattr(health, "LOOP_STALL_S", 0.3)
    monkeypatch.setattr(health, "LOOP_TICK_S", 0.05)
    reports: list[bool] = []

    class Reporter:
        async def report(self, serving: bool) -> None:
            reports.append(serving)

    async def scenario() -> list[str | None]:
        state = health.Health(Reporter(), lambda: None)
        seen = [state.ready_problem()]  # before start: "starting"
        await state.start()
        await asyncio.sleep(0.05)
        seen.append(state.live_problem())

        def stall_then_look() -> str | None:
            time.sleep(0.6)
            return state.live_problem()

        watcher = asyncio.get_running_loop().run_in_executor(None, stall_then_look)
        time.sleep(0.8)  # the loop stuck (a blocking call on it)
        seen.append(await watcher)
        await asyncio.sleep(0.2)
        seen.append(state.live_problem())

        async def failing() -> str | None:
            return "the thing is down"

        state.watch("thing", failing, 0.05)
        await asyncio.sleep(0.2)
        seen.append(state.ready_problem())
        await state.stop()
        seen.append(state.ready_problem())
        return seen

    seen = asyncio.run(scenario())
    assert seen[0] == "starting"
    assert seen[1] is None
    assert seen[2] is not None and "has not turned" in seen[2]
    assert seen[3] is None
    assert seen[4] == "thing: the thing is down"
    assert seen[5] == "stopping"
    assert reports == [True, False]
