"""The owner's page and its JSON API (/api/owner...), on a real ladder process that hosts bots
and serves its web pages: the owner token in the Authorization header, another owner's bot
refused (403), no token (401), hostile uploads refused as the gRPC service refuses them (400,
413), and in the browser a submitted bot's validation result, its runs' output and its data
folder download. The browser fixtures and the screenshots are tests/support/web_site.py's."""

from __future__ import annotations

import io
import re
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from scout.v1 import owners_pb2, owners_pb2_grpc
from scout_arena.sandbox import pack_folder
from support.hostedladder import ADMIN, Ladder, hosting_ladder, remote_bots, stop, wait_for
from support.hosting import bot_folder
from support.web_site import _open, _shot, browser_fixture  # noqa: F401  (a shared fixture)

UPLOAD_LIMIT = 2**20
"""--max-upload-mb 1."""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Ladder, str]]:
    """A ladder process that hosts bots (SQLite), with its web pages: (ladder, base URL)."""
    tmp = tmp_path_factory.mktemp("owner-site")
    with hosting_ladder(f"sqlite:///{tmp / 'ladder.db'}", tmp, "--web-port", "0",
                        "--max-upload-mb", "1") as ladder:
        assert ladder.process.stdout is not None
        url = ""
        while not url:
            line = ladder.process.stdout.readline()
            assert line, f"the ladder stopped:\n{ladder.log.read_text()}"
            found = re.search(r"web pages on (http://\S+?)/?$", line.strip())
            if found:
                url = found.group(1)
        yield ladder, url


