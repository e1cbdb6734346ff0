"""The ``kafka-archive`` group and ``main``: logging set up from the group's options, every
command of :mod:`kafka_archive.cli.commands` registered, and every error family mapped to one
line on stderr and an exit code (a traceback only with ``--debug``).

``cli`` is the click group (every command and option, as click declares them); ``main`` runs
it and returns the exit code instead of raising.
"""

from __future__ import annotations

import logging
import sys
import traceback
from collections.abc import Sequence

import click

from kafka_archive import __version__, kcql
from kafka_archive.archiver.config.secrets import scrub
from kafka_archive.archiver.core.errors import ArchiveError, kafka_client_error
from kafka_archive.archiver.spark.context import error_text, task_failure
from kafka_archive.cli.commands.archive import plan_command, run, validate
from kafka_archive.cli.commands.cluster import submit
from kafka_archive.cli.commands.connector import import_connector
from kafka_archive.cli.commands.foreign import adopt
from kafka_archive.cli.commands.inspect import cat_command, status, verify
from kafka_archive.cli.commands.maintenance import compact, erase, expire, export_states
from kafka_archive.cli.commands.restore import restore
from kafka_archive.cli.invocation import CurrentStderr, Invocation, JsonFormatter, json_requested

EXIT_USAGE = 2
EXIT_INTERNAL = 1


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="kafka-archive")
@click.option("--debug", is_flag=True, help="Show tracebacks and debug logs.")
@click.option("--quiet", is_flag=True, help="Only warnings and errors on stderr.")
@click.option(
    "--log-format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="json: one JSON object per log line, for log shippers.",
)
@click.pass_context
def cli(ctx: click.Context, debug: bool, quiet: bool, log_format: str) -> None:
    """Archive Kafka topics into S3 exactly once, driven by KCQL, run on Spark."""
    here = ctx.ensure_object(Invocation)
    here.live = not quiet and log_format == "text"
    here.json_lines = log_format == "json"
    _configure_logging(debug, quiet, log_format)


for _command in (
    validate,
    plan_command,
    run,
    status,
    verify,
    cat_command,
    restore,
    compact,
    erase,
    expire,
    export_states,
    submit,
    import_connector,
    adopt,
):
    cli.add_command(_command)


def _configure_logging(debug: bool, quiet: bool, log_format: str) -> None:
    """The root logger: one handler on stderr, text or JSON lines, at the chosen level."""
    handler = logging.StreamHandler(CurrentStderr())
    text = logging.Formatter("kafka-archive: %(message)s")
    handler.setFormatter(JsonFormatter() if log_format == "json" else text)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if debug else logging.WARNING if quiet else logging.INFO)
    for noisy in ("botocore", "boto3", "urllib3", "s3transfer", "py4j"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    # The driver's librdkafka lines: a refused connection logs one every 50 ms.
    logging.getLogger("kafka_archive.librdkafka").setLevel(
        logging.DEBUG if debug else logging.CRITICAL
    )
    if not debug:
        # py4j logs a failed call with its traceback (on the root logger), then raises it to
        # us: we report it, in one line.
        handler.addFilter(lambda record: "/py4j/" not in record.pathname.replace("\\", "/"))


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code instead of raising (tests call this directly)."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
    here = Invocation(json_lines=json_requested(args))
    try:
        # Without standalone mode click returns (not raises) the code of an Exit.
        code = cli.main(args=args, prog_name="kafka-archive", standalone_mode=False, obj=here)
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except click.ClickException as exc:
        if not here.json_lines:
            exc.show()
        else:
            here.say(f"error: {exc.format_message()}", logging.ERROR, exc.exit_code)
        return exc.exit_code
    except click.Abort:
        here.say("aborted", logging.ERROR, 130)
        return 130
    except kcql.KcqlError as exc:
        if debug:
            _print_traceback()
        if here.json_lines:
            here.say(exc.render(), logging.ERROR, EXIT_USAGE)
        else:
            click.echo(exc.render(), err=True)
        return EXIT_USAGE
    except ArchiveError as exc:
        return _failed(here, exc, debug)
    except KeyboardInterrupt:
        here.say("interrupted", logging.ERROR, 130)
        return 130
    except Exception as exc:
        return _unexpected(here, exc, debug)
    return code if isinstance(code, int) else 0


def _unexpected(here: Invocation, exc: Exception, debug: bool) -> int:
    """An error of a library (Spark's, Kafka's) that is ours in disguise, else an internal
    error: one line either way."""
    ours = task_failure(exc) or (
        kafka_client_error(exc) if type(exc).__name__ == "KafkaException" else None
    )
    if ours is not None:
        return _failed(here, ours, debug)
    if debug:
        _print_traceback()
    here.say(
        scrub(
            f"internal error: {type(exc).__name__}: {error_text(exc)} "
            "(run again with --debug for a traceback, and please report it)"
        ),
        logging.ERROR,
        EXIT_INTERNAL,
    )
    return EXIT_INTERNAL


def _print_traceback() -> None:
    """--debug: the traceback, with any secret value a message quotes replaced."""
    click.echo(scrub(traceback.format_exc()), err=True, nl=False)


def _failed(here: Invocation, exc: ArchiveError, debug: bool) -> int:
    """One line on stderr (after the summary of what a failed run did commit:
    ``commands.archive._summarized``); secrets scrubbed."""
    if debug:
        _print_traceback()
    here.say(scrub(f"error: {exc}"), logging.ERROR, exc.exit_code)
    return exc.exit_code
