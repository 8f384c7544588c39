"""How the messages page shows a key, a value or a header: as text, JSON, hex, or a record
decoded through the Schema Registry.

``show(data, registry)`` never raises: bytes it cannot decode are shown as hex and text with
the reason.  Shown text is cut at ``TEXT_LIMIT`` characters and hex at ``HEX_LIMIT`` bytes, so
one large record cannot make a large page.

Confluent's framing (the serializers of Confluent's clients, and kwire's schema validation)::

    offset  size  field
         0     1  magic byte 0
         1     4  schema id      int32, big-endian, the registry's id
         5     -  Protobuf only: message indexes, zigzag varints (count, then each index;
                  a single 0 byte means [0], the first message of the file)
         -     -  the payload: Avro binary (no container), Protobuf, or JSON text

A framed record is decoded only when a registry is configured (``RegistryDecoder``): it reads
schemas over the registry's REST API (``GET /schemas/ids/{id}``; Protobuf as
``?format=serialized``, a FileDescriptorProto, so no .proto parser is needed here), parses
each once (fastavro for Avro, protobuf's descriptor pool for Protobuf; JSON Schema payloads are
JSON) and keeps them by id.  A lookup that failed is not retried for ``RETRY_AFTER_S``; a
registry that does not answer is not asked again for ``RETRY_AFTER_S`` either, so a page with
a dead registry costs one timeout, not one per record.
"""
from __future__ import annotations

import base64
import datetime as dt
import decimal
import importlib
import io
import json
import re
import struct
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from dataclasses import dataclass
from typing import Any, Callable

from kwire.schemas.types.protobuf_schema import read_message_indexes

TEXT_LIMIT = 20_000            # characters of a key/value shown
HEX_LIMIT = 512                # bytes shown as hex
MAGIC = 0
PREFIX = struct.Struct(">bI")  # magic, schema id
assert PREFIX.size == 5
REGISTRY_TIMEOUT_S = 4.0
RETRY_AFTER_S = 15.0
MAX_SCHEMAS = 1000             # parsed schemas kept (then the cache starts over)
MAX_REFERENCE_DEPTH = 16
_CONTROLS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")    # text has none but tab, LF, CR


@dataclass
class Shown:
    """One key, value or header value as the page shows it."""
    kind: str                       # null, empty, text, json, binary, avro, protobuf, json-schema
    size: int = 0
    text: str | None = None         # what is shown (pretty JSON, text); None for binary
    hex: str = ""
    data: Any = None                # the decoded value, for the JSON-path filter (None: none)
    has_data: bool = False
    schema_id: int | None = None
    subject: str | None = None
    error: str | None = None        # why decoding failed (the raw bytes are shown instead)
    cut: bool = False               # text or hex shown only in part
    escaped: str | None = None      # binary: the bytes as text, undecodable ones and controls escaped

    @property
    def label(self) -> str:
        names = {"json": "JSON", "avro": "Avro", "protobuf": "Protobuf", "json-schema": "JSON Schema",
                 "binary": "bytes", "text": "text", "null": "null", "empty": "empty"}
        return names.get(self.kind, self.kind)


def hex_of(data: bytes, limit: int = HEX_LIMIT) -> str:
    shown = data[:limit].hex(" ")
    return shown + (f" … (+{len(data) - limit} bytes)" if len(data) > limit else "")


def _cut(text: str) -> tuple[str, bool]:
    if len(text) <= TEXT_LIMIT:
        return text, False
    return text[:TEXT_LIMIT] + f"\n… ({len(text) - TEXT_LIMIT:,} more characters)", True


def pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=_plain)


def _plain(value: Any) -> Any:
    """What json.dumps cannot write itself (Avro bytes/decimals/dates, ...)."""
    if isinstance(value, (bytes, bytearray)):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            return "0x" + bytes(value).hex()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    return repr(value)


def show(data: bytes | None, registry: "RegistryDecoder | None" = None) -> Shown:
    """``data`` as the page shows it (see the module's doc).  Never raises."""
    if data is None:
        return Shown("null")
    data = bytes(data)
    if not data:
        return Shown("empty", text="", has_data=False)
    if registry is not None and len(data) >= PREFIX.size and data[0] == MAGIC:
        schema_id = PREFIX.unpack_from(data)[1]
        try:
            kind, subject, value = registry.decode(schema_id, data[PREFIX.size:])
        except Exception as exc:        # noqa: BLE001 - any decode failure is shown, never raised
            shown = _plain_bytes(data)
            shown.schema_id, shown.error = schema_id, f"schema {schema_id}: {_reason(exc)}"
            return shown
        text, cut = _cut(pretty(value))
        return Shown(kind, len(data), text, hex_of(data), value, True, schema_id, subject, cut=cut)
    return _plain_bytes(data)


