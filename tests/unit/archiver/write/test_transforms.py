"""User transforms without Spark: loading (fail fast), the contract checks, a raising
transform isolated record by record, the determinism probe, and what `submit` ships."""

from __future__ import annotations

import dataclasses
import textwrap
import zipfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_archive.archiver.core.errors import ConfigError, TransformError
from kafka_archive.archiver.core.model import TopicPartition
from kafka_archive.archiver.core.record import Record
from kafka_archive.archiver.write import transforms
from kafka_archive.cli import main

TP = TopicPartition("orders", 3)

MODULE = """
import dataclasses
import itertools

_calls = itertools.count()
NOT_A_FUNCTION = 42


def upper(records):
    return [dataclasses.replace(r, value=r.value.upper()) for r in records if r.value != b"drop"]


def boom_on_bad(records):
    if any(r.value == b"bad" for r in records):
        raise ValueError("secret payload " + repr([r.value for r in records]))
    return records


def returns_none(records):
    return None


def returns_strings(records):
    return ["x" for _ in records]


def renumbers(records):
    return [dataclasses.replace(r, offset=r.offset + 1000) for r in records]


def reverses(records):
    return list(reversed(records))


def stamps_a_counter(records):
    n = next(_calls)
    return [dataclasses.replace(r, key=str(n).encode()) for r in records]
"""


def records(*values: bytes) -> list[Record]:
    return [Record("orders", 3, 10 + i, 1000 + i, None, v) for i, v in enumerate(values)]