def _signup(ladder: Ladder, owner: str) -> str:
    """An owner token, over gRPC (the CLI's signup is tested in test_owners_cli.py)."""
    with grpc.insecure_channel(ladder.address) as channel:
        return str(owners_pb2_grpc.OwnersStub(channel).Signup(
            owners_pb2.SignupRequest(name=owner), timeout=30).owner_token)


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _tar_gz(files: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


MANIFEST = b'runtime = "python"\ncommand = ["python", "bot.py"]\n'


def test_owner_api_answers_only_the_owner_and_refuses_hostile_uploads(
        site: tuple[Ladder, str], tmp_path: Path) -> None:
    ladder, url = site
    alice, bob = _signup(ladder, "alice"), _signup(ladder, "bob")
    remote_token = ladder.remote_bot("remote-r")  # a remote bot of its own owner
    assert remote_token
    bot = pack_folder(bot_folder("counter", tmp_path))
    with httpx.Client(base_url=url, timeout=60) as client:
        assert client.get("/api/info").json()["owners"] is True
        # no token, or an unknown one: 401, before anything is read
        for headers in ({}, {"Authorization": "Basic eA=="}, _auth("not-a-token")):
            missing = client.get("/api/owner", headers=headers)
            assert missing.status_code == 401 and missing.json()["error"]
            assert missing.headers["www-authenticate"] == "Bearer"
            refused = client.post("/api/owner/bots/acorn/versions", content=bot,
                                  headers=headers)
            assert refused.status_code == 401
        account = client.get("/api/owner", headers=_auth(alice)).json()
        assert (account["owner"], account["admin"], account["bots"]) == ("alice", False, [])
        assert account["hosting"] is True and account["max_upload_bytes"] == UPLOAD_LIMIT

        # the happy path: a new name becomes a hosted bot of alice's, version 1, validating
        stored = client.post("/api/owner/bots/acorn/versions", content=bot,
                             headers=_auth(alice))
        assert stored.status_code == 201, stored.text
        version = stored.json()
        assert (version["bot"], version["version"], version["status"], version["runtime"],
                version["command"]) == ("acorn", 1, "validating", "python",
                                        ["python", "bot.py"])
        [listed] = client.get("/api/owner/bots/acorn/versions", headers=_auth(alice)).json()
        assert listed["version"] == 1 and listed["archive_size"] > 0
        [mine] = client.get("/api/owner", headers=_auth(alice)).json()["bots"]
        assert (mine["bot"], mine["kind"]) == ("acorn", "hosted")
        assert client.get("/api/owner/bots/acorn/runs", headers=_auth(alice)).json() == []
        data = client.get("/api/owner/bots/acorn/data", headers=_auth(alice))
        assert data.status_code == 200 and data.headers["content-type"] == "application/gzip"
        with tarfile.open(fileobj=io.BytesIO(data.content), mode="r:gz") as tar:
            assert [m for m in tar.getmembers() if m.isfile()] == []  # no run yet

        # another owner's token: 403 on every call about the bot; the admin's: allowed
        for path in ("versions", "runs", "data"):
            other = client.get(f"/api/owner/bots/acorn/{path}", headers=_auth(bob))
            assert other.status_code == 403, (path, other.text)
        stolen = client.post("/api/owner/bots/acorn/versions", content=bot, headers=_auth(bob))
        assert stolen.status_code == 403 and "alice" not in client.get(
            "/api/owner", headers=_auth(bob)).text
        assert client.get("/api/owner", params={"owner": "alice"},
                          headers=_auth(bob)).status_code == 403
        assert client.get("/api/owner/bots/acorn/versions",
                          headers=_auth(ADMIN)).status_code == 200
        admin_view = client.get("/api/owner", params={"owner": "alice"},
                                headers=_auth(ADMIN)).json()
        assert admin_view["admin"] is True and [b["bot"] for b in admin_view["bots"]] == [
            "acorn"]
        assert client.get("/api/owner/bots/nobody/versions",
                          headers=_auth(alice)).status_code == 404
        for path in ("runs", "versions"):
            assert client.get(f"/api/owner/bots/acorn/{path}", params={"limit": "x"},
                              headers=_auth(alice)).status_code == 400

        # hostile uploads: each refused with its status and a message, nothing stored
        def post(name: str, body: Any, **headers: str) -> httpx.Response:
            return client.post(f"/api/owner/bots/{name}/versions", content=body,
                               headers={**_auth(alice), **headers})

        too_big = post("acorn", b"\0" * (UPLOAD_LIMIT + 1))
        assert too_big.status_code == 413 and str(UPLOAD_LIMIT) in too_big.json()["error"]

        def stream() -> Iterator[bytes]:  # no Content-Length: counted as it streams in
            for _ in range(UPLOAD_LIMIT // 65536 + 2):
                yield b"\0" * 65536

        assert post("acorn", stream()).status_code == 413
        garbage = post("acorn", b"not an archive at all")
        assert garbage.status_code == 400 and garbage.json()["error"].startswith(
            "upload refused: ")
        traversal = post("acorn", _tar_gz({"scout-bot.toml": MANIFEST, "../evil.py": b"x"}))
        assert traversal.status_code == 400 and "upload refused" in traversal.json()["error"]
        assert not (tmp_path.parent / "evil.py").exists()
        no_manifest = post("acorn", _tar_gz({"bot.py": b"print(1)"}))
        assert no_manifest.status_code == 400
        injected = post("acorn", _tar_gz({"scout-bot.toml": b'runtime = "python"\n'
                                          b'command = ["sh", "-c", "rm -rf /; python bot.py"]'
                                          b"\n", "bot.py": b""}))
        assert injected.status_code == 400
        assert post("acorn", b"").status_code == 400
        assert post("bad%20name!", bot).status_code == 400
        remote = post("remote-r", bot, Authorization=f"Bearer {ADMIN}")
        assert remote.status_code == 409 and "remote bot" in remote.json()["error"]
        versions = client.get("/api/owner/bots/acorn/versions", headers=_auth(alice)).json()
        assert [v["version"] for v in versions] == [1]

        # a suspended owner still reads, but submits nothing (refused before the body)
        with grpc.insecure_channel(ladder.address) as channel:
            owners_pb2_grpc.OwnersStub(channel).SuspendOwner(
                owners_pb2.SuspendOwnerRequest(name="bob", reason="spam"),
                metadata=(("authorization", f"Bearer {ADMIN}"),), timeout=30)
        suspended = client.post("/api/owner/bots/hazel/versions", content=bot,
                                headers=_auth(bob))
        assert suspended.status_code == 409 and "spam" in suspended.json()["error"]
        assert client.get("/api/owner", headers=_auth(bob)).json()["suspended_reason"] == "spam"


def test_browser_owner_submits_a_bot_and_sees_its_validation_logs_and_data(
        browser: Any, site: tuple[Ladder, str], tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    ladder, url = site
    carol = _signup(ladder, "carol")
    archive = tmp_path / "counter.tar.gz"
    archive.write_bytes(pack_folder(bot_folder("counter", tmp_path)))
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    browser.execute_cdp_cmd("Page.setDownloadBehavior",
                            {"behavior": "allow", "downloadPath": str(downloads)})

    _open(browser, f"{url}/#/owner", "owner")
    assert browser.find_element(By.ID, "nav-owner").is_displayed()
    browser.find_element(By.ID, "owner-token").send_keys(carol)
    browser.find_element(By.ID, "token-save").click()
    WebDriverWait(browser, 10).until(
        lambda d: "carol" in d.find_element(By.ID, "owner-who").text)
    assert carol not in browser.current_url  # the token is in no URL
    browser.find_element(By.ID, "new-bot").send_keys("walnut")
    browser.find_element(By.CSS_SELECTOR, "#open-bot button").click()
    WebDriverWait(browser, 10).until(lambda d: d.find_elements(By.ID, "upload-file"))
    browser.find_element(By.ID, "upload-file").send_keys(str(archive))
    browser.find_element(By.ID, "upload-submit").click()
    WebDriverWait(browser, 20).until(
        lambda d: "Version 1 stored" in d.find_element(By.ID, "upload-status").text)

    def status(driver: Any) -> Any:
        return driver.execute_script(
            "const r = document.querySelector('#versions tr[data-version=\"1\"]');"
            "return r && r.getAttribute('data-status');")

    WebDriverWait(browser, 180).until(lambda d: status(d) in ("active", "rejected"))
    assert status(browser) == "active", browser.find_element(By.ID, "versions").text
    _shot(browser, "owner-bot")

    # an opponent, so that walnut plays a rated match: its run's output shows up by itself
    tokens = {"pecan": ladder.remote_bot("pecan")}
    remotes = remote_bots(ladder.address, tokens)
    try:
        WebDriverWait(browser, 180).until(
            lambda d: d.find_elements(By.CSS_SELECTOR, "#runs tr[data-match]"))
    finally:
        stop(remotes)
    output = browser.execute_script(
        "return document.querySelector('#runs .run-output').textContent;")
    assert "run number" in output
    browser.find_element(By.CSS_SELECTOR, "#runs details summary").click()
    _shot(browser, "owner-runs")

    browser.find_element(By.ID, "data-download").click()
    target = downloads / "walnut-data.tar.gz"
    wait_for(lambda: target.exists() and target.stat().st_size > 0, 20, "the data download")
    time.sleep(0.2)
    with tarfile.open(target, mode="r:gz") as tar:
        count = tar.extractfile("count")
        assert count is not None and int(count.read()) >= 1

    # the owner's list of bots: kind, active version, state
    _open(browser, f"{url}/#/owner", "owner")
    row = browser.find_element(By.CSS_SELECTOR, "#owner-bots tr[data-bot=walnut]")
    assert [c.text for c in row.find_elements(By.TAG_NAME, "td")][1:4] == [
        "hosted", "v1", "playing"]
    _shot(browser, "owner")

    # the public profile shows the owner-only parts to this tab (it holds the token)
    _open(browser, f"{url}/#/bot/walnut", "bot")
    WebDriverWait(browser, 10).until(
        lambda d: d.find_elements(By.CSS_SELECTOR, "#owner-parts #versions"))
    # and without the token, only a link to the owner page
    browser.execute_script("sessionStorage.clear();")
    browser.get("about:blank")
    _open(browser, f"{url}/#/bot/walnut", "bot")
    parts = browser.find_element(By.ID, "owner-parts")
    assert not parts.find_elements(By.ID, "versions") and "owner token" in parts.text


def test_a_ladder_without_hosting_refuses_uploads_before_reading_them(tmp_path: Path) -> None:
    """In-process ladder (LadderConfig.hosting off): the page's upload answers 409, as the
    gRPC service answers FAILED_PRECONDITION; the admin token without an owner lists no bots."""
    import asyncio

    from scout_ladder.repository import Repository
    from scout_ladder.service import Ladder as InProcessLadder
    from scout_ladder.service import LadderConfig

    async def main(repo: Repository) -> None:
        _, token = repo.create_owner("dora")
        ladder = InProcessLadder(repo, LadderConfig(port=0, web_port=0, admin_token="adm"))
        await ladder.start()
        try:
            async with httpx.AsyncClient(base_url=f"http://{ladder.web_address}") as client:
                refused = await client.post("/api/owner/bots/fig/versions", content=b"x" * 10,
                                            headers=_auth(token))
                assert refused.status_code == 409
                assert "hosts no bots" in refused.json()["error"]
                account = (await client.get("/api/owner", headers=_auth(token))).json()
                assert (account["owner"], account["hosting"]) == ("dora", False)
                admin = (await client.get("/api/owner", headers=_auth("adm"))).json()
                assert (admin["admin"], admin["owner"], admin["bots"]) == (True, None, [])
        finally:
            await ladder.stop()

    with Repository(f"sqlite:///{tmp_path / 'ladder.db'}", storage=tmp_path / "storage") as repo:
        repo.migrate()
        asyncio.run(main(repo))