def _escaped(data: bytes) -> str:
    text = data[:HEX_LIMIT].decode("utf-8", "backslashreplace")
    return _CONTROLS.sub(lambda m: f"\\x{ord(m.group()):02x}", text) + ("…" if len(data) > HEX_LIMIT else "")


def _plain_bytes(data: bytes) -> Shown:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is None or _CONTROLS.search(text):
        return Shown("binary", len(data), None, hex_of(data), cut=len(data) > HEX_LIMIT, escaped=_escaped(data))
    shown = Shown("text", len(data), hex=hex_of(data))
    if text.lstrip()[:1] in ("{", "[", '"') or _looks_scalar(text):
        try:
            value = json.loads(text)
        except ValueError:
            pass
        else:
            shown.data, shown.has_data = value, True
            if isinstance(value, (dict, list)):
                shown.kind = "json"
                text = pretty(value)
    shown.text, shown.cut = _cut(text)
    return shown


def _looks_scalar(text: str) -> bool:
    head = text.strip()[:1]
    return bool(head) and (head.isdigit() or head == "-" or text.strip() in ("true", "false", "null"))


def _reason(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text.splitlines()[0][:300]


# -- the Schema Registry -------------------------------------------------------------------

class RegistryError(Exception):
    """The registry refused or did not answer; ``str()`` says why."""


@dataclass
class _Schema:
    kind: str                                   # avro, protobuf, json-schema
    subject: str | None
    read: Callable[[bytes], Any]


class RegistryDecoder:
    """Decodes Confluent-framed payloads with schemas from the registry at ``url`` (blocking:
    call it from a worker thread).  Thread-safe; schemas are fetched once per id."""

    def __init__(self, url: str, timeout_s: float = REGISTRY_TIMEOUT_S):
        parts = urllib.parse.urlsplit(url.rstrip("/"))
        userinfo, _, host = parts.netloc.rpartition("@")
        self.base = urllib.parse.urlunsplit((parts.scheme, host, parts.path, "", ""))
        self._auth = None
        if userinfo:                    # http://user:password@host: HTTP basic authentication
            self._auth = "Basic " + base64.b64encode(urllib.parse.unquote(userinfo).encode()).decode()
        self.timeout_s = timeout_s
        self._schemas: dict[int, _Schema] = {}
        self._failed: dict[int, tuple[float, str]] = {}
        self._down: tuple[float, str] = (0.0, "")
        self._lock = threading.Lock()

    def decode(self, schema_id: int, payload: bytes) -> tuple[str, str | None, Any]:
        """(kind, subject, decoded value) of a framed payload.  Raises RegistryError when the
        schema cannot be had, ValueError (or the parser's error) when the payload does not fit it."""
        schema = self.schema(schema_id)
        return schema.kind, schema.subject, schema.read(payload)

    def schema(self, schema_id: int) -> _Schema:
        with self._lock:
            now = time.monotonic()
            if schema_id in self._schemas:
                return self._schemas[schema_id]
            failed = self._failed.get(schema_id)
            if failed and failed[0] > now:
                raise RegistryError(failed[1])
            if self._down[0] > now:
                raise RegistryError(self._down[1])
            try:
                schema = self._load(schema_id)
            except RegistryError as exc:
                self._failed[schema_id] = (now + RETRY_AFTER_S, str(exc))
                raise
            except (OSError, urllib.error.URLError) as exc:
                reason = f"the Schema Registry at {self.base} did not answer: {_reason(exc)}"
                self._down = (now + RETRY_AFTER_S, reason)
                raise RegistryError(reason) from None
            except Exception as exc:        # noqa: BLE001 - a schema that does not parse
                reason = f"the registry's schema does not parse: {_reason(exc)}"
                self._failed[schema_id] = (now + RETRY_AFTER_S, reason)
                raise RegistryError(reason) from None
            if len(self._schemas) >= MAX_SCHEMAS:
                self._schemas.clear()
            self._schemas[schema_id] = schema
            return schema

    def _get(self, path: str, **query: str) -> Any:
        url = self.base + path + ("?" + urllib.parse.urlencode(query) if query else "")
        request = urllib.request.Request(url, headers={"Accept": "application/vnd.schemaregistry.v1+json"})
        if self._auth:
            request.add_header("Authorization", self._auth)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                return json.loads(response.read(16 * 1024 * 1024))
        except urllib.error.HTTPError as exc:
            try:
                message = json.loads(exc.read(64 * 1024)).get("message") or exc.reason
            except (ValueError, AttributeError):
                message = exc.reason
            raise RegistryError(f"{message} (HTTP {exc.code})") from None

    def _load(self, schema_id: int) -> _Schema:
        found = self._get(f"/schemas/ids/{schema_id}")
        schema_type = found.get("schemaType") or "AVRO"
        try:
            subjects = self._get(f"/schemas/ids/{schema_id}/subjects")
            subject = ", ".join(subjects) if subjects else None
        except RegistryError:
            subject = None              # an older registry: the subject is only a label
        if schema_type == "AVRO":
            return _Schema("avro", subject, self._avro_reader(found))
        if schema_type == "JSON":
            return _Schema("json-schema", subject, _json_payload)
        if schema_type == "PROTOBUF":
            serialized = self._get(f"/schemas/ids/{schema_id}", format="serialized")
            return _Schema("protobuf", subject, self._protobuf_reader(serialized))
        raise RegistryError(f"schema type {schema_type} is not one the console decodes")

    def _version(self, reference: dict, **query: str) -> dict:
        subject = urllib.parse.quote(reference["subject"], safe="")
        return self._get(f"/subjects/{subject}/versions/{reference['version']}", **query)

    # -- Avro ----------------------------------------------------------------------------------
    def _avro_reader(self, found: dict) -> Callable[[bytes], Any]:
        import fastavro
        named: dict = {}
        self._avro_references(found.get("references") or [], named, 0)
        parsed = fastavro.parse_schema(json.loads(found["schema"]), named_schemas=named)

        def read(payload: bytes) -> Any:
            source = io.BytesIO(payload)
            value = fastavro.schemaless_reader(source, parsed, None)
            if source.tell() != len(payload):
                raise ValueError(f"{len(payload) - source.tell()} bytes after the Avro record")
            return value
        return read

    def _avro_references(self, references: list, named: dict, depth: int) -> None:
        import fastavro
        if depth > MAX_REFERENCE_DEPTH:
            raise RegistryError("schema references nest too deep")
        for reference in references:
            found = self._version(reference)
            self._avro_references(found.get("references") or [], named, depth + 1)
            fastavro.parse_schema(json.loads(found["schema"]), named_schemas=named)

    # -- Protobuf --------------------------------------------------------------------------
    def _protobuf_reader(self, found: dict) -> Callable[[bytes], Any]:
        from google.protobuf import descriptor_pb2, descriptor_pool, json_format
        from google.protobuf.message_factory import GetMessageClass
        pool = descriptor_pool.DescriptorPool()
        added: set[str] = set()
        main = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(found["schema"]))
        main.name = main.name or "kwire-console-schema.proto"
        self._protobuf_files(pool, main, found.get("references") or [], added, 0)
        file = pool.FindFileByName(main.name)
        top = [file.message_types_by_name[m.name] for m in main.message_type]

        def read(payload: bytes) -> Any:
            indexes, at = message_indexes(payload)
            descriptor = _message_at(top, indexes)
            message = GetMessageClass(descriptor)()
            message.ParseFromString(payload[at:])
            return json_format.MessageToDict(message, preserving_proto_field_name=True)
        return read

    def _protobuf_files(self, pool, proto, references: list, added: set, depth: int) -> None:
        from google.protobuf import descriptor_pb2
        if depth > MAX_REFERENCE_DEPTH:
            raise RegistryError("schema references nest too deep")
        by_name = {r["name"]: r for r in references}
        for dependency in proto.dependency:
            if dependency in added:
                continue
            if dependency in by_name:
                found = self._version(by_name[dependency], format="serialized")
                child = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(found["schema"]))
                child.name = dependency
                self._protobuf_files(pool, child, found.get("references") or [], added, depth + 1)
            else:
                pool.AddSerializedFile(_well_known(dependency))
                added.add(dependency)
        pool.Add(proto)
        added.add(proto.name)


