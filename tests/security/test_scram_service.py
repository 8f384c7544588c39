"""The broker's SCRAM credential service (kwire.security.scram_store) and its two admin handlers
(kwire.handlers.scram_admin), in-process: Kafka's AlterUserScramCredentials and
DescribeUserScramCredentials rules, the credential file's round trip and its atomic,
off-the-Trio-thread replacement.  No sockets; requests and responses go through the same
codec as on the wire."""
from __future__ import annotations

import json
import os
import threading
import types

import pytest
import trio
from kafka.admin import ScramMechanism, UserScramCredentialUpsertion
from kafka.net.sasl.scram import SaslMechanismScram
from kafka.protocol.admin import (AlterUserScramCredentialsRequest,
                                  DescribeUserScramCredentialsRequest)

import kwire.log.checkpoints as checkpoints
import kwire.security.scram_store as service_module
from kwire.codecs import messages
from kwire.codecs.errors import ErrorCode as E
from kwire.handlers.registry import HANDLERS
from kwire.security.scram import scram_credential
from kwire.security.scram_store import (DELETE_MISSING, FILE_NAME, AlterResult, DescribeResult,
                                 ScramDeletion, ScramFileError, ScramService, ScramUpsertion)

SHA256, SHA512 = 1, 2
UNACCEPTABLE_CREDENTIAL = 93
TWICE = "A user credential cannot be altered twice in the same request"


def upsertion(user, mechanism=SHA256, password="secret", iterations=4096) -> ScramUpsertion:
    """What kafka-python's admin client sends for ``password`` (its own salting)."""
    up = UserScramCredentialUpsertion(user, ScramMechanism(mechanism) if mechanism in (1, 2) else 1,
                                      password, iterations=max(iterations, 1))
    return ScramUpsertion(user, mechanism, iterations, up.salt, up.salted_password)


def alter(service, upsertions=(), deletions=()) -> list[AlterResult]:
    return trio.run(service.alter, list(upsertions), list(deletions))


def codes(results) -> dict[str, int]:
    return {r.user: r.error_code for r in results}


@pytest.fixture
def service(tmp_path):
    s = ScramService(tmp_path)
    s.load()
    return s


def authenticates(service, user, password, mechanism="SCRAM-SHA-256") -> bool:
    """A whole exchange with kafka-python's SCRAM client against the service's store."""
    client = SaslMechanismScram(sasl_plain_username=user, sasl_plain_password=password,
                                sasl_mechanism=mechanism)
    server = service.store.server(mechanism)
    try:
        client.receive(server.step(client.auth_bytes())[0])
        client.receive(server.step(client.auth_bytes())[0])
    except Exception:
        return False
    return client.is_authenticated() and server.principal == f"User:{user}"


# --- alter: what succeeds --------------------------------------------------------------------

def test_upsert_describe_and_authenticate(service):
    assert alter(service, [upsertion("alice", SHA256, "alice-secret", 8192),
                           upsertion("bob", SHA512, "bob-secret")]) == [AlterResult("alice"), AlterResult("bob")]
    assert service.describe(["alice", "bob"]) == [DescribeResult("alice", credentials=((SHA256, 8192),)),
                                                  DescribeResult("bob", credentials=((SHA512, 4096),))]
    assert authenticates(service, "alice", "alice-secret")
    assert authenticates(service, "bob", "bob-secret", "SCRAM-SHA-512")
    assert not authenticates(service, "alice", "wrong")


def test_upsert_replaces_and_mechanisms_are_independent(service):
    alter(service, [upsertion("alice", SHA256, "one")])
    alter(service, [upsertion("alice", SHA512, "two", 16384)])
    alter(service, [upsertion("alice", SHA256, "three", 5000)])
    assert service.describe(["alice"])[0].credentials == ((SHA256, 5000), (SHA512, 16384))
    assert authenticates(service, "alice", "three") and not authenticates(service, "alice", "one")
    assert authenticates(service, "alice", "two", "SCRAM-SHA-512")


def test_delete_one_mechanism_then_the_last(service):
    alter(service, [upsertion("alice", SHA256), upsertion("bob", SHA512)])
    alter(service, [upsertion("alice", SHA512)])
    assert alter(service, deletions=[ScramDeletion("alice", SHA256)]) == [AlterResult("alice")]
    assert service.describe(["alice"])[0].credentials == ((SHA512, 4096),)
    assert alter(service, deletions=[ScramDeletion("alice", SHA512)]) == [AlterResult("alice")]
    assert service.store.users() == ["bob"]


