"""Decoded values → what the reader's Spark type wants for Arrow: the last step of registry
decoding (decoding.py), kept apart so it is tested without a registry or Spark.

A record is read with its writer's schema (fastavro, ``json``, protobuf messages turned into
dicts), so its values follow the writer; ``conform`` fits them to the reader struct fixed at
query start: structs by field name (a field the writer lacks is None, one the reader lacks is
dropped), maps as (key, value) lists, int ranges and decimal precision checked, Avro's
time-of-day as milliseconds/microseconds, a naive datetime in a timestamp taken as UTC.
Anything that does not fit raises ``DecodeFailure`` naming the field.
"""
from __future__ import annotations

import datetime as dt
import decimal
import json
import uuid

from pyspark.sql.types import (ArrayType, BinaryType, BooleanType, DateType, DecimalType,
                               DoubleType, FloatType, IntegerType, LongType, MapType, NullType,
                               StringType, StructType, TimestampNTZType, TimestampType)

from .schema_types import UNION_BRANCH

UTC = dt.timezone.utc


class DecodeFailure(Exception):
    """One record cannot be decoded; its text is the ``*_decode_error`` value."""

    def __init__(self, message: str, path: list | None = None):
        super().__init__(message)
        self.message = message
        self.path = path if path is not None else []

    def __str__(self) -> str:
        return f"field {'.'.join(self.path)}: {self.message}" if self.path else self.message


def conform(value, dtype):
    """``value`` (decoded by the writer's schema) as the reader type ``dtype`` wants it for
    Arrow: structs as dicts by field name (missing fields None), maps as (key, value) lists.
    Raises DecodeFailure naming the field that does not fit."""
    if value is None:
        return None
    return _CONFORM[type(dtype)](value, dtype)


def _mismatch(value, dtype) -> DecodeFailure:
    return DecodeFailure(f"expected {dtype.simpleString()}, got {type(value).__name__} {value!r:.60}")


def _struct(value, dtype: StructType):
    if dtype.fields and UNION_BRANCH in dtype.fields[0].metadata:
        return _union(value, dtype)
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], dict):
        value = value[1]  # (record name, record): fastavro's record in a union
    if not isinstance(value, dict):
        raise _mismatch(value, dtype)
    out = {}
    for f in dtype.fields:
        try:
            out[f.name] = conform(value.get(f.name), f.dataType)
        except DecodeFailure as exc:
            exc.path.insert(0, f.name)
            raise
    return out


def _union(value, dtype: StructType):
    named = value[0] if isinstance(value, tuple) and len(value) == 2 else None
    for f in dtype.fields:
        if named is not None and f.metadata.get(UNION_BRANCH) == named:
            branch = conform(value[1], f.dataType)
        elif named is None and _fits(value, f.dataType):
            branch = conform(value, f.dataType)
        else:
            continue
        return {other.name: (branch if other is f else None) for other in dtype.fields}
    raise _mismatch(value, dtype)


def _fits(value, dtype) -> bool:
    if isinstance(value, bool):
        return isinstance(dtype, BooleanType)
    if isinstance(value, int):
        return isinstance(dtype, (IntegerType, LongType, DecimalType))
    if isinstance(value, dt.datetime):
        return isinstance(dtype, (TimestampType, TimestampNTZType))
    checks = ((float, (FloatType, DoubleType)), (str, StringType), (uuid.UUID, StringType),
              ((bytes, bytearray), BinaryType), (decimal.Decimal, DecimalType), (dt.date, DateType),
              (dt.time, (IntegerType, LongType)), (list, ArrayType), (dict, (StructType, MapType)))
    return any(isinstance(value, py) and isinstance(dtype, spark) for py, spark in checks)


_INT_RANGES = {IntegerType: 1 << 31, LongType: 1 << 63}


def _integer(value, dtype):
    if isinstance(value, dt.time):  # Avro time-millis / time-micros
        micros = ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000 + value.microsecond
        return micros // 1000 if isinstance(dtype, IntegerType) else micros
    if isinstance(value, bool) or not isinstance(value, int):
        raise _mismatch(value, dtype)
    limit = _INT_RANGES[type(dtype)]
    if not -limit <= value < limit:
        raise DecodeFailure(f"{value} does not fit {dtype.simpleString()}")
    return value


def _floating(value, dtype):
    if isinstance(value, bool) or not isinstance(value, (int, float, decimal.Decimal)):
        raise _mismatch(value, dtype)
    return float(value)


def _decimal(value, dtype: DecimalType):
    if isinstance(value, bool) or not isinstance(value, (int, float, decimal.Decimal)):
        raise _mismatch(value, dtype)
    quantized = decimal.Decimal(str(value) if isinstance(value, float) else value).quantize(
        decimal.Decimal(1).scaleb(-dtype.scale), rounding=decimal.ROUND_HALF_EVEN)
    if len(quantized.as_tuple().digits) > dtype.precision:
        raise DecodeFailure(f"{value} does not fit {dtype.simpleString()}")
    return quantized


def _string(value, dtype):
    if isinstance(value, str):
        return value
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, (dict, list, int, float)):  # "any JSON" fields (and bools): the JSON text
        return json.dumps(value, separators=(",", ":"))
    raise _mismatch(value, dtype)


def _of(py_types, convert=lambda v: v):
    py_types = py_types if isinstance(py_types, tuple) else (py_types,)

    def check(value, dtype):
        if not isinstance(value, py_types) or (isinstance(value, bool) and bool not in py_types):
            raise _mismatch(value, dtype)
        return convert(value)
    return check


def _timestamp(value, dtype):
    if not isinstance(value, dt.datetime):
        raise _mismatch(value, dtype)
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _timestamp_ntz(value, dtype):
    if not isinstance(value, dt.datetime):
        raise _mismatch(value, dtype)
    return value.replace(tzinfo=None)


def _array(value, dtype: ArrayType):
    if not isinstance(value, (list, tuple)):
        raise _mismatch(value, dtype)
    out = []
    for i, item in enumerate(value):
        try:
            out.append(conform(item, dtype.elementType))
        except DecodeFailure as exc:
            exc.path.insert(0, f"[{i}]")
            raise
    return out


def _map(value, dtype: MapType):
    if not isinstance(value, dict):
        raise _mismatch(value, dtype)
    out = []
    for k, v in value.items():
        try:
            out.append((conform(k, dtype.keyType), conform(v, dtype.valueType)))
        except DecodeFailure as exc:
            exc.path.insert(0, f"[{k!r}]")
            raise
    return out


_CONFORM = {
    StructType: _struct, ArrayType: _array, MapType: _map, StringType: _string,
    IntegerType: _integer, LongType: _integer, FloatType: _floating, DoubleType: _floating,
    DecimalType: _decimal, BooleanType: _of(bool), NullType: lambda v, d: None,
    BinaryType: _of((bytes, bytearray, memoryview), bytes),
    DateType: _of(dt.date, lambda v: v.date() if isinstance(v, dt.datetime) else v),
    TimestampType: _timestamp, TimestampNTZType: _timestamp_ntz,
}


__all__ = ["DecodeFailure", "conform"]
