"""The testbed's installs into the cache (``testbed/staged.py``): whole or not at all. An error
or a SIGKILL mid-way leaves nothing the next install takes for complete; the next one
removes what a killed one staged and completes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import staged

TESTBED = Path(staged.__file__).resolve().parent


def _fill(content: Path, files: int = 3) -> None:
    for n in range(files):
        (content / f"part-{n}").write_text(f"{n}\n")


def test_a_completed_install_is_in_place_and_marked(tmp_path: Path) -> None:
    target = tmp_path / "cache" / "thing-1"
    with staged.staged(target, "v1") as content:
        _fill(content)
        assert not target.exists(), "nothing in place before the block ends"
    assert staged.installed(target, "v1") and not staged.installed(target, "v2")
    assert sorted(p.name for p in target.iterdir()) == [".complete", "part-0", "part-1", "part-2"]
    assert [p.name for p in target.parent.iterdir()] == ["thing-1"], "no staging left"


def test_an_install_that_fails_leaves_nothing(tmp_path: Path) -> None:
    target = tmp_path / "thing-1"
    with pytest.raises(RuntimeError, match="pip failed"), staged.staged(target, "v1") as content:
        _fill(content)
        raise RuntimeError("pip failed")
    assert list(tmp_path.iterdir()) == []


def test_a_stale_or_incomplete_install_is_replaced(tmp_path: Path) -> None:
    target = tmp_path / "thing"
    for earlier in ({"part-9": "old", ".complete": "v0"}, {"part-0": "half"}):
        target.mkdir()
        for name, text in earlier.items():
            (target / name).write_text(text)
        assert not staged.installed(target, "v1")
        with staged.staged(target, "v1") as content:
            _fill(content, 1)
        assert staged.installed(target, "v1") and (target / "part-0").read_text() == "0\n"
        assert not (target / "part-9").exists()
        (target / ".complete").unlink()
        for path in target.iterdir():
            path.unlink()
        target.rmdir()


def test_an_install_finished_meanwhile_by_another_process_is_kept(tmp_path: Path) -> None:
    target = tmp_path / "thing"
    with staged.staged(target, "v1") as content:
        _fill(content)
        with staged.staged(target, "v1") as other:  # the other process, finishing first
            (other / "theirs").write_text("")
    assert (target / "theirs").exists() and not (target / "part-0").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["thing"]


_KILLED = """
import sys, time
from pathlib import Path
import staged
with staged.staged(Path(sys.argv[1]), "v1") as content:
    for n in range(10_000):
        (content / f"part-{n}").write_text("x")
        if n == 50:
            print("half", flush=True)
            time.sleep(600)
"""


def test_an_install_killed_mid_way_is_not_taken_for_complete_and_the_next_one_cleans_up(
    tmp_path: Path,
) -> None:
    target = tmp_path / "cache" / "thing-1"
    process = subprocess.Popen(
        [sys.executable, "-c", _KILLED, str(target)],
        env={**os.environ, "PYTHONPATH": str(TESTBED)},
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None and process.stdout.readline() == "half\n"
    os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=30)
    assert not target.exists() and not staged.installed(target, "v1")
    (left,) = target.parent.iterdir()  # the killed install's staging, named with its pid
    assert left.name.startswith(f"thing-1.staging-{process.pid}-")
    assert len(list(left.rglob("part-*"))) == 51

    started = time.monotonic()
    with staged.staged(target, "v1") as content:
        _fill(content)
    assert staged.installed(target, "v1") and time.monotonic() - started < 30
    assert [p.name for p in target.parent.iterdir()] == ["thing-1"], "the killed staging removed"


def test_a_live_installs_staging_is_left_alone(tmp_path: Path) -> None:
    target = tmp_path / "thing"
    live = tmp_path / f"thing.staging-{os.getpid()}-abc"
    live.mkdir()
    with staged.staged(target, "v1") as content:
        _fill(content)
    assert live.is_dir() and staged.installed(target, "v1")
