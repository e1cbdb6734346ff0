"""A directory of the cache installed whole or not at all: what the testbed fetches or builds
once (Maven's jars, a pyspark, SeaweedFS's binary) is made in a staging directory beside its
place and renamed into it when complete, marked with a stamp (the pom's digest, a version).

An install stopped by an error removes what it staged; one killed mid-way leaves its staging
directory (named with its process id), which the next install beside it removes once that
process is gone, and never the directory a caller reads: that only appears by the rename,
complete. A concurrent install of the same directory that finishes first wins; the other's
work is dropped (a complete directory is never replaced by an equal one under its readers).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

COMPLETE = ".complete"
_STAGING = ".staging-"


def installed(target: Path, stamp: str) -> bool:
    """Whether ``target`` is a complete install marked with ``stamp``."""
    marker = target / COMPLETE
    return marker.is_file() and marker.read_text().strip() == stamp


@contextlib.contextmanager
def staged(target: Path, stamp: str) -> Iterator[Path]:
    """An empty directory to fill for ``target``; when the block ends without an error it is
    marked with ``stamp`` and renamed to ``target`` (replacing a stale or incomplete one).
    Its parent is scratch space for the install, removed at the end."""
    target.parent.mkdir(parents=True, exist_ok=True)
    _remove_abandoned(target)
    prefix = f"{target.name}{_STAGING}{os.getpid()}-"
    scratch = Path(tempfile.mkdtemp(prefix=prefix, dir=target.parent))
    try:
        content = scratch / "content"
        content.mkdir()
        yield content
        (content / COMPLETE).write_text(stamp)
        _publish(content, target, stamp)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _publish(content: Path, target: Path, stamp: str) -> None:
    if installed(target, stamp):
        return  # another process installed it meanwhile
    if target.exists():
        shutil.rmtree(target)
    try:
        content.rename(target)
    except OSError:
        if not installed(target, stamp):  # else: another process's rename came first
            raise


def _remove_abandoned(target: Path) -> None:
    """The staging directories of ``target``'s installs whose process is gone (killed)."""
    for scratch in target.parent.glob(f"{target.name}{_STAGING}*"):
        pid = scratch.name.removeprefix(f"{target.name}{_STAGING}").partition("-")[0]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(scratch, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
