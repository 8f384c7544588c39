"""Where ACLs live: kwire's JSON file (single node) and Kafka's ZooKeeper layout (cluster mode).

Pure encode/decode; the server layer does the reads and writes.

File (single node): ``ACL_FILE`` in the first log directory, beside meta.properties, one
document rewritten whole (atomically) on every change:

    {"version":1,"acls":[{"resourceType":"TOPIC","resourceName":"orders","patternType":"LITERAL",
      "principal":"User:alice","host":"*","operation":"READ","permissionType":"ALLOW"}, ...]}

    Names are Kafka's enum names, as ``kafka-acls.sh --list`` prints them.

ZooKeeper (Kafka's ``kafka.zk.ZkData``, read and written by the ZooKeeper-mode AclAuthorizer):

    /kafka-acl/<ResourceType>/<name>                     a LITERAL pattern's ACLs
    /kafka-acl-extended/prefixed/<ResourceType>/<name>   a PREFIXED pattern's ACLs
        {"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow",
          "operation":"Read","host":"*"}]}
        <ResourceType>, operation and permissionType in Kafka's PascalCase (Topic, Group,
        Cluster, TransactionalId, DelegationToken, User; Read, ClusterAction, IdempotentWrite,
        All; Allow, Deny).  A pattern left with no ACLs has its znode deleted.
    /kafka-acl-changes/acl_changes_<seq>                 persistent sequential, after a LITERAL
        pattern changed: ``TOPIC:orders`` (the ResourceType enum name, a colon, the name)
    /kafka-acl-extended-changes/acl_changes_<seq>        after a PREFIXED pattern changed:
        {"version":1,"resourceType":"TOPIC","name":"ord","patternType":"PREFIXED"}

    Every broker watches both change paths and re-reads the named pattern's znode.  Kafka
    creates the roots and one child per resource type under each (``ACL_ZK_PATHS``).

Every ``decode_*``/``parse_*``/``from_*`` raises ``AclFormatError`` (a ValueError) when the
input is not this format, and nothing else.
"""
from __future__ import annotations

import json
from typing import Any, Callable, Iterable, Mapping

from .acls import (
    AccessControlEntry, AclBinding, AclChange, AclOperation, AclPermissionType, AclStore, PatternType,
    ResourcePattern, ResourceType,
)

ACL_FILE = "__kwire_acls.json"
FILE_VERSION = 1
ZNODE_VERSION = 1
LITERAL_ROOT = "/kafka-acl"
EXTENDED_ROOT = "/kafka-acl-extended"
PREFIXED_ROOT = "/kafka-acl-extended/prefixed"
LITERAL_CHANGES = "/kafka-acl-changes"
EXTENDED_CHANGES = "/kafka-acl-extended-changes"
CHANGE_PREFIX = "acl_changes_"
CONCRETE_RESOURCE_TYPES = tuple(t for t in ResourceType if t not in (ResourceType.UNKNOWN, ResourceType.ANY))
_ROOTS = {PatternType.LITERAL: LITERAL_ROOT, PatternType.PREFIXED: PREFIXED_ROOT}
# what Kafka's createAclPaths makes before any ACL exists
ACL_ZK_PATHS = (
    LITERAL_ROOT, *(f"{LITERAL_ROOT}/{t.pascal_name}" for t in CONCRETE_RESOURCE_TYPES),
    EXTENDED_ROOT, PREFIXED_ROOT, *(f"{PREFIXED_ROOT}/{t.pascal_name}" for t in CONCRETE_RESOURCE_TYPES),
    LITERAL_CHANGES, EXTENDED_CHANGES,
)


class AclFormatError(ValueError):
    """Stored ACL data (file or znode) is not in the expected format."""


def _dumps(doc: Any) -> bytes:
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()


def _loads(data: bytes | str, what: str) -> Any:
    try:
        return json.loads(data)
    except (ValueError, TypeError) as e:   # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise AclFormatError(f"{what}: not JSON: {e}") from None


