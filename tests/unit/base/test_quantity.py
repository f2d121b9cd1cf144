"""Quantities printed exactly as Go's `resource.Quantity.String()` prints them.

The operator detects VM-spec drift by comparing annotation strings and deletes
a pod that differs; a wake that writes `1024Mi` where the operator writes
`1Gi` loses its restored pod (issue 13, defect 3). The expected strings below
are facts from apimachinery's own tests (`pkg/api/resource/quantity_test.go`:
TestQuantityString, TestQuantityParseEmit, TestQuantityParse,
TestParseQuantity), transcribed as data.
"""

from __future__ import annotations

from decimal import Decimal

import pytest

from shared.quantity import (
    Format,
    Quantity,
    QuantityError,
    canonical_quantity,
    parse_quantity,
    quantity_is_zero,
)

B, D, E = Format.BINARY_SI, Format.DECIMAL_SI, Format.DECIMAL_EXPONENT

# TestQuantityString: (value, scale, format) -> String(), and an alternate spelling
# that parses to the same canonical string.
STRING_TABLE: list[tuple[int, int, Format, str, str]] = [
    (1024 * 1024 * 1024, 0, B, "1Gi", "1024Mi"),
    (300 * 1024 * 1024, 0, B, "300Mi", "307200Ki"),
    (6 * 1024, 0, B, "6Ki", ""),
    (1001 * 1024 * 1024 * 1024, 0, B, "1001Gi", "1025024Mi"),
    (1024 * 1024 * 1024 * 1024, 0, B, "1Ti", "1024Gi"),
    (5, 0, B, "5", "5000m"),
    (500, -3, B, "500m", "0.5"),
    (1, 9, D, "1G", "1000M"),
    (1000, 6, D, "1G", "0.001T"),
    (1000000, 3, D, "1G", ""),
    (1000000000, 0, D, "1G", ""),
    (1, -3, D, "1m", "1000u"),
    (80, -3, D, "80m", ""),
    (1080, -3, D, "1080m", "1.08"),
    (108, -2, D, "1080m", "1080000000n"),
    (10800, -4, D, "1080m", ""),
    (300, 6, D, "300M", ""),
    (1, 12, D, "1T", ""),
    (1234567, 6, D, "1234567M", ""),
    (1234567, -3, B, "1234567m", ""),
    (3, 3, D, "3k", ""),
    (1025, 0, B, "1025", ""),
    (0, 0, D, "0", ""),
    (0, 0, B, "0", ""),
    (1, 9, E, "1e9", ".001e12"),
    (1, -3, E, "1e-3", "0.001e0"),
    (1, -9, E, "1e-9", "1000e-12"),
    (80, -3, E, "80e-3", ""),
    (300, 6, E, "300e6", ""),
    (1, 12, E, "1e12", ""),
    (1, 3, E, "1e3", ""),
    (3, 3, E, "3e3", ""),
    (3, 3, D, "3k", ""),
    (0, 0, E, "0", "00"),
    (1, -9, D, "1n", ""),
    (80, -9, D, "80n", ""),
    (1080, -9, D, "1080n", ""),
    (108, -8, D, "1080n", ""),
    (10800, -10, D, "1080n", ""),
    (1, -6, D, "1u", ""),
    (80, -6, D, "80u", ""),
    (1080, -6, D, "1080u", ""),
]


@pytest.mark.parametrize(("value", "scale", "fmt", "expect", "alternate"), STRING_TABLE)
def test_string(value: int, scale: int, fmt: Format, expect: str, alternate: str) -> None:
    assert str(Quantity(value, scale, fmt)) == expect
    # The canonical spelling parses back to itself, and is kept verbatim.
    assert str(parse_quantity(expect)) == expect
    if alternate:
        assert str(parse_quantity(alternate)) == expect
    if value:
        assert str(Quantity(-value, scale, fmt)) == "-" + expect


# TestQuantityParseEmit.
PARSE_EMIT = [
    ("1Ki", "1Ki"),
    ("1Mi", "1Mi"),
    ("1Gi", "1Gi"),
    ("1024Mi", "1Gi"),
    ("1000M", "1G"),
    (".001Ki", "1024m"),
    (".000001Ki", "1024u"),
    (".000000001Ki", "1024n"),
    (".000000000001Ki", "2n"),
]


@pytest.mark.parametrize(("text", "expect"), PARSE_EMIT)
def test_parse_emit(text: str, expect: str) -> None:
    assert canonical_quantity(text) == expect
    assert canonical_quantity("-" + text) == "-" + expect


