"""What ``submit`` ships to the cluster besides the command: our package and the routes' own
files, user transforms (``--py-files``) and Avro schema files (``--files``).

A package directory, ours or a transform's, goes as a zip built under the cache directory,
named by the hash of its files: reused while they match, rebuilt when one changes
(:func:`package_zip`, the one builder of both). The driver has imported every transform
already (``api.compile_plan``); its top-level module goes as it is (a ``.py`` file), a
top-level package as such a zip.
Each ``avro.schema.file`` (read and checked by ``api.compile_plan`` too) goes as a copy
under the cache directory named by :func:`avsc.shipped_name`, which the driver looks for.
"""

from __future__ import annotations

import hashlib
import os
import zipfile
from pathlib import Path

import kafka_archive
from kafka_archive.archiver.formats import avsc
from kafka_archive.archiver.write import transforms
from kafka_archive.kcql.plan import Plan


def transform_files(plan: Plan, cache_dir: Path) -> tuple[Path, ...]:
    """The ``--py-files`` entries for the plan's transforms, each once, in route order."""
    out: list[Path] = []
    for route in plan.routes:
        if route.transform is None:
            continue
        path = transforms.shipped_path(route.transform)
        if path is None:
            continue
        shipped = package_zip(path, cache_dir, f"transform-{path.name}") if path.is_dir() else path
        if shipped not in out:
            out.append(shipped)
    return tuple(out)


def schema_files(plan: Plan, cache_dir: Path) -> tuple[Path, ...]:
    """The ``--files`` entries for the plan's Avro schema files, each once: a copy of the
    local file under the name a cluster-mode driver looks for (``avsc.shipped_name``)."""
    out: list[Path] = []
    for route in plan.routes:
        path = route.avro_schema_file
        if path is None:
            continue
        target = cache_dir / avsc.shipped_name(path)
        if target in out:
            continue
        cache_dir.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(f".{os.getpid()}.tmp")
        partial.write_bytes(Path(path).expanduser().read_bytes())
        partial.replace(target)
        out.append(target)
    return tuple(out)


def own_package(cache_dir: Path) -> Path:
    """The zip of the ``kafka_archive`` package, reused while version and sources match."""
    root = Path(kafka_archive.__file__).resolve().parent
    return package_zip(root, cache_dir, f"kafka_archive-{kafka_archive.__version__}")


def package_zip(package: Path, cache_dir: Path, stem: str) -> Path:
    """A zip holding the package directory ``package`` (under its own name, without
    bytecode): ``<stem>-<hash of its files>.zip`` in ``cache_dir``, written once."""
    files = sorted(
        p
        for p in package.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    )
    digest = hashlib.sha256()
    for path in files:
        digest.update(str(path.relative_to(package)).encode())
        digest.update(path.read_bytes())
    target = cache_dir / f"{stem}-{digest.hexdigest()[:12]}.zip"
    if target.exists():
        return target
    cache_dir.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(f".{os.getpid()}.tmp")
    with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in files:
            archive.write(path, str(Path(package.name) / path.relative_to(package)))
    partial.replace(target)  # atomic: a concurrent submit sees a whole zip or none
    return target
