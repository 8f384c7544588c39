"""The vocabulary of Kafka's ACLs, sans-I/O: the enums with their wire codes, resource patterns,
access control entries, bindings (one ACL) and the filters DescribeAcls and DeleteAcls carry.

The decision, validation and the indexed store built on them are kwire.admin.acls, which
re-exports every name defined here.
"""
from __future__ import annotations

import enum
from typing import NamedTuple


class _AclEnum(enum.IntEnum):
    """An enum with Kafka's wire codes; unknown codes and names become UNKNOWN, as Kafka's do."""

    @classmethod
    def from_code(cls, code: int):
        """The member with this wire code, or UNKNOWN (Kafka's ``fromCode``); never raises."""
        try:
            return cls(code)
        except ValueError:
            return cls.UNKNOWN  # type: ignore[attr-defined]

    @classmethod
    def from_name(cls, name: str):
        """Parse ``Read``, ``READ``, ``ClusterAction`` or ``CLUSTER_ACTION``; UNKNOWN otherwise."""
        wanted = name.replace("_", "").upper() if isinstance(name, str) else ""
        for member in cls:
            if member.name.replace("_", "") == wanted:
                return member
        return cls.UNKNOWN  # type: ignore[attr-defined]

    @property
    def pascal_name(self) -> str:
        """Kafka's ``SecurityUtils`` spelling used in ZooKeeper: ``TransactionalId``, ``ClusterAction``."""
        return "".join(part.capitalize() for part in self.name.split("_"))


class ResourceType(_AclEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(_AclEnum):
    UNKNOWN = 0
    ANY = 1       # filters only: any pattern type, exact name
    MATCH = 2     # filters only: every pattern that would apply to the name
    LITERAL = 3
    PREFIXED = 4


class AclOperation(_AclEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(_AclEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


CLUSTER_NAME = "kafka-cluster"
WILDCARD_RESOURCE = "*"
WILDCARD_PRINCIPAL = "User:*"
WILDCARD_HOST = "*"

_LITERAL = PatternType.LITERAL

# Kafka's AclEntry.supportedOperations: what authorized_operations reports per resource type
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DESCRIBE,
                         AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE_CONFIGS,
                         AclOperation.ALTER_CONFIGS),
    ResourceType.GROUP: (AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE,
                         AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS),
    ResourceType.CLUSTER: (AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
                           AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
                           AclOperation.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (AclOperation.DESCRIBE, AclOperation.WRITE),
    ResourceType.DELEGATION_TOKEN: (AclOperation.DESCRIBE,),
    ResourceType.USER: (AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS),
}


class ResourcePattern(NamedTuple):
    resource_type: ResourceType
    name: str
    pattern_type: PatternType


class AccessControlEntry(NamedTuple):
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType


class AclBinding(NamedTuple):
    """One ACL: a resource pattern and an entry, flat as CreateAcls/DescribeAcls carry them."""
    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    @classmethod
    def of(cls, pattern: ResourcePattern, entry: AccessControlEntry) -> AclBinding:
        return cls(*pattern, *entry)

    @classmethod
    def from_wire(cls, resource_type: int, resource_name: str, pattern_type: int, principal: str,
                  host: str, operation: int, permission_type: int) -> AclBinding:
        """From a CreateAcls creation's fields; unknown codes become UNKNOWN (never raises)."""
        return cls(ResourceType.from_code(resource_type), resource_name, PatternType.from_code(pattern_type),
                   principal, host, AclOperation.from_code(operation),
                   AclPermissionType.from_code(permission_type))

    @property
    def pattern(self) -> ResourcePattern:
        return ResourcePattern(self.resource_type, self.resource_name, self.pattern_type)

    @property
    def entry(self) -> AccessControlEntry:
        return AccessControlEntry(self.principal, self.host, self.operation, self.permission_type)


class AclBindingFilter(NamedTuple):
    """Kafka's AclBindingFilter for DescribeAcls/DeleteAcls; None and ANY mean "any".

    The pattern type decides how ``resource_name`` matches: ANY - any pattern type with exactly
    this name; LITERAL/PREFIXED - that type with exactly this name; MATCH - every pattern that
    would apply to a resource of this name (the literal name, the literal ``*`` and every
    PREFIXED pattern the name starts with).  Principal and host match exactly when given
    (``User:*`` in a filter matches only ACLs on ``User:*``).
    """
    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    @classmethod
    def from_wire(cls, resource_type: int, resource_name: str | None, pattern_type: int,
                  principal: str | None, host: str | None, operation: int,
                  permission_type: int) -> AclBindingFilter:
        """From a DescribeAcls request or DeleteAcls filter; unknown codes become UNKNOWN."""
        return cls(ResourceType.from_code(resource_type), resource_name, PatternType.from_code(pattern_type),
                   principal, host, AclOperation.from_code(operation),
                   AclPermissionType.from_code(permission_type))

    def matches_pattern(self, pattern: ResourcePattern) -> bool:
        """Kafka's ResourcePatternFilter.matches."""
        rtype, name, ptype = pattern
        if self.resource_type is not ResourceType.ANY and self.resource_type != rtype:
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH) and self.pattern_type != ptype:
            return False
        if self.resource_name is None:
            return True
        if self.pattern_type in (PatternType.ANY, ptype):
            return self.resource_name == name
        if ptype == _LITERAL:
            return name in (self.resource_name, WILDCARD_RESOURCE)
        return self.resource_name.startswith(name)   # PREFIXED under MATCH

    def matches_entry(self, entry: AccessControlEntry) -> bool:
        """Kafka's AccessControlEntryFilter.matches."""
        principal, host, operation, permission = entry
        return ((self.principal is None or self.principal == principal)
                and (self.host is None or self.host == host)
                and self.operation in (AclOperation.ANY, operation)
                and self.permission_type in (AclPermissionType.ANY, permission))

    def matches(self, binding: AclBinding) -> bool:
        return self.matches_pattern(binding.pattern) and self.matches_entry(binding.entry)

    def is_unknown(self) -> bool:
        return any(v == 0 for v in (self.resource_type, self.pattern_type, self.operation,
                                    self.permission_type))


ANY_FILTER = AclBindingFilter()
