"""Message specs for the APIs kafka-python 3.0 does not ship, in Kafka's JSON spec format.

kafka-python's generated codec reads Kafka's JSON message specs from its package data;
its 3.0 series stops before the Kafka 4.x group protocols (ConsumerGroupHeartbeat,
the share-group APIs, ...).  The specs of those APIs are written here, field by field
from Kafka's protocol documentation, in the same format (``{Name}Request.json`` /
``{Name}Response.json``: apiKey, validVersions, flexibleVersions, fields), and fed to
the same generator through its ``load_json`` package hook.  Nothing is hand-encoded.

Each ``<Name>Request.json`` with its ``<Name>Response.json`` becomes the pair of classes
``<Name>Request`` / ``<Name>Response`` in this module; ``kwire.codecs.messages`` picks
them up beside kafka-python's own.  An API key that kafka-python already has is an
error (its spec wins; drop the file here when it starts shipping one).

The ``type: "data"`` specs here (``OffsetCommitKey.json``, ``TransactionLogValue.json``,
``ShareSnapshotValue.json``, ...) are the coordinator records' keys and values, written
from Kafka's record definitions in the same format; ``kwire.codecs.record_specs`` loads
them, and they are not API messages.
"""
from __future__ import annotations

import importlib.resources
import sys
import types

from kafka.protocol.api_message import ApiMessage

_THIS = sys.modules[__name__]


def _names() -> list[str]:
    files = {entry.name for entry in importlib.resources.files(__name__).iterdir()}
    return sorted(name[: -len("Request.json")] for name in files
                  if name.endswith("Request.json") and name.replace("Request.json", "Response.json") in files)


def _define(name: str) -> type:
    cls = types.new_class(name, (ApiMessage,), {"load_json": _THIS})
    cls.__module__ = __name__
    setattr(_THIS, name, cls)
    return cls


NAMES = _names()
for _name in NAMES:
    _define(_name + "Request")
    _define(_name + "Response")
__all__ = [n + suffix for n in NAMES for suffix in ("Request", "Response")]
