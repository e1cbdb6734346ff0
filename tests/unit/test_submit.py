"""`kafka-archive submit`: the spark-submit command, the package zip, redaction."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from kafka_archive.cli import main, submit

KCQL = "INSERT INTO bkt:a SELECT * FROM orders"


def test_command_runs_the_entry_script_with_the_run_options(tmp_path: Path) -> None:
    spark = submit.SparkOptions(
        master="spark://h:7077", deploy_mode="cluster", conf=(("spark.x", "1"),),
        num_executors=3, executor_memory="2g", archives=("env.tar.gz#env",),
    )  # fmt: skip
    argv = submit.command(spark, ["--kcql", KCQL], tmp_path / "p.zip", {"SPARK_HOME": "/opt/s"})
    assert argv[0] == "/opt/s/bin/spark-submit"
    entry = argv.index(str(Path(submit.__file__).with_name("spark_entry.py")))
    assert argv[entry - 2 : entry] == ["--py-files", str(tmp_path / "p.zip")]
    assert argv[entry + 1 :] == ["--master", "spark://h:7077", "--kcql", KCQL]
    head = argv[:entry]
    for pair in (["--deploy-mode", "cluster"], ["--conf", "spark.x=1"], ["--num-executors", "3"],
                 ["--executor-memory", "2g"], ["--archives", "env.tar.gz#env"]):  # fmt: skip
        i = head.index(pair[0])
        assert head[i : i + 2] == pair


def test_without_spark_home_the_pyspark_spark_submit_is_used() -> None:
    path = submit.spark_submit_path(None, {})
    assert path.endswith("pyspark/bin/spark-submit") and Path(path).exists()


def test_secret_looking_values_are_redacted() -> None:
    shown = submit.render(["x", "--conf", "spark.hadoop.fs.s3a.secret.key=abc", "-X",
                           "sasl.password=pw", "--conf", "spark.executor.memory=2g"])  # fmt: skip
    assert "abc" not in shown and "pw" not in shown
    assert "spark.executor.memory=2g" in shown


def test_the_package_zip_is_built_once_and_importable(tmp_path: Path) -> None:
    first = submit.package_zip(tmp_path)
    assert submit.package_zip(tmp_path) == first
    names = zipfile.ZipFile(first).namelist()
    assert "kafka_archive/cli/commands.py" in names and "kafka_archive/kcql/kcql.lark" in names
    assert not any("__pycache__" in n for n in names)


def test_print_command_shows_the_command_and_submits_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    code = main(["submit", "--master", "yarn", "--print-command", "--kcql", KCQL,
                 "-X", "sasl.password=hunter2"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0
    assert "spark-submit --master yarn" in out and "spark_entry.py" in out
    assert "hunter2" not in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--kcql", "INSERT INTO bkt:a SELECT * FRM t"], "expected FROM"),
        (["--bogus", "1"], "No such option"),
        ([], "--kcql or --config"),
    ],
)
def test_mistakes_are_refused_before_submitting(
    capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    code = main(["submit", "--master", "yarn", "--print-command", *args])
    assert code == 2
    assert message in capsys.readouterr().err