# TestQuantityParse: input -> (exact value, format).
PARSE_TABLE: list[tuple[str, str, Format]] = [
    ("0", "0", D),
    ("0n", "0", D),
    ("0Ki", "0", B),
    ("0Mi", "0", B),
    ("0G", "0", D),
    ("1", "1", D),
    ("1Ki", "1024", B),
    ("8Ki", str(8 * 1024), B),
    ("7Mi", str(7 * 1024**2), B),
    ("6Gi", str(6 * 1024**3), B),
    ("5Ti", str(5 * 1024**4), B),
    ("4Pi", str(4 * 1024**5), B),
    ("3Ei", str(3 * 1024**6), B),
    ("100Ti", str(100 * 1024**4), B),
    ("5n", "5e-9", D),
    ("4u", "4e-6", D),
    ("3m", "3e-3", D),
    ("8k", "8e3", D),
    ("50k", "5e4", D),
    ("7M", "7e6", D),
    ("40T", "4e13", D),
    ("2P", "2e15", D),
    ("1E", "1e18", D),
    ("1E-3", "1e-3", E),
    ("1e3", "1e3", E),
    ("1E18", "1e18", E),
    ("1e14", "1e14", E),
    ("100.035k", "100035", D),
    ("0.001", "1e-3", D),
    ("0.0005k", "5e-1", D),
    ("0.00050k", "5e-1", D),
    ("0.5e0", "5e-1", E),
    ("0.5e-2", "5e-3", E),
    ("10.035M", "10035e3", D),
    ("1.2e3", "12e2", E),
    ("1.3E+6", "13e5", E),
    ("1.40e9", "14e8", E),
    ("1.7E18", "17e17", E),
    ("9.01", "901e-2", D),
    ("7.123456M", "7123456", D),
    ("6.987654321G", "6987654321", D),
    ("2.5P", "25e14", D),
    ("1.01E", "101e16", D),
    # Things that saturate/round.
    ("3.001n", "4e-9", D),
    ("1.1E-9", "2e-9", E),
    ("0.0000000001", "1e-9", D),
    ("0.0000000005", "1e-9", D),
    ("0.5e-9", "1e-9", E),
    ("0.9n", "1e-9", D),
    ("0.00000012345", "124e-9", D),
    ("9Ei", str((1 << 63) - 1), B),
    ("9223372036854775807Ki", str((1 << 63) - 1), B),
    ("12E", "12e18", D),
    # Fractional binary.
    ("100.035Ki", "10243584e-2", B),
    ("0.5Mi", str(1024 * 512), B),
    ("0.05Gi", "536870912e-1", B),
    ("0.025Ti", "274877906944e-1", B),
    # "Things written by trolls".
    ("0.000000000001Ki", "2e-9", D),
    (".001", "1e-3", D),
    (".0001k", "100e-3", D),
    ("1.", "1", D),
    ("1.G", "1e9", D),
]


@pytest.mark.parametrize(("text", "value", "fmt"), PARSE_TABLE)
def test_parse_value_and_format(text: str, value: str, fmt: Format) -> None:
    for sign, signed in (("", value), ("+", value), ("-", "-" + value)):
        q = parse_quantity(sign + text)
        assert Decimal(q.unscaled).scaleb(q.scale) == Decimal(signed)
        assert q.format is fmt


@pytest.mark.parametrize(
    "text",
    ["1.1.M", "1+1.0M", "0.1mi", "0.1am", "aoeu", ".5i", "1i", "-3.01i", "-3.01e-", " 1", "1 ", ""],
)
def test_invalid(text: str) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(text)


# TestParseQuantity: inputs whose canonical form the test names.
@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("999999999999999999.0", "999999999999999999"),
        ("999999999999999999.1", "999999999999999999100m"),
        ("-999999999999999999.1", "-999999999999999999100m"),
        ("1000000000000000000", "1E"),
        ("-1000000000000000000", "-1E"),
        ("1.0E", "1E"),
        ("1000000000000000000.0", "1E"),
        ("9999999999999999999000m", "9999999999999999999"),
        ("1.0000000000000000001E", "1000000000000000000100m"),
        ("1.000000000000000001E", "1000000000000000001"),
        ("10000000000000000000", "10E"),
        ("10000000000000000000000m", "10E"),
        ("10.0000000000000000001E", "10000000000000000000100m"),
        ("9223372036854775807.1", "9223372036854775807100m"),
        ("9223372036854775808000m", "9223372036854775808"),
        # Canonical inputs are kept as written (no `canonical` in Go's table).
        ("999999999999999999", "999999999999999999"),
        ("1E", "1E"),
        ("10E", "10E"),
        ("1000000000000000001", "1000000000000000001"),
    ],
)
def test_canonical_of_large_values(text: str, canonical: str) -> None:
    assert canonical_quantity(text) == canonical


def test_the_issue_examples() -> None:
    """The three spellings of issue 13, and a JSON number (int-or-string storage)."""
    assert canonical_quantity("1024Mi") == "1Gi"
    assert canonical_quantity("1.5Gi") == "1536Mi"
    assert canonical_quantity("1000M") == "1G"
    assert canonical_quantity(1073741824) == "1073741824"
    assert canonical_quantity("20Gi") == "20Gi"


def test_zero() -> None:
    assert quantity_is_zero("0Gi") and quantity_is_zero(0) and quantity_is_zero("0.0")
    assert not quantity_is_zero("1n") and not quantity_is_zero("garbage")
