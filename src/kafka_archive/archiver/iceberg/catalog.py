"""The Iceberg catalog: opened as pyiceberg users configure it (``.pyiceberg.yaml``,
``PYICEBERG_CATALOG__<NAME>__*``), the archiver's S3 settings and credentials filling in the
FileIO properties its configuration does not state (passed in-process, never on a command
line), opened again when botocore renews the credentials; its errors one line, scrubbed of
the secret values of its properties."""

from __future__ import annotations

import contextlib
import logging
import urllib.parse
from collections.abc import Iterator, Mapping
from typing import Any

import botocore.session

from kafka_archive.archiver.config.secrets import has_userinfo, is_secret, remember, scrub
from kafka_archive.archiver.config.settings import S3Settings
from kafka_archive.archiver.core.errors import ArchiveError, CatalogError, ConfigError
from kafka_archive.archiver.store.client import credentials

# The package's logger, as before its split (`--log-format json` prints its name).
log = logging.getLogger("kafka_archive.archiver.iceberg")


def s3_properties(s3: S3Settings, frozen: Any = None) -> dict[str, str]:
    """pyiceberg FileIO properties from the archiver's S3 settings (the credentials:
    ``frozen``, else those of the chain now)."""
    props: dict[str, str] = {}
    if s3.endpoint_url:
        props["s3.endpoint"] = s3.endpoint_url
    region = s3.region or botocore.session.Session().get_config_variable("region")
    if region:
        props["s3.region"] = region
    if s3.addressing_style == "virtual":
        props["s3.force-virtual-addressing"] = "true"
    if s3.sse in ("AES256", "aws:kms"):
        props["s3.server-side-encryption"] = s3.sse
        if s3.sse_kms_key_id:
            props["s3.sse-kms-key-id"] = s3.sse_kms_key_id
    if frozen is None:
        found = credentials(s3)
        frozen = None if found is None else found.get_frozen_credentials()
    if frozen is not None:
        props["s3.access-key-id"] = frozen.access_key
        props["s3.secret-access-key"] = frozen.secret_key
        if frozen.token:
            props["s3.session-token"] = frozen.token
    return props


def secret_values(properties: Mapping[str, Any]) -> list[str]:
    """The values of the catalog properties that are secret (:mod:`.config.secrets`):
    keys, tokens, credentials, and the password of a URL (``postgresql://u:pw@host``)."""
    values: list[str] = []
    for key, value in properties.items():
        if not isinstance(value, str) or not value:
            continue
        if is_secret(key):
            values.append(value)
        elif has_userinfo(value):
            with contextlib.suppress(ValueError):
                password = urllib.parse.urlsplit(value).password
                if password:
                    values += [password, urllib.parse.unquote(password)]
    return values


def remember_secrets(properties: Mapping[str, Any]) -> None:
    """Note the secret values of catalog ``properties``: scrubbed from every message
    (:func:`kafka_archive.archiver.config.secrets.scrub`), ours and the CLI's."""
    remember(secret_values(properties))


@contextlib.contextmanager
def catalog_errors(what: str) -> Iterator[None]:
    """pyiceberg's and its drivers' errors as one line that says what failed, without the
    secret values of the catalog's properties (its errors may quote them: an unknown
    catalog type echoes every property, an unknown URI scheme the URI)."""
    try:
        yield
    except ArchiveError:
        raise
    except Exception as exc:
        raise CatalogError(
            scrub(f"the Iceberg catalog could not {what}: {type(exc).__name__}: {_line(exc)}"),
            hint="Check the catalog's configuration (.pyiceberg.yaml or "
            "PYICEBERG_CATALOG__<NAME>__* variables) and that it is reachable",
        ) from exc


def _line(exc: BaseException) -> str:
    """An exception's message on one line (drivers' messages may span several)."""
    return " ".join(str(exc).split())


def load_catalog(name: str, s3: S3Settings, frozen: Any = None) -> Any:
    # Heavy (seconds to import): loaded only when a plan has an Iceberg route.
    from pyiceberg.catalog import load_catalog as pyiceberg_load
    from pyiceberg.utils.config import Config

    configured = Config().get_catalog_config(name) or {}
    if not configured.get("uri") and not configured.get("type"):
        raise ConfigError(
            f"no Iceberg catalog named {name!r} is configured",
            hint=f"Configure it in .pyiceberg.yaml (catalog: {name}: uri: …) or with "
            f"PYICEBERG_CATALOG__{name.upper()}__URI (e.g. sqlite:///catalog.db for a "
            "SQL catalog), or name another with 'iceberg.catalog'",
        )
    # The catalog's own settings win; the archiver's S3 settings fill in the rest. (Passed
    # as properties: pyiceberg reads its environment once, when it is first imported.)
    properties: dict[str, Any] = {**s3_properties(s3, frozen), **configured}
    remember_secrets(properties)
    with catalog_errors(f"be opened ({name!r})"):
        return pyiceberg_load(name, **properties)


class CatalogSource:
    """One catalog, opened with the credentials of the AWS chain and opened again when
    they are renewed: short-lived ones (IRSA, an assumed role: an hour or less) would fail
    a long follow session's commits. botocore renews refreshable credentials when asked
    within its refresh window before they expire (15 minutes); each use asks."""

    def __init__(self, name: str, s3: S3Settings) -> None:
        self.name, self.s3 = name, s3
        self._credentials = credentials(s3)
        self._frozen = self._now()
        self._catalog = load_catalog(name, s3, self._frozen)

    def _now(self) -> Any:
        return None if self._credentials is None else self._credentials.get_frozen_credentials()

    def renewed(self) -> bool:
        """Whether the credentials changed since the catalog was opened: it is opened again
        (the tables loaded from it keep the old ones in their FileIO: load them again)."""
        with catalog_errors(f"renew the credentials of catalog {self.name!r}"):
            frozen = self._now()
        if frozen == self._frozen:
            return False
        self._catalog = load_catalog(self.name, self.s3, frozen)
        self._frozen = frozen
        log.info("the S3 credentials were renewed; catalog %r opened with them", self.name)
        return True

    @property
    def catalog(self) -> Any:
        self.renewed()
        return self._catalog
