"""A new version's check (`scout_arena.hosting.validation.Validator`), with real sandboxed
processes: it passes only by playing its check's matches to the end."""

from __future__ import annotations

from pathlib import Path

from scout_arena.hosting.validation import ValidationConfig, Validator
from scout_arena.sandbox import Sandbox, pack_folder
from support.hosting import bot_folder, run_async


def _validator(tmp_path: Path) -> Validator:
    return Validator(Sandbox(), tmp_path / "validation", ValidationConfig(join_timeout_s=20))


@run_async
async def test_a_bundled_bot_passes_its_check(tmp_path: Path) -> None:
    verdict = await _validator(tmp_path).check(
        "candidate", pack_folder(bot_folder("greedy", tmp_path)))
    assert verdict.passed, verdict
    assert verdict.reason == ""
    assert "match 2 of the check" in verdict.output


@run_async
async def test_a_bot_crashing_at_start_is_rejected_with_its_output(tmp_path: Path) -> None:
    verdict = await _validator(tmp_path).check(
        "candidate", pack_folder(bot_folder("crash_at_start", tmp_path)))
    assert not verdict.passed
    assert "never connected" in verdict.reason
    assert "ZeroDivisionError on purpose" in verdict.output


@run_async
async def test_a_bot_dying_mid_match_is_rejected(tmp_path: Path) -> None:
    verdict = await _validator(tmp_path).check(
        "candidate", pack_folder(bot_folder("crash_mid", tmp_path)))
    assert not verdict.passed
    assert "ended during the match" in verdict.reason
    assert "dying mid-match" in verdict.output


@run_async
async def test_an_upload_that_does_not_unpack_is_rejected(tmp_path: Path) -> None:
    verdict = await _validator(tmp_path).check("candidate", b"not an archive at all")
    assert not verdict.passed
    assert "cannot be unpacked" in verdict.reason