def _json_payload(payload: bytes) -> Any:
    return json.loads(payload.decode("utf-8"))


def _well_known(name: str) -> bytes:
    """google/protobuf/*.proto, which registries leave out of the references."""
    from google.protobuf import descriptor_pool
    if name.startswith("google/protobuf/") and name.endswith(".proto"):
        module = name[len("google/protobuf/"):-len(".proto")] + "_pb2"
        try:
            importlib.import_module(f"google.protobuf.{module}")
        except ImportError:
            pass
    try:
        file = descriptor_pool.Default().FindFileByName(name)
    except KeyError:
        raise RegistryError(f"the schema imports {name}, which the registry did not reference") from None
    return file.serialized_pb


def message_indexes(payload: bytes) -> tuple[list[int], int]:
    """The Protobuf message indexes at the start of ``payload`` and where the message starts
    (the registry's own reader, kwire.schemas.types).  Raises ValueError."""
    indexes, at = read_message_indexes(payload)
    return list(indexes), at


def _message_at(top: list, indexes: list[int]):
    """The message descriptor the indexes name: ``top`` are the file's messages in declaration
    order, then each index picks a nested one."""
    ordered, descriptor = top, None
    for index in indexes:
        if descriptor is not None:
            ordered = list(descriptor.nested_types)
        if not 0 <= index < len(ordered):
            raise ValueError(f"message index {index} is not in the schema ({len(ordered)} messages)")
        descriptor = ordered[index]
    return descriptor
