"""Archives other sinks wrote: Confluent's S3 sink, Lenses' S3 sink, Aiven's connector, Secor.

One module per sink (its naming and format rules, each with the source files they come
from), ``model`` the narrow interface the read side uses (objects by key, records by
object), ``archive`` the listing and reading, ``detect`` the layout told by object names,
and ``commands`` what ``cat``, ``verify``, ``restore`` and ``adopt`` do with them.
"""

from __future__ import annotations

from collections.abc import Mapping

from kafka_archive.archiver.core.errors import ConfigError
from kafka_archive.archiver.read.foreign.aiven import AivenLayout
from kafka_archive.archiver.read.foreign.confluent import ConfluentLayout
from kafka_archive.archiver.read.foreign.lenses import LensesLayout
from kafka_archive.archiver.read.foreign.model import ForeignLayout, Options
from kafka_archive.archiver.read.foreign.secor import SecorLayout

LAYOUTS = ("confluent", "lenses", "aiven", "secor")


def layout_for(name: str, options: Mapping[str, str] | None = None) -> ForeignLayout:
    """The rules of sink ``name`` configured with the connector's ``options``."""
    given = Options(dict(options or {}))
    if name == "confluent":
        return ConfluentLayout(given)
    if name == "lenses":
        return LensesLayout(given)
    if name == "aiven":
        return AivenLayout(given)
    if name == "secor":
        return SecorLayout(given)
    raise ConfigError(
        f"unknown layout {name!r}", hint=f"--layout takes one of {', '.join(LAYOUTS)}"
    )
