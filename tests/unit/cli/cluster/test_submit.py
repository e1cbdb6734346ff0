"""`kafka-archive submit`: the spark-submit command, the package zip, redaction."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from kafka_archive.cli import main
from kafka_archive.cli.cluster import shipping, submit

KCQL = "INSERT INTO bkt:a SELECT * FROM orders"


def test_command_runs_the_entry_script_with_the_run_options(tmp_path: Path) -> None:
    spark = submit.SparkOptions(
        master="spark://h:7077",
        deploy_mode="cluster",
        conf=(("spark.x", "1"),),
        num_executors=3,
        executor_memory="2g",
        archives=("env.tar.gz#env",),
    )
    argv = submit.command(spark, ["--kcql", KCQL], tmp_path / "p.zip", {"SPARK_HOME": "/opt/s"})
    assert argv[0] == "/opt/s/bin/spark-submit"
    entry = argv.index(str(Path(submit.__file__).with_name("entry.py")))
    assert argv[entry - 2 : entry] == ["--py-files", str(tmp_path / "p.zip")]
    assert argv[entry + 1 :] == ["--master", "spark://h:7077", "--kcql", KCQL]
    head = argv[:entry]
    for pair in (
        ["--deploy-mode", "cluster"],
        ["--conf", "spark.x=1"],
        ["--num-executors", "3"],
        ["--executor-memory", "2g"],
        ["--archives", "env.tar.gz#env"],
    ):
        i = head.index(pair[0])
        assert head[i : i + 2] == pair


def test_without_spark_home_the_pyspark_spark_submit_is_used() -> None:
    path = submit.spark_submit_path(None, {})
    assert path.endswith("pyspark/bin/spark-submit") and Path(path).exists()


def test_secret_looking_values_are_redacted() -> None:
    shown = submit.render(
        [
            "x",
            "--conf",
            "spark.hadoop.fs.s3a.secret.key=abc",
            "-X",
            "sasl.password=pw",
            "--conf",
            "spark.executor.memory=2g",
        ]
    )
    assert "abc" not in shown and "pw" not in shown
    assert "spark.executor.memory=2g" in shown


def test_the_package_zip_is_built_once_and_importable(tmp_path: Path) -> None:
    first = shipping.own_package(tmp_path)
    assert shipping.own_package(tmp_path) == first
    names = zipfile.ZipFile(first).namelist()
    assert "kafka_archive/cli/app.py" in names and "kafka_archive/kcql/kcql.lark" in names
    assert not any("__pycache__" in n for n in names)


def test_print_command_shows_the_command_and_submits_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    code = main(
        [
            "submit",
            "--master",
            "yarn",
            "--print-command",
            "--kcql",
            KCQL,
            "-X",
            "sasl.password=hunter2",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "spark-submit --master yarn" in out and "entry.py" in out
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


SCHEMA = '{"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]}'


def test_cluster_mode_ships_the_avro_schema_file_and_the_driver_reads_the_copy(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The schema file exists only where `submit` runs: it goes with `--files`, under the
    name the driver looks for in its working directory, with the local file's bytes."""
    from kafka_archive import kcql
    from kafka_archive.archiver.core.errors import ConfigError
    from kafka_archive.archiver.formats import avsc

    local = tmp_path / "here" / "orders.avsc"
    local.parent.mkdir()
    local.write_text(SCHEMA, encoding="utf-8")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    statement = (
        f"INSERT INTO bkt:a SELECT * FROM orders STOREAS `AVRO` "
        f"PROPERTIES('avro.schema.file'='{local}')"
    )
    code = main(
        [
            "submit",
            "--master",
            "yarn",
            "--deploy-mode",
            "cluster",
            "--print-command",
            "--kcql",
            statement,
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    words = out.split()
    (shipped,) = [Path(p) for p in words[words.index("--files") + 1].split(",")]
    assert shipped.name == avsc.shipped_name(str(local))
    assert shipped.read_text(encoding="utf-8") == SCHEMA

    # The cluster's driver: the file is not at its path there, the shipped copy is in cwd.
    driver = tmp_path / "driver"
    driver.mkdir()
    (driver / shipped.name).write_bytes(shipped.read_bytes())
    local.unlink()
    monkeypatch.chdir(driver)
    assert avsc.load(kcql.parse(statement)) == {0: SCHEMA}
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match="cannot read the Avro schema"):
        avsc.load(kcql.parse(statement))


def test_client_mode_ships_no_files(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    local = tmp_path / "orders.avsc"
    local.write_text(SCHEMA, encoding="utf-8")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    statement = (
        f"INSERT INTO bkt:a SELECT * FROM orders STOREAS `AVRO` "
        f"PROPERTIES('avro.schema.file'='{local}')"
    )
    assert main(["submit", "--master", "yarn", "--print-command", "--kcql", statement]) == 0
    assert "--files" not in capsys.readouterr().out.split()


def test_a_local_master_runs_this_python_unless_one_is_given(tmp_path: Path) -> None:
    """spark-submit takes the python3 on PATH, which lacks our dependencies (a submit with
    --master local[2] from a virtualenv failed: No module named 'confluent_kafka')."""
    import sys

    def confs(master: str, conf: tuple[tuple[str, str], ...] = (), **env: str) -> list[str]:
        spark = submit.SparkOptions(master=master, conf=conf)
        argv = submit.command(spark, ["--kcql", KCQL], tmp_path / "p.zip", env)
        return [argv[i + 1] for i, a in enumerate(argv) if a == "--conf"]

    assert confs("local[2]") == [f"spark.pyspark.python={sys.executable}"]
    assert confs("spark://h:7077") == []
    given = (("spark.pyspark.python", "./env/bin/python"),)
    assert confs("local[*]", given) == ["spark.pyspark.python=./env/bin/python"]
    assert confs("local", PYSPARK_PYTHON="/usr/bin/python3") == []


def test_a_driver_python_without_our_dependencies_is_one_line(tmp_path: Path) -> None:
    """The entry script under a Python that lacks kafka-archive's dependencies (the cluster's
    python3): one line saying so and what to do, exit 2, not an import traceback."""
    import subprocess
    import sys

    import kafka_archive

    src = Path(kafka_archive.__file__).resolve().parents[1]
    entry = src / "kafka_archive" / "cli" / "cluster" / "entry.py"
    done = subprocess.run(
        [sys.executable, "-S", str(entry), "--kcql", KCQL],  # -S: no site-packages
        env={"PYTHONPATH": str(src)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "lacks kafka-archive's dependencies" in done.stderr
