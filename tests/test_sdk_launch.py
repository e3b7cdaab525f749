"""The Python SDK's `run()` follows the launch convention (PROTOCOL.md §11.4) for what it is not
given, so that `run(MyBot())` plays wherever a tournament or a ladder's sandbox starts it (the
end-to-end side: the examples of tests/test_starter_kits.py play over a Unix socket)."""

from __future__ import annotations

import pytest
from scout_client import GreedyBot, run
from scout_client.runner import LaunchSettings


def test_launch_settings_read_the_convention_with_a_unix_socket_address() -> None:
    settings = LaunchSettings.from_environment({
        "SCOUT_ADDRESS": " unix:/run/scout/referee.sock ", "SCOUT_TOKEN": "hosted",
        "SCOUT_CONCURRENCY": "1", "SCOUT_PUBLIC_EVENTS": "yes", "SCOUT_TLS": "0"})
    assert settings == LaunchSettings(address="unix:/run/scout/referee.sock", token="hosted",
                                      tls=False, ca_cert=None, concurrency=1,
                                      public_events=True)


def test_launch_settings_default_to_eight_matches_and_a_lean_plaintext_stream() -> None:
    settings = LaunchSettings.from_environment({"SCOUT_CA_CERT": "/ca.pem", "SCOUT_TLS": "1"})
    assert (settings.address, settings.token, settings.concurrency) == ("", "", 8)
    assert settings.tls and settings.ca_cert == "/ca.pem" and not settings.public_events


@pytest.mark.parametrize("concurrency", ["0", "-2", "many"])
def test_launch_settings_refuse_a_concurrency_below_one(concurrency: str) -> None:
    with pytest.raises(ValueError, match="SCOUT_CONCURRENCY"):
        LaunchSettings.from_environment({"SCOUT_CONCURRENCY": concurrency})


@pytest.mark.parametrize(("environment", "missing"), [
    ({"SCOUT_TOKEN": "t"}, "SCOUT_ADDRESS"),
    ({"SCOUT_ADDRESS": "unix:/run/scout/referee.sock"}, "SCOUT_TOKEN"),
])
def test_run_without_an_address_or_token_names_the_variable_to_set(
        environment: dict[str, str], missing: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("SCOUT_ADDRESS", "SCOUT_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match=missing):
        run(GreedyBot(), handle_signals=False)