def test_iteration_bounds_are_inclusive(service):
    assert codes(alter(service, [upsertion("lo", iterations=4096), upsertion("hi", iterations=16384)])) == {
        "lo": 0, "hi": 0}


def test_results_list_deletions_then_upsertions_then_failures(service):
    alter(service, [upsertion("old")])
    results = alter(service, [upsertion("", SHA256), upsertion("new")],
                    [ScramDeletion("gone", SHA256), ScramDeletion("old", SHA256)])
    assert [r.user for r in results] == ["old", "new", "gone", ""]


def test_empty_request_writes_nothing(service):
    assert alter(service) == []
    assert not os.path.exists(service.path)


# --- alter: Kafka's errors -------------------------------------------------------------------

@pytest.mark.parametrize("iterations, message", [(4095, "Too few iterations"), (0, "Too few iterations"),
                                                 (-1, "Too few iterations"), (16385, "Too many iterations")])
def test_iterations_out_of_bounds(service, iterations, message):
    assert alter(service, [upsertion("alice", iterations=iterations)]) == [
        AlterResult("alice", UNACCEPTABLE_CREDENTIAL, message)]
    assert service.store.users() == []


def test_empty_user_name(service):
    assert alter(service, [upsertion("")]) == [AlterResult("", UNACCEPTABLE_CREDENTIAL, "Username must not be empty")]
    assert alter(service, deletions=[ScramDeletion("", SHA256)]) == [
        AlterResult("", UNACCEPTABLE_CREDENTIAL, "Username must not be empty")]


