"""``kafka-archive submit``: the same job as ``run``, handed to a Spark cluster by spark-submit.

What reaches the cluster:

- the package itself as a zip (``--py-files``), built once per version and source hash under
  ``~/.cache/kafka-archive/`` (``$XDG_CACHE_HOME`` respected). It holds only our code: the
  cluster's Python must have the dependencies (pyspark, confluent-kafka, boto3, lark,
  fastavro, pyarrow, pyyaml, cramjam) — or pass a packed virtualenv with
  ``--archives env.tar.gz#env --conf spark.pyspark.python=./env/bin/python`` (see README);
- the entry script :mod:`kafka_archive.cli.cluster.entry`, which runs ``kafka-archive run`` with the
  same run options, so driver and executors execute exactly the code path of ``run``.

Nothing secret is put on a command line (``ps``, the Spark UI's ``sun.java.command``, event
logs, YARN/Kubernetes specs all show it): the values of secret-looking ``-X`` properties and
the userinfo of ``--schema-registry-url``/``--endpoint-url`` are moved into an owner-only
(0600) JSON file in a private temporary directory, which the entry script reads and puts back
into the in-process arguments of ``run``; secret-looking ``--conf`` values go into an
owner-only ``--properties-file`` (over ``spark-defaults.conf``), which Spark redacts in its UI
and event log. Both files are removed when spark-submit exits. AWS credentials come from the
standard chain on the driver and executors. ``--print-command`` redacts every secret value.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import kafka_archive
from kafka_archive.archiver.config.secrets import REDACTED, has_userinfo, is_secret, redact_url
from kafka_archive.archiver.core.errors import ConfigError
from kafka_archive.cache import user_cache_dir

SECRETS_FLAG = "--secrets-file"
"""The entry script's own first option: the file of secret run arguments it puts back."""

_URL_FLAGS = ("--schema-registry-url", "--endpoint-url")

ENTRY_SCRIPT = Path(__file__).resolve().with_name("entry.py")
"""The script spark-submit runs (:mod:`.entry`): named by its path, not imported (it imports
the CLI, which imports this module)."""


@dataclass(frozen=True, slots=True)
class SparkOptions:
    """The spark-submit side of ``submit``."""

    master: str
    deploy_mode: str = "client"
    conf: tuple[tuple[str, str], ...] = ()
    num_executors: int | None = None
    executor_memory: str | None = None
    executor_cores: int | None = None
    driver_memory: str | None = None
    archives: tuple[str, ...] = ()
    spark_submit: str | None = None


def spark_submit_path(explicit: str | None, environ: Mapping[str, str]) -> str:
    """``explicit``, else ``$SPARK_HOME/bin/spark-submit``, else the one pyspark ships."""
    if explicit:
        return explicit
    home = environ.get("SPARK_HOME")
    if home:
        return str(Path(home) / "bin" / "spark-submit")
    import pyspark

    return str(Path(pyspark.__file__).parent / "bin" / "spark-submit")


def package_zip(cache_dir: Path) -> Path:
    """The zip of the ``kafka_archive`` package, reused while version and sources match."""
    root = Path(kafka_archive.__file__).resolve().parent
    files = sorted(
        p
        for p in root.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    )
    digest = hashlib.sha256()
    for path in files:
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    name = f"kafka_archive-{kafka_archive.__version__}-{digest.hexdigest()[:12]}.zip"
    target = cache_dir / name
    if target.exists():
        return target
    cache_dir.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(f".{os.getpid()}.tmp")
    with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in files:
            archive.write(path, str(Path("kafka_archive") / path.relative_to(root)))
    partial.replace(target)  # atomic: a concurrent submit sees a whole zip or none
    return target


def cache_dir(environ: Mapping[str, str]) -> Path:
    return user_cache_dir(environ)


@dataclass(frozen=True, slots=True)
class Secrets:
    """What ``submit`` keeps off the command line: ``run`` arguments and Spark properties."""

    run_args: tuple[str, ...] = ()
    spark_conf: tuple[tuple[str, str], ...] = field(default=())

    def __bool__(self) -> bool:
        return bool(self.run_args or self.spark_conf)


