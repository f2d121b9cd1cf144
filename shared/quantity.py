"""Kubernetes quantities as Go's `resource.Quantity.String()` prints them, quirks included:
the operator deletes a pod whose storage annotation differs from its own spelling (`1Gi`, not
`1024Mi`), so a wake must write exactly Go's form. Unit tests pin apimachinery's vectors."""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import ROUND_UP, Decimal, localcontext
from enum import StrEnum

# sign, leading zeros, numerator, point, denominator, suffix (letters, then a signed exponent).
_SYNTAX = re.compile(r"([+-]?)0*([0-9]*)(\.?)([0-9]*)([eEinumkKMGTP]*[+-]?[0-9]*)")
_MAX_INT64 = (1 << 63) - 1
_MAX_INT64_FACTORS = 18  # apimachinery's maxInt64Factors
_NANO = -9


class Format(StrEnum):
    DECIMAL_EXPONENT = "DecimalExponent"
    BINARY_SI = "BinarySI"
    DECIMAL_SI = "DecimalSI"


_DEC_SUFFIXES: dict[str, int] = {
    s: 3 * i for i, s in enumerate(("n", "u", "m", "", "k", "M", "G", "T", "P", "E"), start=-3)
}
_BIN_SUFFIXES: dict[str, int] = {f"{s}i": 10 * i for i, s in enumerate("KMGTPE", start=1)}
_DEC_BY_EXP = {v: s for s, v in _DEC_SUFFIXES.items()}
_BIN_BY_EXP = {v: s for s, v in _BIN_SUFFIXES.items()}


class QuantityError(ValueError):
    """Not a Kubernetes quantity."""


@dataclass(frozen=True, slots=True)
class Quantity:
    """An exact value (`unscaled` x 10^`scale`), its format and, maybe, its kept spelling."""

    unscaled: int
    scale: int  # value = unscaled * 10**scale
    format: Format
    kept: str | None = None  # the input, when Go keeps it as the canonical string

    @property
    def is_zero(self) -> bool:
        return self.unscaled == 0

    def __str__(self) -> str:
        return self.kept if self.kept is not None else _canonical(self)


def _parse_int64(digits: str) -> int:
    # Go's strconv.ParseInt(s, 10, 64) over ASCII digits only.
    if not (digits.isascii() and digits.isdigit()):
        raise QuantityError(f"{digits!r}: not a number")
    value = int(digits)
    if value > _MAX_INT64:
        raise QuantityError(f"{digits!r}: out of range")
    return value


def _split(text: str) -> tuple[bool, str, str, str, str]:
    """apimachinery's parseQuantityString: (positive, value, num, denom, suffix)."""
    m = _SYNTAX.fullmatch(text)
    if m is None:
        raise QuantityError(f"{text!r}: not a quantity")
    sign, num, dot, denom, suffix = m.groups()
    if not (num or dot or suffix):  # only a sign and zeros
        return sign != "-", "0", "0", "", ""
    return sign != "-", text[: len(text) - len(suffix)], num or "0", denom, suffix


def _interpret(suffix: str) -> tuple[int, int, Format]:
    """(base, exponent, format) of a suffix."""
    if suffix in _DEC_SUFFIXES:
        return 10, _DEC_SUFFIXES[suffix], Format.DECIMAL_SI
    if suffix in _BIN_SUFFIXES:
        return 2, _BIN_SUFFIXES[suffix], Format.BINARY_SI
    if len(suffix) > 1 and suffix[0] in "eE":
        sign = -1 if suffix[1] == "-" else 1
        # An int32 conversion of a ParseInt: apimachinery truncates, nobody writes 1e4294967296.
        exponent = sign * _parse_int64(suffix[2:] if suffix[1] in "+-" else suffix[1:])
        return 10, exponent, Format.DECIMAL_EXPONENT
    raise QuantityError(f"{suffix!r}: unknown quantity suffix")