def _parse(enum_type, text: Any, what: str):
    member = enum_type.from_name(text) if isinstance(text, str) else enum_type.UNKNOWN
    if member in (enum_type.UNKNOWN, getattr(enum_type, "ANY", None), getattr(enum_type, "MATCH", None)):
        raise AclFormatError(f"{what}: {text!r} is not a {enum_type.__name__}")
    return member


def _string(item: Mapping, key: str, what: str) -> str:
    value = item.get(key)
    if not isinstance(value, str):
        raise AclFormatError(f"{what}: {key} is not a string: {value!r}")
    return value


def _entry(item: Any, what: str) -> AccessControlEntry:
    if not isinstance(item, dict):
        raise AclFormatError(f"{what}: an ACL is not an object: {item!r}")
    principal = _string(item, "principal", what)
    if ":" not in principal:
        raise AclFormatError(f"{what}: principal {principal!r} is not Type:name")
    return AccessControlEntry(principal, _string(item, "host", what),
                              _parse(AclOperation, item.get("operation"), what),
                              _parse(AclPermissionType, item.get("permissionType"), what))


def _acl_list(doc: Any, version: int, what: str) -> list:
    if not isinstance(doc, dict) or doc.get("version") != version or not isinstance(doc.get("acls"), list):
        raise AclFormatError(f"{what}: expected {{\"version\":{version},\"acls\":[...]}}")
    return doc["acls"]


# -- the single-node file ------------------------------------------------------------------------
def encode_file(bindings: Iterable[AclBinding]) -> bytes:
    """The file's bytes for these ACLs (sorted, so equal sets give equal bytes)."""
    return _dumps({"version": FILE_VERSION, "acls": [
        {"resourceType": b.resource_type.name, "resourceName": b.resource_name, "patternType": b.pattern_type.name,
         "principal": b.principal, "host": b.host, "operation": b.operation.name,
         "permissionType": b.permission_type.name} for b in sorted(bindings)]})


def decode_file(data: bytes) -> list[AclBinding]:
    """The ACLs in a file written by ``encode_file``; raises AclFormatError."""
    bindings = []
    for item in _acl_list(_loads(data, "ACL file"), FILE_VERSION, "ACL file"):
        entry = _entry(item, "ACL file")
        rtype = _parse(ResourceType, item.get("resourceType"), "ACL file")
        ptype = _parse(PatternType, item.get("patternType"), "ACL file")
        bindings.append(AclBinding.of(ResourcePattern(rtype, _string(item, "resourceName", "ACL file"), ptype),
                                      entry))
    return bindings


# -- ZooKeeper -----------------------------------------------------------------------------------
def znode_path(pattern: ResourcePattern) -> str:
    """The znode holding a LITERAL or PREFIXED pattern's ACLs; raises AclFormatError otherwise."""
    root = _ROOTS.get(pattern.pattern_type)
    if root is None or pattern.resource_type not in CONCRETE_RESOURCE_TYPES:
        raise AclFormatError(f"no znode for {pattern}")
    return f"{root}/{pattern.resource_type.pascal_name}/{pattern.name}"


def parse_znode_path(path: str) -> ResourcePattern:
    """The pattern a resource znode's path names; raises AclFormatError for any other path."""
    for ptype, root in _ROOTS.items():
        if path.startswith(root + "/"):
            type_name, sep, name = path[len(root) + 1:].partition("/")
            if sep and name and "/" not in name:
                return ResourcePattern(_parse(ResourceType, type_name, path), name, ptype)
    raise AclFormatError(f"{path!r} is not an ACL resource znode")


def encode_znode(entries: Iterable[AccessControlEntry]) -> bytes:
    """A resource znode's JSON, as Kafka's ``ResourceZNode.encode`` writes it (entries sorted)."""
    return _dumps({"version": ZNODE_VERSION, "acls": [
        {"principal": e.principal, "permissionType": e.permission_type.pascal_name,
         "operation": e.operation.pascal_name, "host": e.host} for e in sorted(set(entries))]})


