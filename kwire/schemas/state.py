"""The registry's state, rebuilt by replaying ``_schemas`` (kwire.schemas.records), and its
commands, Confluent Schema Registry's rules.

Shape of Kafka's coordinators: a command never changes the state; it returns the records to
append (and the answer), and the state changes only when those records are read back from
the log, so every broker's copy is the replay of the same records.  Synchronous, no I/O.

Rules kept (Confluent's REST API):

* ids are global: the same schema (type, canonical text, references) under any subject
  gets the id it already has; a new one gets the highest id ever seen + 1, so an id is never
  reused, even after a hard delete;
* versions count up per subject from the highest it ever had (soft-deleted ones included);
  registering a schema the subject already has live returns its id and writes nothing;
* a new version must pass the subject's compatibility level (else the global one, else
  BACKWARD) against its live versions: 409 otherwise;
* deleting is two steps: a soft delete, then ``permanent=true``; a version another live
  schema references cannot be deleted (42206);
* modes: READONLY refuses registrations and deletes (42205); IMPORT takes registrations
  that carry their own id and version, and needs ``force`` to be set over existing schemas.
"""
from __future__ import annotations

import dataclasses

from kwire.schemas import types
from kwire.schemas.records import (Record, Reference, SchemaValue, clear_subject_record, config_record,
                                   delete_subject_record, mode_record, schema_record)

DEFAULT_COMPATIBILITY = "BACKWARD"
DEFAULT_MODE = "READWRITE"
MODES = ("READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT")
MAX_VERSION = 2 ** 31 - 1

Write = list[tuple[bytes, bytes | None]]


class RegistryError(Exception):
    """An answer other than 200: HTTP ``status``, Confluent's ``error_code`` and message."""

    def __init__(self, status: int, error_code: int, message: str):
        super().__init__(message)
        self.status, self.error_code, self.message = status, error_code, message


def subject_not_found(subject: str) -> RegistryError:
    return RegistryError(404, 40401, f"Subject '{subject}' not found.")


def version_not_found(subject: str, version) -> RegistryError:
    return RegistryError(404, 40402, f"Version {version} not found for subject '{subject}'.")


def schema_not_found(what: str = "Schema not found") -> RegistryError:
    return RegistryError(404, 40403, what)


def parse_version(text) -> int | None:
    """A version path segment: a number in [1, 2^31-1], or None for "latest" (and -1).
    Raises RegistryError 42202."""
    if str(text) in ("latest", "-1"):
        return None
    try:
        version = int(text)
    except (TypeError, ValueError):
        version = 0
    if not 1 <= version <= MAX_VERSION:
        raise RegistryError(422, 42202, f"The specified version '{text}' is not a valid version id. Allowed "
                                        f"values are between [1, 2^31-1] and the string \"latest\"")
    return version