@pytest.mark.parametrize("mechanism", [0, 3, -1, 127])
def test_unknown_mechanism(service, mechanism):
    expected = [AlterResult("alice", E.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")]
    assert alter(service, [upsertion("alice", mechanism)]) == expected
    assert alter(service, deletions=[ScramDeletion("alice", mechanism)]) == expected


def test_name_is_checked_before_mechanism_and_mechanism_before_iterations(service):
    assert alter(service, [upsertion("", 9, iterations=1)])[0].error_code == UNACCEPTABLE_CREDENTIAL
    assert alter(service, [upsertion("a", 9, iterations=1)])[0].error_code == E.UNSUPPORTED_SASL_MECHANISM


def test_deleting_a_missing_credential(service):
    alter(service, [upsertion("alice", SHA256)])
    assert alter(service, deletions=[ScramDeletion("alice", SHA512), ScramDeletion("nobody", SHA256)]) == [
        AlterResult("alice", E.RESOURCE_NOT_FOUND, DELETE_MISSING),
        AlterResult("nobody", E.RESOURCE_NOT_FOUND, DELETE_MISSING)]
    assert service.describe(["alice"])[0].credentials == ((SHA256, 4096),)


def test_user_in_a_deletion_and_an_upsertion_is_a_duplicate(service):
    alter(service, [upsertion("alice", SHA256, "kept")])
    results = alter(service, [upsertion("alice", SHA512), upsertion("bob")], [ScramDeletion("alice", SHA256)])
    assert results == [AlterResult("bob"), AlterResult("alice", E.DUPLICATE_RESOURCE, TWICE)]
    assert service.describe(["alice"])[0].credentials == ((SHA256, 4096),)    # neither applied
    assert authenticates(service, "alice", "kept")


@pytest.mark.parametrize("request_", [
    ([upsertion("alice", SHA256), upsertion("alice", SHA512)], []),
    ([upsertion("alice", SHA256), upsertion("alice", SHA256)], []),
    ([], [ScramDeletion("alice", SHA256), ScramDeletion("alice", SHA512)]),
    ([upsertion("alice"), upsertion("alice"), upsertion("alice")], [ScramDeletion("alice", SHA256)]),
])
def test_user_named_twice_is_one_duplicate_result(service, request_):
    alter(service, [upsertion("alice", SHA256)])
    alter(service, [upsertion("alice", SHA512)])
    before = service.store.credentials("alice")
    assert alter(service, *request_) == [AlterResult("alice", E.DUPLICATE_RESOURCE, TWICE)]
    assert service.store.credentials("alice") == before


def test_later_mentions_of_a_failed_user_are_ignored(service):
    """Kafka skips a user that already failed: the first error is the answer, nothing applies."""
    results = alter(service, [upsertion("alice")], [ScramDeletion("alice", SHA256)])
    assert results == [AlterResult("alice", E.RESOURCE_NOT_FOUND, DELETE_MISSING)]
    assert service.store.users() == []


def test_empty_salt_is_refused(service):
    up = upsertion("alice")._replace(salt=b"")
    [result] = alter(service, [up])
    assert (result.user, result.error_code) == ("alice", UNACCEPTABLE_CREDENTIAL)
    assert service.store.users() == []


def test_one_bad_user_does_not_stop_the_others(service):
    results = alter(service, [upsertion("good"), upsertion("bad", iterations=10)], [ScramDeletion("missing", 1)])
    assert codes(results) == {"good": 0, "bad": UNACCEPTABLE_CREDENTIAL, "missing": E.RESOURCE_NOT_FOUND}
    assert service.store.users() == ["good"]


# --- describe --------------------------------------------------------------------------------

def test_describe_all_users_sorted(service):
    alter(service, [upsertion("carol", SHA512), upsertion("alice"), upsertion("bob", iterations=5000)])
    alter(service, [upsertion("alice", SHA512, iterations=6000)])
    expected = [DescribeResult("alice", credentials=((SHA256, 4096), (SHA512, 6000))),
                DescribeResult("bob", credentials=((SHA256, 5000),)),
                DescribeResult("carol", credentials=((SHA512, 4096),))]
    assert service.describe(None) == service.describe([]) == expected


def test_describe_nobody(service):
    assert service.describe(None) == []


def test_describe_unknown_duplicate_and_empty_names(service):
    alter(service, [upsertion("alice")])
    assert service.describe(["bob", "alice", "dup", "", "dup"]) == [
        DescribeResult("bob", E.RESOURCE_NOT_FOUND, "Attempt to describe a user credential that does not exist: bob"),
        DescribeResult("alice", credentials=((SHA256, 4096),)),
        DescribeResult("dup", E.DUPLICATE_RESOURCE,
                       "Cannot describe SCRAM credentials for the same user twice in a single request: dup"),
        DescribeResult("", E.RESOURCE_NOT_FOUND, "Attempt to describe a user credential that does not exist: "),
    ]


def test_describe_duplicate_of_a_known_user_shows_no_credentials(service):
    alter(service, [upsertion("alice")])
    [result] = service.describe(["alice", "alice"])
    assert (result.error_code, result.credentials) == (E.DUPLICATE_RESOURCE, ())


# --- the file --------------------------------------------------------------------------------

def test_credentials_survive_a_restart(tmp_path, service):
    alter(service, [upsertion("alice", SHA256, "pw-a", 8192), upsertion("bob", SHA512, "pw-b")])
    alter(service, [upsertion("alice", SHA512, "pw-a2")])
    alter(service, deletions=[ScramDeletion("bob", SHA512)])
    again = ScramService(tmp_path)
    again.load()
    assert again.store.users() == ["alice"]
    assert again.store.credentials("alice") == service.store.credentials("alice")
    assert authenticates(again, "alice", "pw-a") and authenticates(again, "alice", "pw-a2", "SCRAM-SHA-512")
    assert again.describe(None) == service.describe(None)


def test_file_is_in_the_log_dir_and_holds_no_password(tmp_path, service):
    alter(service, [upsertion("alice", SHA256, "very-secret-password")])
    path = tmp_path / FILE_NAME
    assert service.path == str(path)
    text = path.read_text()
    assert "very-secret-password" not in text
    doc = json.loads(text)
    assert doc["version"] == 1 and set(doc["users"]["alice"]["SCRAM-SHA-256"]) == {
        "salt", "stored_key", "server_key", "iterations"}


def test_missing_file_is_an_empty_store(tmp_path):
    s = ScramService(tmp_path / "does-not-exist-yet")
    s.load()
    assert s.store.users() == [] and s.describe(None) == []


@pytest.mark.parametrize("content", [
    b"", b"{", b"[]", b"null", b'{"version": 2, "users": {}}', b'{"version": 1}',
    b'{"version": 1, "users": {"a": {"SCRAM-SHA-256": {"salt": "!!", "stored_key": "", '
    b'"server_key": "", "iterations": 4096}}}}',
    b"\xff\xfe not utf-8",
])
def test_corrupt_file_stops_the_load_and_names_the_file(tmp_path, content):
    (tmp_path / FILE_NAME).write_bytes(content)
    s = ScramService(tmp_path)
    with pytest.raises(ScramFileError, match=FILE_NAME):
        s.load()


def test_credential_with_iterations_out_of_bounds_is_a_corrupt_file(tmp_path, service):
    alter(service, [upsertion("alice")])
    path = tmp_path / FILE_NAME
    doc = json.loads(path.read_text())
    doc["users"]["alice"]["SCRAM-SHA-256"]["iterations"] = 100
    path.write_text(json.dumps(doc))
    with pytest.raises(ScramFileError, match="iterations"):
        ScramService(tmp_path).load()


def test_load_keeps_the_store_object_and_a_failed_load_changes_nothing(tmp_path, service):
    alter(service, [upsertion("alice")])
    store = service.store
    (tmp_path / FILE_NAME).write_text("garbage")
    with pytest.raises(ScramFileError):
        service.load()
    assert service.store is store and store.users() == ["alice"]
    (tmp_path / FILE_NAME).unlink()
    service.load()
    assert service.store is store and store.users() == []


def test_each_change_replaces_the_file_by_rename_with_fsyncs(tmp_path, service, monkeypatch):
    """write_atomically: a new inode renamed over the old one, the file and the directory
    fsynced, no temporary left behind; never the old file rewritten in place."""
    alter(service, [upsertion("alice")])
    path = tmp_path / FILE_NAME
    inode = path.stat().st_ino
    fsynced = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (fsynced.append(fd), real_fsync(fd)))
    alter(service, [upsertion("bob")])
    assert path.stat().st_ino != inode
    assert len(fsynced) >= 2                           # the temporary file and the directory
    assert sorted(os.listdir(tmp_path)) == [FILE_NAME]


def test_the_write_runs_in_a_worker_thread(service, monkeypatch):
    threads = []
    real = service_module.write_atomically

    def spy(path, data):
        threads.append(threading.current_thread())
        real(path, data)
    monkeypatch.setattr(service_module, "write_atomically", spy)
    alter(service, [upsertion("alice")])
    assert threads and threads[0] is not threading.main_thread()


def test_a_failed_write_changes_nothing(tmp_path, service, monkeypatch):
    """The rename fails (disk full, read-only fs): the old file and the store stay as they were,
    every user that would have changed gets KAFKA_STORAGE_ERROR, the others their own error."""
    alter(service, [upsertion("alice", SHA256, "old")])
    path = tmp_path / FILE_NAME
    before = path.read_bytes()

    def broken_replace(src, dst):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(checkpoints.os, "replace", broken_replace)
    results = alter(service, [upsertion("alice", SHA256, "new"), upsertion("bob"), upsertion("bad", 7)],
                    [ScramDeletion("nobody", SHA256)])
    assert codes(results) == {"alice": E.KAFKA_STORAGE_ERROR, "bob": E.KAFKA_STORAGE_ERROR,
                              "bad": E.UNSUPPORTED_SASL_MECHANISM, "nobody": E.RESOURCE_NOT_FOUND}
    assert "No space left" in results[0].error_message
    assert path.read_bytes() == before and sorted(os.listdir(tmp_path)) == [FILE_NAME]
    assert service.store.users() == ["alice"] and authenticates(service, "alice", "old")
    monkeypatch.undo()
    again = ScramService(tmp_path)
    again.load()
    assert authenticates(again, "alice", "old")


def test_a_temporary_left_by_a_crash_is_ignored_and_overwritten(tmp_path, service):
    """A crash between writing ``.tmp`` and the rename leaves the old file in force."""
    alter(service, [upsertion("alice")])
    (tmp_path / (FILE_NAME + ".tmp")).write_bytes(b'{"version": 1, "users": {"half')
    again = ScramService(tmp_path)
    again.load()
    assert again.store.users() == ["alice"]
    assert codes(alter(again, [upsertion("bob")])) == {"bob": 0}
    assert sorted(os.listdir(tmp_path)) == [FILE_NAME]


def slow_writes(monkeypatch, seconds: float) -> None:
    """The credential file's writes take ``seconds`` longer (in the worker thread)."""
    real = service_module.write_atomically

    def slow(path, data):
        import time
        time.sleep(seconds)
        real(path, data)
    monkeypatch.setattr(service_module, "write_atomically", slow)


def test_concurrent_alterations_are_serialized(tmp_path, service, monkeypatch):
    """Two requests at once: both apply and the file holds both (each write sees the other)."""
    slow_writes(monkeypatch, 0.05)
    results = []

    async def main():
        async def one(name):
            results.extend(await service.alter([upsertion(name)], []))
        async with trio.open_nursery() as nursery:
            for name in ("a", "b", "c"):
                nursery.start_soon(one, name)
    trio.run(main)
    assert codes(results) == {"a": 0, "b": 0, "c": 0}
    again = ScramService(tmp_path)
    again.load()
    assert again.store.users() == ["a", "b", "c"]


def test_a_cancelled_alteration_still_completes(tmp_path, service, monkeypatch):
    slow_writes(monkeypatch, 0.2)

    async def main():
        with trio.move_on_after(0.05):
            await service.alter([upsertion("alice")], [])
    trio.run(main)
    assert service.store.users() == ["alice"]
    again = ScramService(tmp_path)
    again.load()
    assert again.store.users() == ["alice"]


# --- the handlers, through the wire codec ----------------------------------------------------

def call(service, request) -> dict:
    """Encode ``request`` as a client would, run its handler, and encode + decode the answer."""
    key = request.API_KEY
    decoded = messages.decode_request(key, 0, bytes(request.encode(version=0)), 0)
    ctx = types.SimpleNamespace(broker=types.SimpleNamespace(scram=service), api_key=key, api_version=0)
    fields = trio.run(HANDLERS[key].func, ctx, decoded)
    body = messages.encode_response(key, 0, fields)
    messages.API_CLASSES[key][1].decode(memoryview(body), version=0)     # encodes as Kafka's schema
    return fields


def test_handlers_are_registered_for_v0():
    assert (HANDLERS[50].min_version, HANDLERS[50].max_version) == (0, 0)
    assert (HANDLERS[51].min_version, HANDLERS[51].max_version) == (0, 0)


def test_alter_handler(service):
    alice = UserScramCredentialUpsertion("alice", ScramMechanism.SCRAM_SHA_512, "alice-pw", iterations=8192)
    request = AlterUserScramCredentialsRequest(
        deletions=[("bob", 1)],
        upsertions=[("alice", 2, alice.iterations, alice.salt, alice.salted_password),
                    ("carol", 1, 100, b"salt", b"x" * 32)])
    assert call(service, request) == {"throttle_time_ms": 0, "results": [
        {"user": "alice", "error_code": 0, "error_message": None},
        {"user": "bob", "error_code": E.RESOURCE_NOT_FOUND, "error_message": DELETE_MISSING},
        {"user": "carol", "error_code": UNACCEPTABLE_CREDENTIAL, "error_message": "Too few iterations"}]}
    assert authenticates(service, "alice", "alice-pw", "SCRAM-SHA-512")


def test_describe_handler(service):
    alter(service, [upsertion("alice", SHA256, iterations=8192), upsertion("bob", SHA512)])
    everyone = call(service, DescribeUserScramCredentialsRequest(users=None))
    assert everyone == {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "results": [
        {"user": "alice", "error_code": 0, "error_message": None,
         "credential_infos": [{"mechanism": SHA256, "iterations": 8192}]},
        {"user": "bob", "error_code": 0, "error_message": None,
         "credential_infos": [{"mechanism": SHA512, "iterations": 4096}]}]}
    assert call(service, DescribeUserScramCredentialsRequest(users=[]))["results"] == everyone["results"]
    some = call(service, DescribeUserScramCredentialsRequest(users=[("bob",), ("zed",)]))["results"]
    assert [(r["user"], r["error_code"]) for r in some] == [("bob", 0), ("zed", E.RESOURCE_NOT_FOUND)]


def test_a_credential_set_from_scram_credential_matches_the_client_payload(service):
    """The stored keys equal those kwire.security.scram derives from the password itself."""
    up = upsertion("alice", SHA256, "pw", 4096)
    alter(service, [up])
    assert service.store.get("alice", "SCRAM-SHA-256") == scram_credential("SCRAM-SHA-256", "pw", up.salt, 4096)