def decode_znode(data: bytes | None) -> list[AccessControlEntry]:
    """A resource znode's ACLs; empty data is no ACLs (as Kafka reads it); raises AclFormatError."""
    if not data:
        return []
    return [_entry(item, "ACL znode") for item in _acl_list(_loads(data, "ACL znode"), ZNODE_VERSION, "ACL znode")]


def to_znodes(store: AclStore) -> dict[str, bytes]:
    """Every non-empty pattern's znode path and bytes: the whole store in Kafka's layout."""
    return {znode_path(pattern): encode_znode(store.entries(pattern)) for pattern in store.patterns()}


def from_znodes(znodes: Mapping[str, bytes | None],
                on_error: Callable[[str, ResourcePattern, AclFormatError], Iterable[AccessControlEntry]]
                | None = None) -> AclStore:
    """A store from resource znodes (path -> data), as read at start-up.

    A path that names no resource pattern raises AclFormatError.  So does data that is not a
    resource znode's, unless ``on_error`` is given: the pattern then gets the entries
    ``on_error(path, pattern, error)`` returns (which may raise instead).
    """
    store = AclStore()
    for path, data in znodes.items():
        pattern = parse_znode_path(path)
        try:
            entries = decode_znode(data)
        except AclFormatError as exc:
            if on_error is None:
                raise
            entries = on_error(path, pattern, exc)
        store.apply(AclChange(added=tuple(AclBinding.of(pattern, entry) for entry in entries)))
    return store


def zk_writes(store: AclStore, change: AclChange) -> dict[str, bytes | None]:
    """What to write for a prepared (not yet applied) change: path -> new bytes, or None to delete.

    Raises AclFormatError only for a pattern with no znode (not LITERAL/PREFIXED), which
    ``check_creation`` never lets in.
    """
    writes = {}
    for pattern in change.patterns():
        entries = dict.fromkeys(store.entries(pattern))
        for binding in change.removed:
            if binding.pattern == pattern:
                entries.pop(binding.entry, None)
        entries.update(dict.fromkeys(b.entry for b in change.added if b.pattern == pattern))
        writes[znode_path(pattern)] = encode_znode(entries) if entries else None
    return writes


def change_notification(pattern: ResourcePattern) -> tuple[str, bytes]:
    """The sequential znode to create after a pattern's znode changed: (path prefix, data)."""
    if pattern.pattern_type == PatternType.LITERAL:
        return f"{LITERAL_CHANGES}/{CHANGE_PREFIX}", f"{pattern.resource_type.name}:{pattern.name}".encode()
    return f"{EXTENDED_CHANGES}/{CHANGE_PREFIX}", _dumps({
        "version": 1, "resourceType": pattern.resource_type.name, "name": pattern.name,
        "patternType": pattern.pattern_type.name})


def decode_change_notification(path: str, data: bytes) -> ResourcePattern:
    """The pattern a change notice under ``LITERAL_CHANGES`` or ``EXTENDED_CHANGES`` names."""
    if path.startswith(LITERAL_CHANGES + "/"):
        try:
            type_name, sep, name = data.decode().partition(":")
        except UnicodeDecodeError:
            raise AclFormatError(f"{path}: not UTF-8") from None
        if not sep:
            raise AclFormatError(f"{path}: expected ResourceType:name, got {data!r}")
        return ResourcePattern(_parse(ResourceType, type_name, path), name, PatternType.LITERAL)
    if path.startswith(EXTENDED_CHANGES + "/"):
        doc = _loads(data, path)
        if not isinstance(doc, dict) or not isinstance(doc.get("version"), int) or doc["version"] > 1:
            raise AclFormatError(f"{path}: unsupported ACL change event {doc!r}")
        return ResourcePattern(_parse(ResourceType, doc.get("resourceType"), path), _string(doc, "name", path),
                               _parse(PatternType, doc.get("patternType"), path))
    raise AclFormatError(f"{path!r} is not an ACL change notice")
