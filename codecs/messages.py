"""Request/response codec glue over kafka-python's generated protocol classes.

Kafka's JSON message specs (shipped with kafka-python 3.x) are the single
source of truth for every API body; this module only looks the classes up by
``api_key`` and turns every low-level decoding failure into ``CorruptFrame``.
"""
from __future__ import annotations

from kafka.protocol import admin as _admin
from kafka.protocol import consumer as _consumer
from kafka.protocol import metadata as _metadata
from kafka.protocol import producer as _producer

from .errors import CorruptFrame

_MODULES = (_admin, _consumer, _metadata, _producer)


def _collect() -> dict[int, tuple[type, type]]:
    pairs: dict[int, tuple[type, type]] = {}
    for module in _MODULES:
        for name in dir(module):
            if not name.endswith("Request"):
                continue
            req = getattr(module, name)
            resp = getattr(module, name[: -len("Request")] + "Response", None)
            if resp is None or not hasattr(req, "API_KEY"):
                continue
            pairs[req.API_KEY] = (req, resp)
    return pairs


API_CLASSES: dict[int, tuple[type, type]] = _collect()


def request_class(api_key: int) -> type:
    return API_CLASSES[api_key][0]


def response_class(api_key: int) -> type:
    return API_CLASSES[api_key][1]


def api_name(api_key: int) -> str:
    pair = API_CLASSES.get(api_key)
    return pair[0].__name__[: -len("Request")] if pair else f"api_key {api_key}"


def request_is_flexible(api_key: int, api_version: int) -> bool | None:
    pair = API_CLASSES.get(api_key)
    if pair is None:
        return None
    return pair[0].flexible_version_q(api_version)


def response_header_v1(api_key: int, api_version: int) -> bool:
    """Whether the response uses header v1 (tagged fields); never for ApiVersions."""
    if api_key == 18:
        return False
    return bool(API_CLASSES[api_key][1].flexible_version_q(api_version))


def decode_request(api_key: int, api_version: int, frame: bytes, offset: int):
    """Decode a request body; raises ``CorruptFrame`` on any malformed input."""
    cls = API_CLASSES[api_key][0]
    try:
        return cls.decode(memoryview(frame)[offset:], version=api_version)
    except CorruptFrame:
        raise
    except Exception as exc:  # struct.error, IndexError, ValueError, UnicodeDecodeError...
        raise CorruptFrame(f"cannot decode {cls.__name__} v{api_version}: {exc!r}") from exc


def _build(struct, values: dict):
    """Instantiate ``struct``'s data class from plain dicts, recursively."""
    kwargs = {}
    for field in struct.fields.values():
        name = field.name
        if name not in values:
            continue
        value = values[name]
        if value is not None and field.is_struct_array():
            value = [_build(field, v) if isinstance(v, dict) else v for v in value]
        elif isinstance(value, dict) and field.is_struct():
            value = _build(field, value)
        kwargs[name] = value
    unknown = set(values) - set(kwargs)
    if unknown:
        raise ValueError(f"unknown fields for {struct.name}: {sorted(unknown)}")
    return struct.data_class(**kwargs)


def encode_response(api_key: int, api_version: int, fields: dict) -> bytes:
    """Encode a response body for ``api_key`` at ``api_version`` from plain dicts.

    Nested structs are given as dicts and arrays of structs as lists of dicts,
    with kafka-python's snake_case field names. Fields absent at this version
    are ignored by the encoder; unknown names raise ``ValueError``.
    """
    cls = API_CLASSES[api_key][1]
    kwargs = {}
    for field in cls._struct._fields:
        if field.name in fields:
            value = fields[field.name]
            if value is not None and field.is_struct_array():
                value = [_build(field, v) if isinstance(v, dict) else v for v in value]
            elif isinstance(value, dict) and field.is_struct():
                value = _build(field, value)
            kwargs[field.name] = value
    unknown = set(fields) - set(kwargs)
    if unknown:
        raise ValueError(f"unknown fields for {cls.__name__}: {sorted(unknown)}")
    return bytes(cls[api_version](**kwargs).encode())
