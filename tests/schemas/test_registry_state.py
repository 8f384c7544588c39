"""The registry's state machine without a broker: commands return records, and only replaying
them changes the state (as every broker replays _schemas)."""
from __future__ import annotations

import json

import pytest

from kwire.schemas import types
from kwire.schemas.records import Reference, decode
from kwire.schemas.state import RegistryError, RegistryState


def record(name: str, *fields: tuple[str, str, object]) -> str:
    out = []
    for field, kind, *default in fields:
        out.append({"name": field, "type": kind, **({"default": default[0]} if default else {})})
    return json.dumps({"type": "record", "name": name, "fields": out})


def replay(state: RegistryState, write) -> None:
    for key, value in write:
        state.apply(decode(key, value))


def register(state: RegistryState, subject: str, schema: str, refs=(), schema_type: str = "AVRO", **kwargs) -> int:
    parsed = state.parse_request(schema_type, schema, refs)
    write, schema_id = state.register(subject, parsed, tuple(refs), **kwargs)
    replay(state, write)
    return schema_id


V1 = record("R", ("a", "int"))
V2 = record("R", ("a", "int"), ("b", "string", "x"))


def test_a_command_changes_nothing_until_its_records_are_replayed():
    state = RegistryState()
    write, schema_id = state.register("s", state.parse_request("AVRO", V1, ()), ())
    assert schema_id == 1 and state.subjects() == []
    replay(state, write)
    assert state.subjects() == ["s"] and state.version_numbers("s") == [1]
    assert state.get_version("s", "latest").id == 1


def test_ids_are_global_and_never_reused():
    state = RegistryState()
    first = register(state, "a", V1)
    assert register(state, "a", V1) == first                     # the same schema again: no new version
    assert state.version_numbers("a") == [1]
    assert register(state, "b", V1) == first                     # another subject: the same id
    second = register(state, "a", V2)
    assert second == first + 1 and state.version_numbers("a") == [1, 2]
    for subject, permanent in (("a", False), ("a", True), ("b", False), ("b", True)):
        replay(state, state.delete_subject(subject, permanent)[0])
    assert state.subjects(deleted=True) == [] and state.schema_by_id(second) is None
    assert register(state, "a", record("Q", ("z", "long"))) == second + 1


def test_compatibility_levels_refuse_and_accept():
    state = RegistryState()
    register(state, "s", V1)
    with pytest.raises(RegistryError) as refused:
        register(state, "s", record("R", ("a", "int"), ("b", "string")))      # new field, no default
    assert (refused.value.status, refused.value.error_code) == (409, 409)
    replay(state, state.set_config("s", "NONE", None))
    register(state, "s", record("R", ("a", "int"), ("b", "string")))
    assert state.compatibility("s") == "NONE" and state.compatibility("other") == "BACKWARD"
    with pytest.raises(RegistryError) as bad_level:
        state.set_config(None, "SIDEWAYS", None)
    assert bad_level.value.error_code == 42203


def test_deletes_go_soft_then_hard_and_respect_references():
    state = RegistryState()
    base = register(state, "base", json.dumps({"type": "record", "name": "Base", "namespace": "n",
                                               "fields": [{"name": "x", "type": "int"}]}))
    user = register(state, "user", record("U", ("base", "n.Base")), refs=[Reference("n.Base", "base", 1)])
    assert state.referenced_by("base", 1) == [user]
    with pytest.raises(RegistryError) as referenced:
        state.delete_version("base", "1", permanent=False)
    assert referenced.value.error_code == 42206
    with pytest.raises(RegistryError) as not_soft:
        state.delete_version("user", "1", permanent=True)
    assert not_soft.value.error_code == 40407
    replay(state, state.delete_version("user", "1", permanent=False)[0])
    with pytest.raises(RegistryError) as twice:
        state.delete_version("user", "1", permanent=False)
    assert twice.value.error_code == 40406
    assert state.schema_by_id(user) is not None                   # soft-deleted: still found by id
    replay(state, state.delete_version("user", "1", permanent=True)[0])
    assert state.schema_by_id(user) is None and state.referenced_by("base", 1) == []
    replay(state, state.delete_version("base", "latest", permanent=False)[0])
    assert state.holders(base) == [] and state.holders(base, deleted=True) == [("base", 1)]


def test_modes_guard_writes_and_import_takes_given_ids():
    state = RegistryState()
    register(state, "s", V1)
    replay(state, state.set_mode("s", "READONLY", force=False))
    with pytest.raises(RegistryError) as readonly:
        register(state, "s", V2)
    assert readonly.value.error_code == 42205
    with pytest.raises(RegistryError) as not_empty:
        state.set_mode(None, "IMPORT", force=False)
    assert not_empty.value.error_code == 42205
    replay(state, state.set_mode(None, "IMPORT", force=True))
    assert register(state, "imported", V2, schema_id=500, version=7) == 500
    assert state.version_numbers("imported") == [7] and state.max_id == 500
    with pytest.raises(RegistryError) as clash:
        register(state, "other", record("Z", ("q", "int")), schema_id=500, version=1)
    assert clash.value.error_code == 42205


def test_replay_of_delete_and_clear_subject_records():
    state = RegistryState()
    register(state, "s", V1)
    register(state, "s", V2)
    write, versions = state.delete_subject("s", permanent=False)
    assert versions == [1, 2]
    replay(state, write)
    assert state.subjects() == [] and state.subjects(deleted=True) == ["s"]
    with pytest.raises(RegistryError) as again:
        state.delete_subject("s", permanent=False)
    assert again.value.error_code == 40404
    replay(state, state.delete_subject("s", permanent=True)[0])
    assert state.subjects(deleted=True) == []
    # versions start again after a hard delete
    register(state, "s", V1)
    assert state.version_numbers("s") == [1]


def test_invalid_schemas_and_versions_get_confluents_codes():
    state = RegistryState()
    with pytest.raises(RegistryError) as invalid:
        state.parse_request("AVRO", "{nope", ())
    assert invalid.value.error_code == 42201
    with pytest.raises(RegistryError) as missing_ref:
        state.parse_request("AVRO", V1, (Reference("x", "nowhere", 1),))
    assert missing_ref.value.error_code == 42201
    for bad in ("0", "abc", str(2 ** 31)):
        with pytest.raises(RegistryError) as version:
            state.get_version("s", bad)
        assert version.value.error_code == 42202
    with pytest.raises(RegistryError) as unknown:
        state.get_version("s", "1")
    assert unknown.value.error_code == 40401
    assert isinstance(types.SCHEMA_TYPES, tuple)