@pytest.fixture
def module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh transform module on sys.path; returns its name."""
    name = f"tmod_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(MODULE))
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


def test_a_transform_changes_and_drops_records(module: str) -> None:
    out = transforms.Transformer(f"{module}:upper", None, TP).apply(records(b"a", b"drop", b"c"))
    assert [(r.offset, r.value) for r in out] == [(10, b"A"), (12, b"C")]
    assert out.offsets() == [10, 12] and out.values() == [b"A", b"C"]
    assert out.timestamps() == [1000, 1002] and not out.refused


def test_a_raising_transform_refuses_only_the_records_it_raises_on(module: str) -> None:
    out = transforms.Transformer(f"{module}:boom_on_bad", None, TP).apply(
        records(b"a", b"bad", b"c")
    )
    assert [r.value for r in out] == [b"a", b"bad", b"c"]  # the refused one stays in place
    assert list(out.refused) == [11]
    message = out.refused[11]
    assert message.startswith(f"the transform {module}:boom_on_bad raised ValueError at ")
    assert "secret" not in message  # the exception's text may hold payload: never shown
    with pytest.raises(transforms.RefusedByTransform):
        out.check(out.records()[1])
    out.check(out.records()[0])


@pytest.mark.parametrize(
    ("function", "message"),
    [
        ("returns_none", "returned None"),
        ("returns_strings", "returned a str"),
        ("renumbers", "not one of its batch"),
        ("reverses", "out of offset order"),
    ],
)
def test_a_transform_that_breaks_the_contract_stops_the_unit(
    module: str, function: str, message: str
) -> None:
    transformer = transforms.Transformer(f"{module}:{function}", None, TP)
    with pytest.raises(TransformError, match=message) as info:
        transformer.apply(records(b"a", b"b"))
    assert info.value.exit_code == 22
    assert info.value.tp == TP and info.value.offset == 10


def test_a_transform_that_is_not_deterministic_is_caught_on_the_first_batch(module: str) -> None:
    transformer = transforms.Transformer(f"{module}:stamps_a_counter", None, TP)
    with pytest.raises(TransformError, match="not deterministic") as info:
        transformer.apply(records(b"a", b"b"))
    assert info.value.offset == 10


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("no_such_module_xyz:f", "transform module 'no_such_module_xyz' not found"),
        ("{module}:missing", "has no missing"),
        ("{module}:NOT_A_FUNCTION", "is a int, not a function"),
    ],
)
def test_a_bad_transform_is_refused_when_loaded(module: str, spec: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        transforms.load(spec.format(module=module))


def test_a_module_is_imported_from_the_root_the_driver_found_it_in(tmp_path: Path) -> None:
    (tmp_path / "rooted_transform_mod.py").write_text("def f(records):\n    return records\n")
    with pytest.raises(ConfigError):
        transforms.load("rooted_transform_mod:f")
    function = transforms.load("rooted_transform_mod:f", str(tmp_path))
    assert function(records(b"a")) == records(b"a")


def test_a_module_that_raises_when_imported_is_one_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "raising_import_mod.py").write_text("import no_such_dependency_xyz\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigError, match="importing raising_import_mod raised ModuleNotFound"):
        transforms.load("raising_import_mod:f")


def test_run_refuses_a_bad_transform_before_reading_kafka(
    capsys: pytest.CaptureFixture[str],
) -> None:
    kcql = "INSERT INTO bkt SELECT * FROM t PROPERTIES('transform'='no_such_module_xyz:f')"
    # Nothing listens on port 9: reaching Kafka would fail with exit 3, not 2.
    code = main(
        [
            "run",
            "--kcql",
            kcql,
            "--bootstrap-servers",
            "127.0.0.1:9",
            "--endpoint-url",
            "http://127.0.0.1:9",
        ]
    )
    err = capsys.readouterr().err
    assert code == 2, err
    assert "transform module 'no_such_module_xyz' not found" in err.splitlines()[0]
    assert "Traceback" not in err


def test_submit_ships_the_transform_module(
    module: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    kcql = f"INSERT INTO bkt SELECT * FROM t PROPERTIES('transform'='{module}:upper')"
    assert main(["submit", "--master", "yarn", "--print-command", "--kcql", kcql]) == 0
    out = capsys.readouterr().out
    py_files = out.split("--py-files ")[1].split()[0].split(",")
    assert py_files[1] == str(tmp_path / f"{module}.py")


def test_a_transform_package_is_shipped_as_a_zip(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "src" / "shipped_pkg_xyz"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "rules.py").write_text("def f(records):\n    return records\n")
    monkeypatch.syspath_prepend(str(tmp_path / "src"))
    transforms.load("shipped_pkg_xyz.sub.rules:f")
    from kafka_archive import kcql
    from kafka_archive.cli.cluster import shipping

    plan = kcql.parse(
        "INSERT INTO bkt SELECT * FROM t PROPERTIES('transform'='shipped_pkg_xyz.sub.rules:f')"
    )
    (zipped,) = shipping.transform_files(plan, tmp_path / "cache")
    assert sorted(zipfile.ZipFile(zipped).namelist()) == [
        "shipped_pkg_xyz/__init__.py",
        "shipped_pkg_xyz/sub/__init__.py",
        "shipped_pkg_xyz/sub/rules.py",
    ]
    assert transforms.source_root("shipped_pkg_xyz.sub.rules:f") == tmp_path / "src"


def test_the_sample_drops_pii_fields_headers_and_test_records() -> None:
    import importlib.util

    path = Path(__file__).parents[4] / "samples" / "transforms" / "pii.py"
    spec = importlib.util.spec_from_file_location("sample_pii", path)
    assert spec is not None and spec.loader is not None
    sample = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sample)
    batch = [
        dataclasses.replace(r, headers=(("x-user-email", b"a@b"), ("trace", b"1")))
        for r in records(
            b'{"id":1,"email":"a@b","user":{"phone":"1","name":"n"},"items":[{"ssn":"x"}]}',
            b'{"id":2,"test":true}',
            b"not json",
            b"[1]",
        )
    ]
    out = sample.drop_pii(batch)
    assert [r.offset for r in out] == [10, 12, 13]
    assert out[0].value == b'{"id":1,"user":{"name":"n"},"items":[{}]}'
    assert out[1].value == b"not json" and out[2].value == b"[1]"
    assert all(r.headers == (("trace", b"1"),) for r in out)


@st.composite
def batches_and_choices(draw: st.DrawFn) -> tuple[list[Record], list[bool], list[bytes | None]]:
    n = draw(st.integers(1, 30))
    start = draw(st.integers(0, 10**6))
    offsets = sorted(draw(st.sets(st.integers(start, start + 100), min_size=n, max_size=n)))
    batch = [Record("orders", 3, o, None, None, draw(st.binary(max_size=5))) for o in offsets]
    keep = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    values = draw(st.lists(st.none() | st.binary(max_size=5), min_size=n, max_size=n))
    return batch, keep, values


@given(batches_and_choices())
def test_whatever_a_transform_keeps_or_changes_is_stored_as_it_returned_it(
    case: tuple[list[Record], list[bool], list[bytes | None]],
) -> None:
    batch, keep, values = case
    picks = zip(batch, keep, values, strict=True)
    chosen = [dataclasses.replace(r, value=v) for r, k, v in picks if k]
    transformer = transforms.Transformer("t:f", None, TP, lambda records: list(chosen))
    out = transformer.apply(batch)
    assert out.records() == chosen and not out.refused
    assert out.offsets() == [r.offset for r in chosen]
    if len(chosen) > 1:  # the same records out of order, or one offset twice: refused
        for broken in (chosen[::-1], [chosen[0], *chosen]):
            transformer = transforms.Transformer("t:f", None, TP, lambda _, b=broken: list(b))
            with pytest.raises(TransformError):
                transformer.apply(batch)
