"""``STOREAS`` and what depends on the format: its name, the parameters Lenses ignores after
it, the properties that apply to it, and the envelope of keys, values and headers."""

from __future__ import annotations

from collections.abc import Sequence

from kafka_archive.kcql.errors import KcqlSemanticError, did_you_mean, one_of
from kafka_archive.kcql.plan import Envelope, Format, Span
from kafka_archive.kcql.properties import FORMAT_PROPERTIES, PROPERTY_SPECS, Settings
from kafka_archive.kcql.syntax import Property, Word

_ENVELOPE_FIELDS = ("key", "value", "headers", "metadata")
_ENVELOPE_FORMATS = frozenset({Format.JSON, Format.AVRO, Format.PARQUET})


def refuse_format_parameters(parameters: Sequence[Property], fmt: Format) -> None:
    """``STOREAS `X` (k=v, …)``: Lenses' KCQL parses the parameters, but its S3 sink reads
    only the format's name (stream-reactor ``FormatSelection.fromKcql``) and drops them
    without a word. Refused, so that nobody believes they took effect."""
    if not parameters:
        return
    first = parameters[0]
    shown = ", ".join(f"{p.key}={p.value.text}" for p in parameters)
    last = parameters[-1].span
    known = [p for p in parameters if p.key.casefold() in PROPERTY_SPECS]
    as_properties = ", ".join(f"'{p.key.casefold()}'={p.value.text}" for p in known)
    hint = (
        f"Write PROPERTIES({as_properties}) instead"
        if len(known) == len(parameters)
        else "Remove them; settings go in PROPERTIES('key'=value, …)"
    )
    raise KcqlSemanticError(
        f"STOREAS {fmt.value} ({shown}): the Lenses S3 sink ignores parameters after the "
        "format, so they would not mean what they say",
        span=Span(first.span.line, first.span.column, last.end_line, last.end_column),
        hint=hint,
        label="storeas-parameters",
    )


def compile_format(word: Word | None) -> Format:
    if word is None:
        return Format.JSON
    for fmt in Format:
        if fmt.value.casefold() == word.text.casefold():
            return fmt
    if word.text.upper().startswith("BYTES_"):
        # Lenses 5.x's BYTES_KeyAndValueWithSizes, BYTES_ValueOnly, …; Lenses refuses them now.
        raise KcqlSemanticError(
            f"STOREAS {word.text} is no longer supported (nor by the Lenses sink)",
            span=word.span,
            hint="Store values as BYTES, or keys, values and headers with "
            "'store.envelope'=true in JSON, AVRO or PARQUET",
            label="unknown-format",
        )
    raise KcqlSemanticError(
        f"unknown STOREAS format {word.text!r}",
        span=word.span,
        hint=did_you_mean(word.text, Format.names()) or f"Formats: {one_of(Format.names())}",
        expected=Format.names(),
        label="unknown-format",
    )


def check_format_properties(settings: Settings, fmt: Format) -> None:
    blocks, codec = settings.get("store.gzip.block.bytes"), settings.get("store.compression")
    if blocks is not None and (codec is None or codec.value.strip("'") != "gzip"):
        raise KcqlSemanticError(
            "'store.gzip.block.bytes' needs 'store.compression'='gzip'",
            span=blocks.span,
            hint="Add 'store.compression'='gzip', or remove the block size",
            label="blocks-without-gzip",
        )
    schema_file, envelope = settings.get("avro.schema.file"), settings.get("store.envelope")
    if schema_file is not None and envelope is not None and envelope.value == "true":
        raise KcqlSemanticError(
            "'avro.schema.file' does not apply to an envelope (its schema is fixed)",
            span=schema_file.span,
            hint="Remove 'avro.schema.file', or 'store.envelope'",
            label="schema-file-with-envelope",
        )
    check_schema_subject(settings)
    for key, formats in FORMAT_PROPERTIES.items():
        setting = settings.get(key)
        if setting is not None and fmt not in formats:
            names = ", ".join(sorted(f.value for f in formats))
            raise KcqlSemanticError(
                f"{key!r} does not apply to STOREAS {fmt.value}",
                span=setting.span,
                hint=f"It applies to {names}; remove it, or change STOREAS",
                label="property-format",
            )


def check_schema_subject(settings: Settings) -> None:
    """A route declares one schema: a file or a registry subject, not both, and not with the
    envelope; a subject version names a subject."""
    subject, version = (
        settings.get("avro.schema.subject"),
        settings.get("avro.schema.subject.version"),
    )
    envelope = settings.get("store.envelope")
    if subject is not None and settings.get("avro.schema.file") is not None:
        raise KcqlSemanticError(
            "'avro.schema.subject' and 'avro.schema.file' both declare the route's schema",
            span=subject.span,
            hint="Keep one of them",
            label="schema-file-and-subject",
        )
    if subject is not None and envelope is not None and envelope.value == "true":
        raise KcqlSemanticError(
            "'avro.schema.subject' does not apply to an envelope (its schema is fixed)",
            span=subject.span,
            hint="Remove 'avro.schema.subject', or 'store.envelope'",
            label="schema-subject-with-envelope",
        )
    if version is not None and subject is None:
        raise KcqlSemanticError(
            "'avro.schema.subject.version' needs 'avro.schema.subject'",
            span=version.span,
            hint="Name the subject with 'avro.schema.subject'",
            label="subject-version-without-subject",
        )


def compile_envelope(settings: Settings, fmt: Format) -> Envelope:
    enabled = settings.get("store.envelope")
    fields = {name: settings.get(f"store.envelope.fields.{name}") for name in _ENVELOPE_FIELDS}
    if enabled is None or enabled.value != "true":
        stray = next((s for s in fields.values() if s is not None), None)
        if stray is not None:
            raise KcqlSemanticError(
                "store.envelope.fields.* has no effect without 'store.envelope'=true",
                span=stray.span,
                hint="Add 'store.envelope'=true, or remove the setting",
                label="envelope-fields-without-envelope",
            )
        return Envelope()
    if fmt not in _ENVELOPE_FORMATS:
        raise KcqlSemanticError(
            f"{fmt.value} cannot store an envelope",
            span=enabled.span,
            hint="Store envelopes as JSON, AVRO or PARQUET",
            label="envelope-format",
        )
    chosen = {name: s.value == "true" if s is not None else True for name, s in fields.items()}
    if not any(chosen.values()):
        raise KcqlSemanticError(
            "the envelope keeps no fields",
            span=enabled.span,
            hint="Keep at least one of key, value, headers and metadata",
            label="empty-envelope",
        )
    return Envelope(enabled=True, **chosen)
