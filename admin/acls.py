"""Kafka's ACL authorizer, sans-I/O: validation, an indexed store, the decision (the vocabulary,
bindings and filters are kwire.admin.acl_model, re-exported here).

Kafka's ZooKeeper-era ``AclAuthorizer`` and KRaft's ``StandardAuthorizer`` decide alike, and
this module decides as they do:

* An action is (principal, host, operation, resource type, literal resource name).  The
  principal is ``Type:name`` (``User:alice``; ``User:ANONYMOUS`` on an unauthenticated
  listener); the host is the client's address as Java prints it (``host_address``).
* ``super.users`` (``User:a;User:b``) may do anything, whatever the ACLs say.
* The ACLs that apply to a resource are those on the LITERAL name, on the LITERAL wildcard
  ``*``, and on every PREFIXED name that the resource name starts with.
* An applicable ACL matches the action when its principal is the action's or ``User:*`` (which
  matches principals of every type; ``Group:*`` is no wildcard), its host is the action's or
  ``*``, and its operation is the action's or ALL.  ALLOW ACLs also imply: READ, WRITE, DELETE
  and ALTER allow DESCRIBE, ALTER_CONFIGS allows DESCRIBE_CONFIGS.  DENY ACLs imply nothing
  (DENY READ does not deny DESCRIBE).
* A matching DENY denies; otherwise a matching ALLOW allows; otherwise denied - except when
  no ACL at all applies to the resource (for anyone, any operation): then
  ``allow.everyone.if.no.acl.found`` (default false) decides.

Cost of one decision: one dict probe for the literal name, one for ``*``, and one per distinct
prefix length among the PREFIXED ACLs of that resource type (a slice of the name each), then a
scan of the entries of the patterns found - independent of the number of ACLs on other
resources (measured: about 1 us a decision with a few ACLs, 3 us with 12,000 ACLs whose
PREFIXED names have 42 distinct lengths).  Changing the ACLs re-sorts that resource type's
prefix lengths when a length appears or disappears.  ``AclStore.describe`` with a MATCH or
exact filter costs the same; a filter with an ANY field scans every pattern.

Nothing here raises on a request's content: validation returns ``AclError`` values; the
store's ``prepare_*`` methods change nothing and ``apply`` cannot fail (a check/commit split,
so the server persists a change before it takes effect).  ``ValueError`` is raised only for a
programming error (an action with an ANY/UNKNOWN operation or resource type) and
``ConfigError`` for a bad authorizer configuration.
"""
from __future__ import annotations

import collections
import dataclasses
import ipaddress
from typing import Any, Iterable, Iterator, Mapping, NamedTuple

from kwire.codecs.errors import ErrorCode

from .acl_model import (  # noqa: F401  (re-exported: kwire.admin.acls is where callers find them)
    ANY_FILTER, CLUSTER_NAME, SUPPORTED_OPERATIONS, WILDCARD_HOST, WILDCARD_PRINCIPAL, WILDCARD_RESOURCE,
    AccessControlEntry, AclBinding, AclBindingFilter, AclOperation, AclPermissionType, PatternType,
    ResourcePattern, ResourceType)
from .config_def import ConfigError

_LITERAL, _PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
_ALLOW, _DENY, _ALL = AclPermissionType.ALLOW, AclPermissionType.DENY, AclOperation.ALL
# ALLOW ACLs on these operations also allow the key (only ALLOW: a DENY implies nothing)
_ALLOW_IMPLIES: dict[AclOperation, frozenset[AclOperation]] = {
    AclOperation.DESCRIBE: frozenset({AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE,
                                      AclOperation.DELETE, AclOperation.ALTER, _ALL}),
    AclOperation.DESCRIBE_CONFIGS: frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS, _ALL}),
}


# -- validation ----------------------------------------------------------------------------------
class AclError(NamedTuple):
    """An ``error_code``/``error_message`` pair as the ACL responses carry them."""
    code: ErrorCode = ErrorCode.NONE
    message: str | None = None


OK = AclError()


def _invalid(message: str) -> AclError:
    return AclError(ErrorCode.INVALID_REQUEST, message)


