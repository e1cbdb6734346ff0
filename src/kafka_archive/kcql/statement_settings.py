"""A statement's settings: its legacy ``WITH_*`` clauses and its ``PROPERTIES``, merged into
one canonical table (``properties.Settings``), each value normalized and stated once."""

from __future__ import annotations

from kafka_archive.kcql.errors import KcqlSemanticError, did_you_mean, one_of
from kafka_archive.kcql.properties import (
    LEGACY_PROPERTIES,
    PARTITIONERS,
    PROPERTY_SPECS,
    Setting,
    Settings,
    normalize_value,
)
from kafka_archive.kcql.syntax import LegacySetting, Statement


def statement_settings(statement: Statement) -> Settings:
    settings = Settings()
    for legacy in statement.legacy:
        key = LEGACY_PROPERTIES[legacy.keyword]
        if key in settings:
            raise KcqlSemanticError(
                f"{legacy.keyword} is given twice",
                span=legacy.span,
                hint="State each setting once",
                label="duplicate-setting",
            )
        settings[key] = Setting(
            _legacy_value(legacy, key),
            legacy.span,
            legacy.value,
            f"{legacy.keyword} = {legacy.value.text}",
        )
    stated: set[str] = set()
    for prop in statement.properties or ():
        spec = PROPERTY_SPECS.get(prop.key)
        if spec is None:
            raise KcqlSemanticError(
                f"unknown property {prop.key!r}",
                span=prop.key_span,
                hint=did_you_mean(prop.key, PROPERTY_SPECS),
                expected=tuple(PROPERTY_SPECS),
                label="unknown-property",
            )
        if prop.key in stated:
            raise KcqlSemanticError(
                f"property {prop.key!r} is given twice",
                span=prop.span,
                hint="State each setting once",
                label="duplicate-setting",
            )
        stated.add(prop.key)
        value = normalize_value(prop.key, spec, prop.value)
        earlier = settings.get(prop.key)
        if earlier is not None and earlier.value != value:
            raise KcqlSemanticError(
                f"'{prop.key}'={prop.value.text} conflicts with {earlier.stated_as}",
                span=prop.span,
                hint="State the setting once; the WITH_* clauses are the older spelling of "
                "the same properties",
                label="conflicting-setting",
            )
        stated_as = f"'{prop.key}'={prop.value.text}"
        settings[prop.key] = Setting(value, prop.span, prop.value, stated_as)
    return settings


def _legacy_value(legacy: LegacySetting, key: str) -> str:
    if legacy.keyword != "WITHPARTITIONER":
        return normalize_value(key, PROPERTY_SPECS[key], legacy.value)
    for name, value in PARTITIONERS.items():
        if name.casefold() == legacy.value.text.casefold():
            return value
    raise KcqlSemanticError(
        f"unknown partitioner {legacy.value.text!r}",
        span=legacy.value.span,
        hint=did_you_mean(legacy.value.text, PARTITIONERS) or f"Write {one_of(PARTITIONERS)}",
        expected=tuple(PARTITIONERS),
        label="unknown-partitioner",
    )
