"""Java DateTimeFormatter patterns of ``_date.<pattern>``, formatted from epoch milliseconds.

Expected texts are written out by hand from the instants (checked against the tz database's
published transitions), never computed with the code under test.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_archive.kcql.dates import compile_pattern, local_time, time_zone

UTC = time_zone("UTC")
# 2024-05-06T13:53:00Z
T = 1_715_003_580_000


def fmt(pattern: str, timestamp_ms: int, zone: str = "UTC") -> str | None:
    return compile_pattern(pattern).format(timestamp_ms, time_zone(zone))


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("uuuu", "2024"),
        ("yyyy", "2024"),
        ("uu", "24"),
        ("yy", "24"),
        ("u", "2024"),
        ("uuuuu", "02024"),
        ("MM", "05"),
        ("LL", "05"),
        ("M", "5"),
        ("dd", "06"),
        ("d", "6"),
        ("HH", "13"),
        ("H", "13"),
        ("hh", "01"),
        ("K", "1"),
        ("k", "13"),
        ("mm", "53"),
        ("ss", "00"),
        ("SSS", "000"),
        ("D", "127"),
        ("Q", "2"),
        ("QQ", "02"),
        ("uuuu-MM-dd", "2024-05-06"),
        ("uuuu/MM/dd HH:mm", "2024/05/06 13:53"),
        ("uuuu'T'HH", "2024T13"),
        ("'year='uuuu", "year=2024"),
        ("HH''mm", "13'53"),
        ("''", "'"),
        ("'o''clock' H", "o'clock 13"),
        ("uuuu_MM.dd", "2024_05.06"),
    ],
)
def test_pattern_letters_at_a_known_instant(pattern: str, expected: str) -> None:
    assert fmt(pattern, T) == expected


def test_fraction_midnight_and_clock_hours() -> None:
    # 2024-02-14T00:05:09.123Z
    t = 1_707_869_109_123
    assert fmt("HH:mm:ss.SSS", t) == "00:05:09.123"
    assert fmt("S", t) == "1"
    assert fmt("SSSSSS", t) == "123000"
    assert fmt("hh", t) == "12"  # clock-hour-of-am-pm: 1-12
    assert fmt("K", t) == "0"  # hour-of-am-pm: 0-11
    assert fmt("kk", t) == "24"  # clock-hour-of-day: 1-24
    assert fmt("DDD", t) == "045"
    assert fmt("DD", t) == "45"


def test_before_the_epoch() -> None:
    assert fmt("uuuu-MM-dd HH:mm:ss.SSS", -1) == "1969-12-31 23:59:59.999"
    assert fmt("uuuu", 0) == "1970"


def test_years_below_1000_are_zero_padded_as_java_does() -> None:
    # 0999-01-01T00:00:00Z
    assert fmt("uuuu", -30_641_760_000_000) == "0999"
    assert fmt("u", -30_641_760_000_000) == "999"


@pytest.mark.parametrize(
    ("zone", "timestamp_ms", "expected"),
    [
        # Paris springs forward at 01:00Z: 01:59:59 CET, then 03:00 CEST.
        ("Europe/Paris", 1_711_846_799_000, "2024-03-31 01:59:59"),
        ("Europe/Paris", 1_711_846_800_000, "2024-03-31 03:00:00"),
        # Paris falls back at 01:00Z: 00:30Z and 01:30Z are both 02:30 local.
        ("Europe/Paris", 1_729_989_000_000, "2024-10-27 02:30:00"),
        ("Europe/Paris", 1_729_992_600_000, "2024-10-27 02:30:00"),
        # New York springs forward at 07:00Z.
        ("America/New_York", 1_710_053_999_000, "2024-03-10 01:59:59"),
        ("America/New_York", 1_710_054_000_000, "2024-03-10 03:00:00"),
        # Lord Howe moves by 30 minutes.
        ("Australia/Lord_Howe", 1_728_142_199_000, "2024-10-06 01:59:59"),
        ("Australia/Lord_Howe", 1_728_142_200_000, "2024-10-06 02:30:00"),
        # Quarter-hour offset.
        ("Asia/Kathmandu", 1_704_067_200_000, "2024-01-01 05:45:00"),
        # The year changes earlier or later than in UTC.
        ("Asia/Tokyo", 1_735_687_800_000, "2025-01-01 08:30:00"),
        ("Pacific/Kiritimati", 1_735_639_200_000, "2025-01-01 00:00:00"),
        ("Pacific/Pago_Pago", 1_735_729_140_000, "2024-12-31 23:59:00"),
        ("UTC", 1_735_729_140_000, "2025-01-01 10:59:00"),
    ],
)
def test_time_zones_and_dst_edges(zone: str, timestamp_ms: int, expected: str) -> None:
    assert fmt("uuuu-MM-dd HH:mm:ss", timestamp_ms, zone) == expected


def test_out_of_range_timestamps_give_none() -> None:
    last = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z
    first = -62_135_596_800_000  # 0001-01-01T00:00:00Z
    assert fmt("uuuu", last) == "9999"
    assert fmt("uuuu", first) == "0001"
    assert fmt("uuuu", last + 1) is None
    assert fmt("uuuu", first - 1) is None
    # In a zone east of UTC the last instant is already year 10000 locally.
    assert fmt("uuuu", last, "Asia/Tokyo") is None
    assert local_time(2**63 - 1, UTC) is None


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        ("YYYY", "week-based year"),
        ("MMM", "month names"),
        ("LLLL", "month names"),
        ("ddd", "too many pattern letters 'd'"),
        ("HHH", "too many pattern letters 'H'"),
        ("QQQ", "quarter names"),
        ("EEE", "day names"),
        ("a", "AM/PM"),
        ("VV", "zone ids"),
        ("XXX", "zone offsets"),
        ("ww", "locale"),
        ("nn", "unsupported letter 'n'"),
        ("uuuu'T", "unterminated"),
        ("uuuu[-MM]", "reserved"),
        ("uuuu#", "reserved"),
        ("", "empty"),
    ],
)
def test_rejected_patterns(pattern: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        compile_pattern(pattern)


def test_non_ascii_letters_are_literal() -> None:
    assert fmt("uuuu年MM月", T) == "2024年05月"


@pytest.mark.parametrize("name", ["utc", "Europe", "Nowhere/City", "../etc/passwd", ""])
def test_unknown_time_zones(name: str) -> None:
    with pytest.raises(ValueError, match="unknown time zone"):
        time_zone(name)


@given(st.integers(min_value=-62_135_596_800_000, max_value=253_402_300_799_999))
def test_uuuu_MM_dd_agrees_with_iso_date(timestamp_ms: int) -> None:
    local = local_time(timestamp_ms, UTC)
    assert local is not None
    assert fmt("uuuu-MM-dd'T'HH:mm:ss.SSS", timestamp_ms) == (
        local.isoformat(timespec="milliseconds").removesuffix("+00:00")
    )
    # Integer arithmetic: the millisecond part is exact, also before the epoch.
    assert fmt("SSS", timestamp_ms) == f"{timestamp_ms % 1000:03d}"
