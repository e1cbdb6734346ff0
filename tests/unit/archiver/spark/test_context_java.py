"""Before Spark starts on a local master, kafka-archive finds the java its launcher runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafka_archive.archiver.core.errors import SparkStartError
from kafka_archive.archiver.spark.context import find_java


def _java(directory: Path) -> Path:
    directory.mkdir(parents=True)
    java = directory / "java"
    java.write_text("#!/bin/sh\nexit 0\n")
    java.chmod(0o755)
    return java


def test_java_home_wins_over_path(tmp_path: Path) -> None:
    home_java = _java(tmp_path / "jdk" / "bin")
    _java(tmp_path / "bin")
    environ = {"JAVA_HOME": str(tmp_path / "jdk"), "PATH": str(tmp_path / "bin")}
    assert find_java(environ) == str(home_java)


def test_a_java_home_without_java_is_named(tmp_path: Path) -> None:
    with pytest.raises(SparkStartError, match=r"JAVA_HOME is .* no bin/java") as caught:
        find_java({"JAVA_HOME": str(tmp_path), "PATH": "/usr/bin"})
    assert caught.value.exit_code == 15


def test_without_java_home_java_comes_from_path(tmp_path: Path) -> None:
    java = _java(tmp_path / "bin")
    assert find_java({"PATH": str(tmp_path / "bin")}) == str(java)
    with pytest.raises(SparkStartError, match="no java on PATH") as caught:
        find_java({"PATH": str(tmp_path / "empty")})
    assert "Java 17" in (caught.value.hint or "")