def parse_quantity(text: str) -> Quantity:
    """apimachinery's `ParseQuantity` (the CRD pattern already rejects what this rejects)."""
    if not text:
        raise QuantityError("empty quantity")
    if text == "0":
        return Quantity(0, 0, Format.DECIMAL_SI, kept="0")
    positive, value, num, denom, suffix = _split(text)
    base, exponent, fmt = _interpret(suffix)

    scale = 0
    mantissa = 1
    if fmt is Format.BINARY_SI:
        if exponent >= 0 and not denom:
            mantissa = 1 << exponent
            precision = 15 - len(num) - (exponent * 3) // 10 - 1
        else:
            precision = -1
    else:
        scale = exponent
        precision = _MAX_INT64_FACTORS - (len(num) + len(denom))

    if precision >= 0:
        scale -= len(denom)
        if scale >= _NANO:
            shifted = num + denom
            amount = _parse_int64(shifted)
            result = amount * mantissa
            if result <= _MAX_INT64:
                signed = result if positive else -result
                if fmt is Format.BINARY_SI:
                    keep = exponent % 10 == 0 and amount & 0x07 != 0
                else:
                    keep = scale % 3 == 0 and not shifted.endswith("000") and shifted[0] != "0"
                return Quantity(signed, scale, fmt, kept=text if keep else None)

    with localcontext() as ctx:
        ctx.prec = 200
        try:
            dec = Decimal(value)
        except ArithmeticError as e:
            raise QuantityError(f"{text!r}: not a number") from e
        dec = dec.scaleb(exponent) if base == 10 else dec * (Decimal(2) ** exponent)
        negative = dec < 0
        dec = abs(dec)
        if dec != 0:
            # Round non-zero values up to the smallest representable (1n): ask for
            # some resources, get some.
            dec = dec.quantize(Decimal(1).scaleb(_NANO), rounding=ROUND_UP)
        if fmt is Format.BINARY_SI and dec > _MAX_INT64:
            dec = Decimal(_MAX_INT64)
        if fmt is Format.BINARY_SI and 0 < dec < 1:
            fmt = Format.DECIMAL_SI
        if negative:
            dec = -dec
    sign, digits, exp = dec.as_tuple()
    assert isinstance(exp, int)
    unscaled = int("".join(map(str, digits)) or "0") * (-1 if sign else 1)
    return Quantity(unscaled, exp, fmt)


def _strip(value: int, factor: int) -> tuple[int, int]:
    """Divide `factor` out of |value| as often as it goes: (rest with sign, times)."""
    rest, times = abs(value), 0
    while rest >= factor and rest % factor == 0:
        rest //= factor
        times += 1
    return (rest if value >= 0 else -rest), times


def _canonical(q: Quantity) -> str:
    """apimachinery's `CanonicalizeBytes` for a quantity whose spelling was not kept."""
    if q.is_zero:
        return "0"
    fmt = q.format
    if fmt is Format.BINARY_SI:
        integral = q.scale >= 0 or q.unscaled % (10**-q.scale) == 0
        small = abs(q.unscaled) * 10 ** max(q.scale, 0) < 1024 * 10 ** max(-q.scale, 0)
        if small or not integral:
            fmt = Format.DECIMAL_SI
    if fmt is Format.BINARY_SI:
        whole = q.unscaled * 10**q.scale if q.scale >= 0 else q.unscaled // 10**-q.scale
        number, times = _strip(whole, 1024)
        return f"{number}{_BIN_BY_EXP.get(times * 10, '')}"
    number, times = _strip(q.unscaled, 10)
    exponent = q.scale + times
    while exponent % 3 != 0:
        number *= 10
        exponent -= 1
    if fmt is Format.DECIMAL_EXPONENT:
        return f"{number}e{exponent}" if exponent else str(number)
    # Go prints no suffix at all for an exponent beyond the SI table.
    return f"{number}{_DEC_BY_EXP.get(exponent, '')}"


def canonical_quantity(value: int | str) -> str:
    """What the operator writes for this `spec.agent.storage` (JSON number or string)."""
    return str(parse_quantity(str(value)))


def quantity_is_zero(value: int | str) -> bool:
    """True for `0`, `0Gi`, `0.0`; a value that does not parse is not zero."""
    try:
        return parse_quantity(str(value)).is_zero
    except QuantityError:
        return False
