"""One zip of a package directory for everything ``submit`` ships (our package and user
transforms): named by its files' hash, built once, rebuilt when a file changes."""

from __future__ import annotations

import zipfile
from pathlib import Path

from kafka_archive.cli.cluster.shipping import package_zip


def _package(root: Path) -> Path:
    package = root / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "mod.py").write_text("X = 1\n")
    (package / "__pycache__").mkdir()
    (package / "__pycache__" / "mod.cpython-311.pyc").write_bytes(b"\0")
    (package / "sub" / "stale.pyc").write_bytes(b"\0")
    return package


def test_a_package_zip_holds_the_package_under_its_name_without_bytecode(tmp_path: Path) -> None:
    zipped = package_zip(_package(tmp_path), tmp_path / "cache", "transform-pkg")
    assert zipped.parent == tmp_path / "cache" and zipped.name.startswith("transform-pkg-")
    assert sorted(zipfile.ZipFile(zipped).namelist()) == ["pkg/__init__.py", "pkg/sub/mod.py"]
    assert not list((tmp_path / "cache").glob("*.tmp"))


def test_a_package_zip_is_reused_until_a_file_changes(tmp_path: Path) -> None:
    package = _package(tmp_path)
    first = package_zip(package, tmp_path / "cache", "stem")
    mtime = first.stat().st_mtime_ns
    assert package_zip(package, tmp_path / "cache", "stem") == first
    assert first.stat().st_mtime_ns == mtime  # not rewritten
    (package / "sub" / "mod.py").write_text("X = 2\n")
    second = package_zip(package, tmp_path / "cache", "stem")
    assert second != first and second.name.startswith("stem-")
    assert zipfile.ZipFile(second).read("pkg/sub/mod.py") == b"X = 2\n"