def split_secrets(run_args: Sequence[str]) -> tuple[list[str], tuple[str, ...]]:
    """``run_args`` without secret ``-X KEY=VALUE`` properties and URLs with userinfo, and
    those arguments apart (as ``run`` takes them)."""
    public: list[str] = []
    secret: list[str] = []
    args = list(run_args)
    i = 0
    while i < len(args):
        arg = args[i]
        option, value = arg, None
        if arg.startswith("-X") and arg != "-X":
            option, value = "-X", arg[2:]
        elif arg.startswith("--") and "=" in arg:
            option, _, value = arg.partition("=")
        elif (arg == "-X" or arg in _URL_FLAGS) and i + 1 < len(args):
            value = args[i + 1]
            i += 1
        if value is not None and _is_secret_arg(option, value):
            secret += [option, value]
        elif value is not None and option != arg:
            public.append(arg)
        elif value is not None:
            public += [option, value]
        else:
            public.append(arg)
        i += 1
    return public, tuple(secret)


def _is_secret_arg(option: str, value: str) -> bool:
    if option == "-X":
        return is_secret(value.partition("=")[0].strip())
    return option in _URL_FLAGS and has_userinfo(value)


def write_secrets(directory: Path, secrets: Secrets) -> tuple[Path | None, Path | None]:
    """The owner-only secrets file of the entry script and the Spark properties file (each
    None when there is nothing to put in it)."""
    args_file = props_file = None
    if secrets.run_args:
        args_file = directory / "kafka-archive-secrets.json"
        _write_private(args_file, json.dumps({"run_args": list(secrets.run_args)}))
    if secrets.spark_conf:
        props_file = directory / "spark-secrets.conf"
        defaults = _spark_defaults(os.environ)
        lines = [defaults.read_text(encoding="utf-8")] if defaults is not None else []
        lines += [f"{key} {value}" for key, value in secrets.spark_conf]
        _write_private(props_file, "\n".join(lines) + "\n")
    return args_file, props_file


def _spark_defaults(environ: Mapping[str, str]) -> Path | None:
    """The spark-defaults.conf spark-submit would read without --properties-file."""
    conf_dir = environ.get("SPARK_CONF_DIR") or (
        str(Path(environ["SPARK_HOME"]) / "conf") if environ.get("SPARK_HOME") else None
    )
    if conf_dir is None:
        return None
    path = Path(conf_dir) / "spark-defaults.conf"
    return path if path.is_file() else None


def _write_private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(text)


def read_secrets(path: str) -> list[str]:
    """The run arguments in a secrets file ``submit`` wrote. In cluster mode the file was
    shipped with ``--files`` and sits, by its name, in the driver's working directory."""
    candidate = Path(path)
    if not candidate.exists() and Path(candidate.name).exists():
        candidate = Path(candidate.name)
    try:
        data = json.loads(candidate.read_text(encoding="utf-8"))
        args = data["run_args"]
    except (OSError, ValueError, KeyError, TypeError):
        raise ConfigError(
            f"cannot read the secrets file {path} that kafka-archive submit wrote",
            hint="It is removed when spark-submit exits; a driver started later (a retried "
            "attempt) cannot read it. Submit again",
        ) from None
    if not (isinstance(args, list) and all(isinstance(a, str) for a in args)):
        raise ConfigError(f"the secrets file {path} is not one kafka-archive submit wrote")
    return args


@contextlib.contextmanager
def private_files(
    spark: SparkOptions,
    run_args: Sequence[str],
    py_files: Path,
    environ: Mapping[str, str],
    extra_py_files: Sequence[Path] = (),
    files: Sequence[Path] = (),
) -> Iterator[list[str]]:
    """The spark-submit command whose secrets are in owner-only files, removed on exit."""
    public, secret_args = split_secrets(run_args)
    public_conf = tuple((k, v) for k, v in spark.conf if not is_secret(k))
    secrets = Secrets(secret_args, tuple((k, v) for k, v in spark.conf if is_secret(k)))
    if not secrets:
        yield command(spark, run_args, py_files, environ, extra_py_files, files=files)
        return
    with tempfile.TemporaryDirectory(prefix="kafka-archive-submit-") as directory:
        os.chmod(directory, 0o700)
        args_file, props_file = write_secrets(Path(directory), secrets)
        yield command(
            dataclasses.replace(spark, conf=public_conf),
            public,
            py_files,
            environ,
            extra_py_files,
            secrets_file=args_file,
            properties_file=props_file,
            files=files,
        )


