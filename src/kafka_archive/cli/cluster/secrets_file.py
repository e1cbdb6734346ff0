"""What ``submit`` keeps off the command line, and how the entry script gets it back.

The values of secret-looking ``-X`` properties and the userinfo of
``--schema-registry-url``/``--endpoint-url`` go into an owner-only (0600) JSON file, named on
the entry script's command line after :data:`SECRETS_FLAG`; the entry script puts them back
into the in-process arguments of ``run`` (:func:`run_args`). Secret-looking ``--conf`` values
go into an owner-only Spark ``--properties-file`` (over ``spark-defaults.conf``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kafka_archive.archiver.config.secrets import has_userinfo, is_secret
from kafka_archive.archiver.core.errors import ConfigError

SECRETS_FLAG = "--secrets-file"
"""The entry script's own first option: the file of secret run arguments it puts back."""

_URL_FLAGS = ("--schema-registry-url", "--endpoint-url")


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


def run_args(argv: Sequence[str]) -> list[str]:
    """``run``'s arguments: ``argv`` with the secrets file's arguments put back."""
    args = list(argv)
    if len(args) >= 2 and args[0] == SECRETS_FLAG:
        return [*args[2:], *read_secrets(args[1])]
    return args