def check_creation(binding: AclBinding, *, zookeeper: bool = False) -> AclError:
    """Whether CreateAcls may store this binding: ``OK`` or an INVALID_REQUEST error; never raises.

    Kafka's rules (``AclApis``, ``AclControlManager.validateNewAcl``): the CLUSTER resource is
    named ``kafka-cluster``; no empty name; a concrete resource type, LITERAL or PREFIXED,
    a concrete operation (ALL allowed), ALLOW or DENY; a principal ``Type:name``.  With
    ``zookeeper`` (the name becomes a znode path, as under AclAuthorizer) a name may not
    contain ``/`` nor be ``.`` or ``..``.  (Kafka fails a request carrying UNKNOWN or ANY codes
    while parsing it; kwire answers INVALID_REQUEST for that creation instead.)
    """
    rtype, name, ptype, principal, host, operation, permission = binding
    if rtype in (ResourceType.UNKNOWN, ResourceType.ANY):
        return _invalid(f"Invalid resourceType {rtype.name}")
    if ptype not in (_LITERAL, _PREFIXED):
        return _invalid(f"Invalid patternType {ptype.name}")
    if operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        return _invalid(f"Invalid operation {operation.name}")
    if permission not in (_ALLOW, _DENY):
        return _invalid(f"Invalid permissionType {permission.name}")
    if rtype is ResourceType.CLUSTER and name != CLUSTER_NAME:
        return _invalid(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    if not name:
        return _invalid("Invalid empty resource name")
    if not isinstance(principal, str) or ":" not in principal:
        return _invalid(f"Could not parse principal from `{principal}` (no colon is present separating "
                        "the principal type from the principal name)")
    if not isinstance(host, str):
        return _invalid("Invalid null host")
    if zookeeper and ("/" in name or name in (".", "..")):
        return _invalid(f"ACL binding contains invalid resource name: {name}")
    return OK


def check_filter(acl_filter: AclBindingFilter) -> AclError:
    """DescribeAcls/DeleteAcls: a filter with an UNKNOWN field is INVALID_REQUEST; never raises."""
    if acl_filter.is_unknown():
        return _invalid(f"Filter contains UNKNOWN elements: {acl_filter}")
    return OK


# -- the store -----------------------------------------------------------------------------------
class AclChange(NamedTuple):
    """What a CreateAcls/DeleteAcls will do, computed before anything changes."""
    added: tuple[AclBinding, ...] = ()
    removed: tuple[AclBinding, ...] = ()

    @property
    def is_empty(self) -> bool:
        return not self.added and not self.removed

    def patterns(self) -> set[ResourcePattern]:
        """The resource patterns whose ACL sets change (one znode each in ZooKeeper)."""
        return {b.pattern for b in (*self.added, *self.removed)}


class DeleteResult(NamedTuple):
    """One DeleteAcls filter's result: its error and the bindings it deletes."""
    error: AclError
    bindings: tuple[AclBinding, ...]


class AclStore:
    """The ACLs, indexed for per-request decisions (see the module docstring for the cost).

    ACLs are kept per resource pattern, as Kafka's ACL cache and ZooKeeper layout keep them; a
    pattern with no ACLs left is dropped, so every pattern present applies.  Mutation goes
    through ``apply`` or ``set_entries`` only.
    """

    def __init__(self, bindings: Iterable[AclBinding] = ()):
        self._acls: dict[ResourcePattern, dict[AccessControlEntry, None]] = {}
        # per resource type: how many PREFIXED patterns have each name length, and those lengths sorted
        self._prefix_counts: dict[ResourceType, collections.Counter[int]] = collections.defaultdict(
            collections.Counter)
        self._prefix_lengths: dict[ResourceType, tuple[int, ...]] = {}
        self.apply(AclChange(added=tuple(bindings)))

    def __len__(self) -> int:
        return sum(len(entries) for entries in self._acls.values())

    def __iter__(self) -> Iterator[AclBinding]:
        for pattern, entries in self._acls.items():
            for entry in entries:
                yield AclBinding.of(pattern, entry)

    def __contains__(self, binding: object) -> bool:
        if not isinstance(binding, AclBinding):
            return False
        return binding.entry in self._acls.get(binding.pattern, ())

    def patterns(self) -> list[ResourcePattern]:
        return list(self._acls)

    def entries(self, pattern: ResourcePattern) -> tuple[AccessControlEntry, ...]:
        return tuple(self._acls.get(pattern, ()))

    # - changes -
    def prepare_create(self, bindings: Iterable[AclBinding], *,
                       zookeeper: bool = False) -> tuple[list[AclError], AclChange]:
        """CreateAcls: one result per creation (in order) and the change; changes nothing.

        An ACL that already exists, or appears twice, succeeds and is added once.  Never raises.
        """
        results, added = [], {}
        for binding in bindings:
            error = check_creation(binding, zookeeper=zookeeper)
            results.append(error)
            if error is OK and binding not in self:
                added[binding] = None
        return results, AclChange(added=tuple(added))

    def prepare_delete(self, filters: Iterable[AclBindingFilter]) -> tuple[list[DeleteResult], AclChange]:
        """DeleteAcls: per filter its error and the bindings it matches; changes nothing.

        As StandardAuthorizer does, every filter reports every binding it matches, so a binding
        matched by two filters is listed under both (and deleted once).  Never raises.
        """
        results, removed = [], {}
        for acl_filter in filters:
            error = check_filter(acl_filter)
            matched = () if error is not OK else tuple(self.describe(acl_filter))
            results.append(DeleteResult(error, matched))
            removed.update(dict.fromkeys(matched))
        return results, AclChange(removed=tuple(removed))

    def apply(self, change: AclChange) -> None:
        """Make a prepared change take effect; never raises."""
        for binding in change.removed:
            pattern = binding.pattern
            entries = self._acls.get(pattern)
            if entries is None or binding.entry not in entries:
                continue
            del entries[binding.entry]
            if not entries:
                self._drop(pattern)
        for binding in change.added:
            pattern = binding.pattern
            entries = self._acls.get(pattern)
            if entries is None:
                entries = self._acls[pattern] = {}
                if pattern.pattern_type == _PREFIXED:
                    self._count_prefix(pattern, +1)
            entries[binding.entry] = None

    def set_entries(self, pattern: ResourcePattern, entries: Iterable[AccessControlEntry]) -> None:
        """Replace one pattern's ACLs (a ZooKeeper znode re-read after a change notice); never raises."""
        self.apply(AclChange(removed=tuple(AclBinding.of(pattern, e) for e in self.entries(pattern))))
        self.apply(AclChange(added=tuple(AclBinding.of(pattern, e) for e in entries)))

    def _drop(self, pattern: ResourcePattern) -> None:
        del self._acls[pattern]
        if pattern.pattern_type == _PREFIXED:
            self._count_prefix(pattern, -1)

    def _count_prefix(self, pattern: ResourcePattern, delta: int) -> None:
        counts = self._prefix_counts[pattern.resource_type]
        counts[len(pattern.name)] += delta
        if counts[len(pattern.name)] <= 0:
            del counts[len(pattern.name)]
        self._prefix_lengths[pattern.resource_type] = tuple(sorted(counts))

    # - queries -
    def applicable(self, resource_type: ResourceType, name: str) -> list[dict[AccessControlEntry, None]]:
        """The entry sets of every pattern that applies to this resource (literal, ``*``, prefixes)."""
        acls, found = self._acls, []
        entries = acls.get((resource_type, name, _LITERAL))
        if entries:
            found.append(entries)
        if name != WILDCARD_RESOURCE:
            entries = acls.get((resource_type, WILDCARD_RESOURCE, _LITERAL))
            if entries:
                found.append(entries)
        size = len(name)
        for length in self._prefix_lengths.get(resource_type, ()):
            if length > size:
                break
            entries = acls.get((resource_type, name[:length], _PREFIXED))
            if entries:
                found.append(entries)
        return found

    def describe(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        """DescribeAcls: the bindings the filter matches, sorted; never raises."""
        return sorted(b for pattern in self._candidate_patterns(acl_filter)
                      for b in self._matching_entries(pattern, acl_filter))

    def _candidate_patterns(self, acl_filter: AclBindingFilter) -> Iterable[ResourcePattern]:
        rtype, name, ptype = acl_filter.resource_type, acl_filter.resource_name, acl_filter.pattern_type
        if name is None or rtype in (ResourceType.ANY, ResourceType.UNKNOWN) or ptype == PatternType.ANY:
            return [p for p in self._acls if acl_filter.matches_pattern(p)]
        if ptype in (_LITERAL, _PREFIXED):
            return [ResourcePattern(rtype, name, ptype)]
        if ptype == PatternType.MATCH:
            lengths = [n for n in self._prefix_lengths.get(rtype, ()) if n <= len(name)]
            return dict.fromkeys([ResourcePattern(rtype, name, _LITERAL),
                                  ResourcePattern(rtype, WILDCARD_RESOURCE, _LITERAL),
                                  *(ResourcePattern(rtype, name[:n], _PREFIXED) for n in lengths)])
        return []   # UNKNOWN pattern type matches nothing

    def _matching_entries(self, pattern: ResourcePattern, acl_filter: AclBindingFilter) -> Iterator[AclBinding]:
        for entry in self._acls.get(pattern, ()):
            if acl_filter.matches_entry(entry):
                yield AclBinding.of(pattern, entry)


def group_by_pattern(bindings: Iterable[AclBinding]) -> list[tuple[ResourcePattern, list[AccessControlEntry]]]:
    """DescribeAcls' response shape: one resource per pattern with its ACLs, in first-seen order."""
    grouped: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for binding in bindings:
        grouped.setdefault(binding.pattern, []).append(binding.entry)
    return list(grouped.items())


# -- configuration -------------------------------------------------------------------------------
AUTHORIZER_CLASS_NAMES = ("kafka.security.authorizer.AclAuthorizer",
                          "org.apache.kafka.metadata.authorizer.StandardAuthorizer")
# key -> Kafka's default (super.users and allow.everyone.if.no.acl.found are the authorizer's own keys)
AUTHORIZER_DEFAULTS: dict[str, Any] = {
    "authorizer.class.name": "",
    "super.users": "",
    "allow.everyone.if.no.acl.found": False,
}


@dataclasses.dataclass(frozen=True)
class AuthorizerConfig:
    class_name: str = ""
    super_users: frozenset[str] = frozenset()
    allow_everyone_if_no_acl_found: bool = False

    @property
    def enabled(self) -> bool:
        return bool(self.class_name)

    @classmethod
    def from_values(cls, values: Mapping[str, Any]) -> AuthorizerConfig:
        """From broker config values (text or typed); absent keys take Kafka's defaults.

        Raises ConfigError for a class name kwire does not implement, a super user that is not
        ``Type:name``, or an ``allow.everyone.if.no.acl.found`` that is not true/false.
        """
        class_name = str(values.get("authorizer.class.name") or "").strip()
        if class_name and class_name not in AUTHORIZER_CLASS_NAMES:
            raise ConfigError(f"Invalid value {class_name} for configuration authorizer.class.name: kwire "
                              f"implements {' and '.join(AUTHORIZER_CLASS_NAMES)}")
        super_users = set()
        for text in str(values.get("super.users") or "").split(";"):
            principal = text.strip()
            if principal and ":" not in principal:
                raise ConfigError(f"Invalid value {principal} in configuration super.users: expected a "
                                  "string in format principalType:principalName")
            if principal:
                super_users.add(principal)
        allow = values.get("allow.everyone.if.no.acl.found", False)
        if not isinstance(allow, bool):
            text = str(allow).strip().lower()
            if text not in ("true", "false"):
                raise ConfigError(f"Invalid value {allow} for configuration allow.everyone.if.no.acl.found: "
                                  "Expected value to be either true or false")
            allow = text == "true"
        return cls(class_name, frozenset(super_users), allow)


def host_address(ip: str) -> str:
    """A client address as Java's ``InetAddress.getHostAddress`` prints it, the form ACL hosts use.

    IPv6 is written in full without zero compression (``0:0:0:0:0:0:0:1``, not ``::1``), an
    IPv4-mapped address as IPv4; a scope suffix is kept.  Text that is not an address is
    returned unchanged; never raises.
    """
    base, sep, scope = ip.partition("%")
    try:
        address = ipaddress.ip_address(base)
    except ValueError:
        return ip
    if address.version == 4:
        return str(address)
    if address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    groups = address.exploded.split(":")
    return ":".join(format(int(g, 16), "x") for g in groups) + sep + scope


# -- the authorizer ------------------------------------------------------------------------------
def _check_action(operation: AclOperation, resource_type: ResourceType) -> None:
    if operation in (AclOperation.ANY, AclOperation.UNKNOWN):
        raise ValueError(f"an action needs a concrete operation, not {operation.name}")
    if resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
        raise ValueError(f"an action needs a concrete resource type, not {resource_type.name}")


class Authorizer:
    """Kafka's ACL decision over an ``AclStore``; disabled (no ``authorizer.class.name``) allows all."""

    def __init__(self, config: AuthorizerConfig, store: AclStore | None = None):
        self.config = config
        self.store = store if store is not None else AclStore()

    @property
    def enabled(self) -> bool:
        return self.config.enabled

    def authorize(self, principal: str, host: str, operation: AclOperation,
                  resource_type: ResourceType, resource_name: str) -> bool:
        """Whether the principal at host may do operation on the named resource.

        Raises ValueError only for an ANY/UNKNOWN operation or resource type (a caller's bug).
        """
        if not self.config.enabled or principal in self.config.super_users:
            return True
        _check_action(operation, resource_type)
        allow_ops = _ALLOW_IMPLIES.get(operation) or (operation, _ALL)
        applicable = self.store.applicable(resource_type, resource_name)
        if not applicable:
            return self.config.allow_everyone_if_no_acl_found
        allowed = False
        for entries in applicable:
            for acl_principal, acl_host, acl_op, permission in entries:
                if (acl_principal != principal and acl_principal != WILDCARD_PRINCIPAL) or (
                        acl_host != host and acl_host != WILDCARD_HOST):
                    continue
                if permission == _DENY:
                    if acl_op == operation or acl_op == _ALL:
                        return False
                elif acl_op in allow_ops:
                    allowed = True
        return allowed

    def filter_authorized(self, principal: str, host: str, operation: AclOperation,
                          resource_type: ResourceType, names: Iterable[str]) -> set[str]:
        """The names (topics, groups...) the action is allowed on, each decided once."""
        return {name for name in set(names) if self.authorize(principal, host, operation, resource_type, name)}

    def authorize_by_resource_type(self, principal: str, host: str, operation: AclOperation,
                                   resource_type: ResourceType) -> bool:
        """Whether the action is allowed on at least some resource of the type (KIP-679).

        Kafka's ``Authorizer.authorizeByResourceType`` default, which InitProducerId uses to
        let an idempotent producer with WRITE on any topic in without IDEMPOTENT_WRITE: first an
        ordinary decision on the made-up name ``hardcode`` (so super users and, when no ACL
        applies to that name, allow.everyone.if.no.acl.found pass); then allowed when an
        ALLOW ACL of exactly this operation or ALL (no implied operations here) on a literal
        name or prefix is not dominated by a DENY on the same literal or on a prefix of it.  A
        DENY on ``*`` or on the prefix "" denies outright.  Raises ValueError as ``authorize``.
        """
        if self.authorize(principal, host, operation, resource_type, "hardcode"):
            return True
        denied_literals, denied_prefixes, allowed, wildcard_allowed = set(), set(), [], False
        for pattern in self.store.patterns():
            if pattern.resource_type != resource_type:
                continue
            for acl_principal, acl_host, acl_op, permission in self.store.entries(pattern):
                if acl_host not in (host, WILDCARD_HOST) or acl_principal not in (principal, WILDCARD_PRINCIPAL) \
                        or acl_op not in (operation, _ALL):
                    continue
                if permission == _DENY:
                    if pattern.pattern_type == _LITERAL:
                        if pattern.name == WILDCARD_RESOURCE:
                            return False
                        denied_literals.add(pattern.name)
                    else:
                        if pattern.name == "":
                            return False
                        denied_prefixes.add(pattern.name)
                elif pattern == (resource_type, WILDCARD_RESOURCE, _LITERAL):
                    wildcard_allowed = True   # a DENY on * met later still wins
                else:
                    allowed.append(pattern)
        if wildcard_allowed:
            return True
        for _rtype, name, ptype in allowed:
            if ptype == _LITERAL and name in denied_literals:
                continue
            if not any(name[:n] in denied_prefixes for n in range(1, len(name) + 1)):
                return True
        return False

    def authorized_operations(self, principal: str, host: str, resource_type: ResourceType,
                              resource_name: str) -> int:
        """The ``*_authorized_operations`` bit field: bit ``op`` set for each supported op allowed.

        Disabled: every supported operation.  (Kafka answers a cluster bit field of 0 without
        DESCRIBE on the cluster; that gate is the caller's.)  Raises ValueError for a resource
        type with no operations (ANY, UNKNOWN).
        """
        if resource_type not in SUPPORTED_OPERATIONS:
            raise ValueError(f"no operations are defined on resource type {resource_type.name}")
        bits = 0
        for operation in SUPPORTED_OPERATIONS[resource_type]:
            if self.authorize(principal, host, operation, resource_type, resource_name):
                bits |= 1 << operation
        return bits