_PYTHONS = frozenset({"spark.pyspark.python", "spark.pyspark.driver.python"})
_PYTHONS_ENV = frozenset({"PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON"})


def command(
    spark: SparkOptions,
    run_args: Sequence[str],
    py_files: Path,
    environ: Mapping[str, str],
    extra_py_files: Sequence[Path] = (),
    *,
    secrets_file: Path | None = None,
    properties_file: Path | None = None,
    files: Sequence[Path] = (),
) -> list[str]:
    """The spark-submit command line that runs ``kafka-archive run <run_args>`` on Spark;
    in cluster mode ``files`` (and the secrets file) go with it (``--files``), into the
    driver's working directory."""
    argv = [
        spark_submit_path(spark.spark_submit, environ),
        "--master",
        spark.master,
        "--deploy-mode",
        spark.deploy_mode,
        "--name",
        "kafka-archive",
    ]
    if properties_file is not None:
        argv += ["--properties-file", str(properties_file)]
    for key, value in spark.conf:
        argv += ["--conf", f"{key}={value}"]
    given = {key for key, _ in spark.conf}
    if (
        spark.master.startswith("local")
        and not given & _PYTHONS
        and not _PYTHONS_ENV & set(environ)
    ):
        # A local master runs the driver and workers here: with this Python, which has our
        # dependencies (spark-submit would take the python3 on PATH).
        argv += ["--conf", f"spark.pyspark.python={sys.executable}"]
    sizes: tuple[tuple[str, str | int | None], ...] = (
        ("--num-executors", spark.num_executors),
        ("--executor-memory", spark.executor_memory),
        ("--executor-cores", spark.executor_cores),
        ("--driver-memory", spark.driver_memory),
    )
    for flag, size in sizes:
        if size is not None:
            argv += [flag, str(size)]
    if spark.archives:
        argv += ["--archives", ",".join(spark.archives)]
    shipped_files = [*files, *([secrets_file] if secrets_file is not None else [])]
    if shipped_files and spark.deploy_mode == "cluster":  # the driver runs elsewhere
        argv += ["--files", ",".join(str(p) for p in shipped_files)]
    shipped = ",".join(str(p) for p in (py_files, *extra_py_files))  # + user transforms
    argv += ["--py-files", shipped, str(ENTRY_SCRIPT)]
    if secrets_file is not None:
        argv += [SECRETS_FLAG, str(secrets_file)]
    return [*argv, "--master", spark.master, *run_args]


def redacted(argv: Sequence[str]) -> list[str]:
    """``argv`` with the value of every secret-looking ``key=value`` and the password of
    every URL replaced."""
    out = []
    for arg in argv:
        key, sep, value = arg.partition("=")
        if sep and is_secret(key.removeprefix("-X")):
            out.append(f"{key}={REDACTED}")
        elif sep and key.startswith("--") and "://" in value:
            out.append(f"{key}={redact_url(value)}")
        else:
            out.append(redact_url(arg) if "://" in arg else arg)
    return out


def render(argv: Sequence[str]) -> str:
    return " ".join(shlex.quote(a) for a in redacted(argv))


def submit(argv: Sequence[str]) -> int:
    """Run spark-submit; its exit status is the job's."""
    if shutil.which(argv[0]) is None and not Path(argv[0]).exists():
        raise ConfigError(
            f"spark-submit not found at {argv[0]}",
            hint="Set SPARK_HOME, or pass --spark-submit PATH",
        )
    return subprocess.call(list(argv))
