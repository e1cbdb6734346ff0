"""Spark's failures as one line: the JVM gone under the driver, whose py4j errors cannot even
be printed any more."""

from __future__ import annotations

import socket
import types

import pytest
from py4j.java_gateway import GatewayClient, GatewayParameters
from py4j.protocol import Py4JJavaError

from kafka_archive.archiver.core.errors import SparkTaskError
from kafka_archive.archiver.spark.context import error_text, jvm_stopped, stop_spark, task_failure


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def _error_from_a_gone_jvm() -> Py4JJavaError:
    """What a call made as the JVM exits raises: the JVM answered with an exception, then went;
    py4j fetches the exception's text from the JVM when it is printed."""
    client = GatewayClient(
        gateway_parameters=GatewayParameters(address="127.0.0.1", port=_closed_port())
    )
    java_exception = types.SimpleNamespace(_target_id="o13", _gateway_client=client)
    return Py4JJavaError(
        "An error occurred while calling o12.defaultParallelism.\n", java_exception
    )


def test_printing_a_py4j_error_of_a_gone_jvm_raises_and_error_text_says_none() -> None:
    error = _error_from_a_gone_jvm()
    with pytest.raises(Exception, match="connect to the Java server"):
        str(error)
    assert error_text(error) is None


def test_a_py4j_error_whose_text_the_gone_jvm_cannot_give_is_the_jvm_stopped() -> None:
    stopped = jvm_stopped(_error_from_a_gone_jvm())
    assert isinstance(stopped, SparkTaskError)
    assert "Spark's JVM stopped" in str(stopped)
    failure = task_failure(_error_from_a_gone_jvm())
    assert failure is not None and "Spark's JVM stopped" in str(failure)


def test_stopping_a_context_whose_jvm_is_gone_is_quiet_and_forgets_it(
    recwarn: pytest.WarningsRecorder,
) -> None:
    """A signal to the whole process group stops Spark's JVM first: the session that ends
    after it (a follow run between batches) stops a context whose JVM no longer answers,
    which must neither raise (exit 21 for a clean stop) nor warn; a later context is new."""
    from py4j.clientserver import JavaClient, JavaParameters, PythonParameters
    from py4j.java_gateway import GatewayProperty, JavaObject
    from pyspark import SparkContext

    client = JavaClient(
        JavaParameters(address="127.0.0.1", port=_closed_port()),
        PythonParameters(),
        gateway_property=GatewayProperty(auto_field=False, pool=None),
    )
    client.converters = []
    context = SparkContext.__new__(SparkContext)
    context._jsc = JavaObject("o1", client)
    context._gateway = types.SimpleNamespace(proc=None)
    context._accumulatorServer = None
    with pytest.raises(ConnectionRefusedError):  # what the stop meets: no JVM to connect to
        JavaObject("o2", client).stop()
    SparkContext._active_spark_context = context
    try:
        stop_spark(context)
        assert SparkContext._active_spark_context is None
        assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]
    finally:
        SparkContext._active_spark_context = None


def test_a_printable_error_unrelated_to_spark_is_not_taken_for_it() -> None:
    assert jvm_stopped(ValueError("Answer from Java side is empty")) is None
    assert task_failure(RuntimeError("boom")) is None


def test_the_cli_turns_a_gone_jvm_error_into_one_line_and_exit_21(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from kafka_archive.cli import app

    def fail(*_: object, **__: object) -> None:
        raise _error_from_a_gone_jvm()

    monkeypatch.setattr(app.cli, "main", fail)
    code = app.main(["run"])
    err = capsys.readouterr().err
    assert code == 21, err
    assert "Traceback" not in err and "internal error" not in err
    assert err.strip().count("\n") == 0 and "Spark's JVM stopped" in err


def test_an_unprintable_unknown_error_is_still_one_internal_error_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from kafka_archive.cli import app

    class Unprintable(Exception):
        def __str__(self) -> str:
            raise OSError("cannot")

    def fail(*_: object, **__: object) -> None:
        raise Unprintable()

    monkeypatch.setattr(app.cli, "main", fail)
    code = app.main(["run"])
    err = capsys.readouterr().err
    assert code == app.EXIT_INTERNAL, err
    assert "Traceback" not in err and err.startswith("kafka-archive: internal error: Unprintable")
