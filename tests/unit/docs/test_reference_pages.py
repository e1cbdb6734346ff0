"""The reference pages (docs/reference/) are the code's own tables: regenerated in memory from
``settings.OPTIONS``, ``PROPERTY_SPECS`` and the ``ArchiveError`` families, they must equal
the committed pages, so a table changed without ``make docs`` fails here."""

from __future__ import annotations

from pathlib import Path

import gen_reference
import pytest

from kafka_archive.archiver.config import settings
from kafka_archive.archiver.core import errors
from kafka_archive.kcql.properties import PROPERTY_SPECS


@pytest.mark.parametrize("path", list(gen_reference.pages()), ids=lambda p: p.name)
def test_a_committed_reference_page_is_what_make_docs_writes_from_the_code(path: Path) -> None:
    written = path.read_text() if path.exists() else None
    assert written == gen_reference.pages()[path], f"{path.name} is stale: run make docs"


def test_every_setting_property_and_exit_code_is_on_its_page() -> None:
    pages = {path.name: text for path, text in gen_reference.pages().items()}
    for option in settings.OPTIONS:
        assert f"`{option.env}`" in pages["options.md"]
    for key in PROPERTY_SPECS:
        assert f"| `{key}` |" in pages["properties.md"]
    codes = {family.exit_code for family in gen_reference._error_families()}
    assert codes == set(range(1, 26))
    for code in codes:
        assert f"\n| {code} | " in pages["exit-codes.md"]
    assert errors.SchemaRegistryUnavailableError.meaning in pages["exit-codes.md"]


def test_a_family_without_its_own_meaning_would_be_caught() -> None:
    """Each family states what its exit code means (not the base class's 'internal error')."""
    for family in gen_reference._error_families():
        if family is not errors.ArchiveError:
            assert family.meaning != errors.ArchiveError.meaning, family.__name__