class RegistryState:
    """Subjects, versions, ids, configs and modes as the records read so far say."""

    def __init__(self) -> None:
        self.versions: dict[str, dict[int, SchemaValue]] = {}
        self.configs: dict[str | None, dict] = {}
        self.modes: dict[str | None, str] = {}
        self.max_id = 0
        self._ids: dict[int, set[tuple[str, int]]] = {}       # id -> its (subject, version)s
        self._parsed: dict[int, types.ParsedSchema] = {}
        self._identity: dict[tuple, int] = {}                  # (type, canonical, refs) -> id
        self._indexed: set[int] = set()

    # -- replay ---------------------------------------------------------------------------
    def apply(self, record: Record) -> None:
        """Replay one decoded ``_schemas`` record (later records win, as compaction keeps)."""
        kind, subject = record.keytype, record.subject
        if kind == "SCHEMA":
            self._put_version(subject, record.version, record.value)
        elif kind == "CONFIG":
            self._set_or_pop(self.configs, subject, record.value)
        elif kind == "MODE":
            mode = record.value.get("mode") if record.value else None
            self._set_or_pop(self.modes, subject, mode if mode in MODES else None)
        elif kind == "DELETE_SUBJECT" and record.value:
            upto = record.value.get("version")
            for version, value in list(self.versions.get(subject, {}).items()):
                if isinstance(upto, int) and version <= upto and not value.deleted:
                    self._put_version(subject, version, _with(value, deleted=True))
        elif kind == "CLEAR_SUBJECT":
            for version, value in list(self.versions.get(subject, {}).items()):
                if value.deleted:
                    self._put_version(subject, version, None)

    @staticmethod
    def _set_or_pop(table: dict, key, value) -> None:
        if value is None:
            table.pop(key, None)
        else:
            table[key] = value

    def _put_version(self, subject: str, version: int, value: SchemaValue | None) -> None:
        versions = self.versions.setdefault(subject, {})
        old = versions.pop(version, None)
        if old is not None:
            holders = self._ids.get(old.id, set())
            holders.discard((subject, version))
            if not holders:
                self._ids.pop(old.id, None)
                self._parsed.pop(old.id, None)
        if value is not None:
            versions[version] = value
            self._ids.setdefault(value.id, set()).add((subject, version))
            self.max_id = max(self.max_id, value.id)
        if not versions:
            del self.versions[subject]

    # -- reads ----------------------------------------------------------------------------
    def subjects(self, *, deleted: bool = False, prefix: str = "") -> list[str]:
        return sorted(s for s, versions in self.versions.items() if s.startswith(prefix)
                      and any(deleted or not v.deleted for v in versions.values()))

    def live_versions(self, subject: str, *, deleted: bool = False) -> list[SchemaValue]:
        """Oldest first; soft-deleted ones too with ``deleted``."""
        return [v for _, v in sorted(self.versions.get(subject, {}).items()) if deleted or not v.deleted]

    def version_numbers(self, subject: str, *, deleted: bool = False) -> list[int]:
        """Raises RegistryError 40401 when the subject has none."""
        found = [v.version for v in self.live_versions(subject, deleted=deleted)]
        if not found:
            raise subject_not_found(subject)
        return found

    def get_version(self, subject: str, version_text, *, deleted: bool = False) -> SchemaValue:
        """Raises RegistryError 40401, 40402, 42202."""
        version = parse_version(version_text)
        live = self.live_versions(subject, deleted=True)
        if not live:
            raise subject_not_found(subject)
        if version is None:
            candidates = [v for v in live if deleted or not v.deleted]
            if not candidates:
                raise subject_not_found(subject)
            return candidates[-1]
        value = self.versions[subject].get(version)
        if value is None or (value.deleted and not deleted):
            raise version_not_found(subject, version)
        return value

    def schema_by_id(self, schema_id: int) -> SchemaValue | None:
        holders = self._ids.get(schema_id)
        if not holders:
            return None
        subject, version = min(holders)
        return self.versions[subject][version]

    def holders(self, schema_id: int, *, deleted: bool = False) -> list[tuple[str, int]]:
        return sorted((s, v) for s, v in self._ids.get(schema_id, ())
                      if deleted or not self.versions[s][v].deleted)

    def referenced_by(self, subject: str, version: int) -> list[int]:
        """Ids of live schemas that reference ``subject`` ``version``."""
        found = set()
        for versions in self.versions.values():
            for value in versions.values():
                if not value.deleted and any(r.subject == subject and r.version == version
                                             for r in value.references):
                    found.add(value.id)
        return sorted(found)

    def compatibility(self, subject: str | None) -> str:
        for key in (subject, None):
            config = self.configs.get(key)
            if config and config.get("compatibilityLevel"):
                return config["compatibilityLevel"]
        return DEFAULT_COMPATIBILITY

    def normalize_default(self, subject: str | None) -> bool:
        for key in (subject, None):
            config = self.configs.get(key)
            if config and "normalize" in config:
                return bool(config["normalize"])
        return False

    def mode(self, subject: str | None) -> str:
        return self.modes.get(subject) or self.modes.get(None) or DEFAULT_MODE

    # -- parsing --------------------------------------------------------------------------
    def parsed(self, schema_id: int) -> types.ParsedSchema | None:
        """The parsed schema of an id (cached); None if unknown.  Raises types.SchemaError."""
        if schema_id in self._parsed:
            return self._parsed[schema_id]
        value = self.schema_by_id(schema_id)
        if value is None:
            return None
        parsed = types.parse(value.schema_type, value.schema, self.resolve(value.references))
        self._parsed[schema_id] = parsed
        return parsed

    def resolve(self, references, _seen: frozenset = frozenset()) -> list[tuple[str, types.ParsedSchema]]:
        """(name, parsed) of every schema ``references`` reach, dependencies first.  Raises
        types.SchemaError for a reference that is not registered or a cycle."""
        resolved: list[tuple[str, types.ParsedSchema]] = []
        for ref in references:
            key = (ref.subject, ref.version)
            if key in _seen:
                raise types.SchemaError(f"reference cycle through subject '{ref.subject}' version {ref.version}")
            value = self.versions.get(ref.subject, {}).get(ref.version)
            if value is None:
                raise types.SchemaError(f"reference '{ref.name}' names subject '{ref.subject}' version "
                                        f"{ref.version}, which is not registered")
            for name, parsed in self.resolve(value.references, _seen | {key}):
                if all(name != n for n, _ in resolved):
                    resolved.append((name, parsed))
            resolved.append((ref.name, self.parsed(value.id)))
        return resolved

    def _identity_of(self, parsed: types.ParsedSchema, references) -> tuple:
        return parsed.schema_type, parsed.canonical(), tuple(references)

    def find_id(self, parsed: types.ParsedSchema, references) -> int | None:
        """The id of the same schema anywhere in the registry, if any."""
        for schema_id in list(self._ids):
            if schema_id not in self._indexed:
                self._indexed.add(schema_id)
                try:
                    other = self.parsed(schema_id)
                except types.SchemaError:
                    continue
                value = self.schema_by_id(schema_id)
                self._identity.setdefault(self._identity_of(other, value.references), schema_id)
        found = self._identity.get(self._identity_of(parsed, references))
        return found if found in self._ids else None

    # -- commands -------------------------------------------------------------------------
    def check_writable(self, subject: str | None, *, importing: bool = False) -> None:
        mode = self.mode(subject)
        if mode in ("READONLY", "READONLY_OVERRIDE"):
            raise RegistryError(422, 42205, f"Subject {subject} is in read-only mode" if subject
                                else "The registry is in read-only mode")
        if importing and mode != "IMPORT":
            raise RegistryError(422, 42205, f"Subject {subject} is not in import mode")

    def parse_request(self, schema_type: str, schema: str, references) -> types.ParsedSchema:
        """Raises RegistryError 42201 (invalid schema or reference)."""
        try:
            return types.parse(schema_type, schema, self.resolve(references))
        except types.SchemaError as exc:
            raise RegistryError(422, 42201, f"Invalid schema: {exc}") from None

    def incompatibilities(self, subject: str, parsed: types.ParsedSchema, against: list[SchemaValue] | None = None,
                          level: str | None = None) -> list[str]:
        level = level or self.compatibility(subject)
        previous = against if against is not None else self.live_versions(subject)
        try:
            olds = [self.parsed(v.id) for v in previous]
        except types.SchemaError as exc:
            return [f"an earlier version of subject '{subject}' cannot be parsed: {exc}"]
        return types.compatibility_errors(level, parsed, [o for o in olds if o is not None])

    def lookup(self, subject: str, parsed: types.ParsedSchema, references, *, deleted: bool = False
               ) -> SchemaValue | None:
        """The subject's version holding the same schema, newest first."""
        identity = self._identity_of(parsed, tuple(references))
        for value in reversed(self.live_versions(subject, deleted=deleted)):
            try:
                other = self.parsed(value.id)
            except types.SchemaError:
                continue
            if other is not None and self._identity_of(other, value.references) == identity:
                return value
        return None

    def register(self, subject: str, parsed: types.ParsedSchema, references: tuple[Reference, ...], *,
                 schema_id: int | None = None, version: int | None = None) -> tuple[Write, int]:
        """Records registering ``parsed`` (its ``raw`` is what is stored) under ``subject``, and
        its id.  Raises RegistryError 409 (incompatible), 42205 (mode, id clash)."""
        importing = schema_id is not None
        self.check_writable(subject, importing=importing)
        existing = self.lookup(subject, parsed, references)
        if existing is not None and not importing:
            return [], existing.id
        if importing:
            other = self.schema_by_id(schema_id)
            if other is not None and (other.schema != parsed.raw or other.schema_type != parsed.schema_type):
                raise RegistryError(422, 42205, f"Overwrite new schema with id {schema_id} is not permitted.")
        else:
            errors = self.incompatibilities(subject, parsed)
            if errors:
                raise RegistryError(409, 409, f"Schema being registered is incompatible with an earlier schema "
                                              f"for subject \"{subject}\", details: {errors}")
            schema_id = self.find_id(parsed, references) or self.max_id + 1
        if version is None:
            version = max(self.versions.get(subject, {0: None})) + 1
        value = SchemaValue(subject, version, schema_id, parsed.schema_type, parsed.raw, tuple(references))
        return [schema_record(value, subject, version)], schema_id

    def delete_version(self, subject: str, version_text, permanent: bool) -> tuple[Write, int]:
        """Raises RegistryError 40401, 40402, 40406, 40407, 42202, 42205, 42206."""
        self.check_writable(subject)
        # "latest" is the newest live version for a soft delete; a numbered one is found even
        # when soft-deleted, to say so (40406) or to delete it for good
        value = self.get_version(subject, version_text, deleted=permanent or parse_version(version_text) is not None)
        if self.referenced_by(subject, value.version):
            raise RegistryError(422, 42206, f"One or more references exist to the schema "
                                            f"{{subject={subject},version={value.version}}}.")
        if not permanent:
            if value.deleted:
                raise RegistryError(404, 40406, f"Subject '{subject}' Version {value.version} was soft deleted. "
                                                f"Set permanent=true to delete permanently")
            return [schema_record(_with(value, deleted=True), subject, value.version)], value.version
        if not value.deleted:
            raise RegistryError(404, 40407, f"Subject '{subject}' Version {value.version} was not deleted first "
                                            f"before being permanently deleted")
        return [schema_record(None, subject, value.version)], value.version

    def delete_subject(self, subject: str, permanent: bool) -> tuple[Write, list[int]]:
        """Raises RegistryError 40401, 40404, 40405, 42205, 42206."""
        self.check_writable(subject)
        every = self.live_versions(subject, deleted=True)
        if not every:
            raise subject_not_found(subject)
        live = [v for v in every if not v.deleted]
        for value in (live if not permanent else every):
            if self.referenced_by(subject, value.version):
                raise RegistryError(422, 42206, f"One or more references exist to the schema "
                                                f"{{subject={subject},version={value.version}}}.")
        if not permanent:
            if not live:
                raise RegistryError(404, 40404, f"Subject '{subject}' was soft deleted. Set permanent=true to "
                                                f"delete permanently")
            return [delete_subject_record(subject, live[-1].version)], [v.version for v in live]
        if live:
            raise RegistryError(404, 40405, f"Subject '{subject}' was not deleted first before being "
                                            f"permanently deleted")
        write = [schema_record(None, subject, v.version) for v in every]
        return write + [clear_subject_record(subject)], [v.version for v in every]

    def set_config(self, subject: str | None, level: str, normalize: bool | None) -> Write:
        if level not in types.COMPATIBILITY_LEVELS:
            raise RegistryError(422, 42203, "Invalid compatibility level. Valid values are none, backward, "
                                            "forward, full, backward_transitive, forward_transitive, and "
                                            "full_transitive")
        return [config_record(subject, level, normalize)]

    def set_mode(self, subject: str | None, mode: str, force: bool) -> Write:
        if mode not in MODES:
            raise RegistryError(422, 42204, "Invalid mode. Valid values are READWRITE, READONLY, "
                                            "READONLY_OVERRIDE and IMPORT.")
        if mode == "IMPORT" and not force:
            holds = self.subjects(deleted=True) if subject is None else self.live_versions(subject, deleted=True)
            if holds:
                raise RegistryError(422, 42205, "Cannot import since found existing subjects")
        return [mode_record(subject, mode)]


def _with(value: SchemaValue, **changes) -> SchemaValue:
    return dataclasses.replace(value, **changes)
