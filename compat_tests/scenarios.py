"""The scenarios: each is written once and run through every client adapter.

A scenario returns None or a note (pass), raises ``Skip`` (does not apply to
this client) or ``Fail``/``AssertionError``/``ClientError`` (fail, one line).
Topics and groups get unique names, so scenarios never see each other's data.
"""
from __future__ import annotations

import socket
import struct
import time

from .model import CODECS, ClientError, Fail, Rec, Skip, check, records, unique, wait_until

SCENARIOS: dict[str, tuple] = {}   # name -> (function, timeout seconds, description)


def scenario(name: str, timeout: float, description: str):
    def register(fn):
        SCENARIOS[name] = (fn, timeout, description)
        return fn
    return register


def now_ms() -> int:
    return int(time.time() * 1000)


def _wire_only(c):
    if getattr(c, "wire_only", False):
        raise Skip("not a client library (wire-level checks only)")


@scenario("round_trip", 45, "keys, values, headers, timestamps and offsets survive produce -> fetch")
def round_trip(c, env):
    _wire_only(c)
    topic = env.setup.create_topic("rt")
    t0 = now_ms() - 3_600_000
    recs = records(10, keys=10, headers=True, t0=t0 if c.sets_timestamps else None, partition=0)
    if not c.per_record_headers:
        for r in recs:
            r.headers = [("h1", b"same"), ("h2", b"x")]
    placed = c.produce(topic, recs)
    if placed is not None:
        check(placed == [(0, i) for i in range(10)], f"produce reported offsets {placed}")
    got = c.fetch(topic, 10, partitions=[0])
    check(len(got) == 10, f"fetched {len(got)} of 10 records")
    for i, (want, have) in enumerate(zip(recs, got)):
        check(have.offset == i, f"record {i} at offset {have.offset}")
        check((have.key, have.value) == (want.key, want.value), f"record {i}: {have.key!r}/{have.value!r}")
        check(list(have.headers) == list(want.headers), f"record {i} headers {have.headers!r}")
        if c.sets_timestamps:
            check(have.timestamp == want.timestamp, f"record {i} timestamp {have.timestamp} != {want.timestamp}")
        else:
            check(abs(have.timestamp - now_ms()) < 300_000, f"record {i} CreateTime {have.timestamp} not recent")
    return None if c.sets_timestamps else "timestamps: the client cannot set them; checked CreateTime is recent"


@scenario("compression", 90, "each codec produced by this client is consumed by every client")
def compression(c, env):
    _wire_only(c)
    produced, notes, failures = [], [], []
    for codec in CODECS:
        if codec not in c.codecs:
            notes.append(f"cannot produce {codec}")
            continue
        topic = env.setup.create_topic(f"z{codec}")
        c.produce(topic, records(5, prefix=codec, partition=0), compression=codec)
        produced.append((codec, topic))
    for other in env.consumers():
        for codec, topic in produced:
            if codec not in other.codecs:
                notes.append(f"{other.name} cannot read {codec}")
                continue
            try:
                got = other.fetch(topic, 5, partitions=[0])
                values = [r.value for r in got]
                if values != [f"{codec}-{i:05d}".encode() for i in range(5)]:
                    failures.append(f"{codec}->{other.name}: got {len(got)} records")
            except (ClientError, Fail) as exc:
                failures.append(f"{codec}->{other.name}: {exc}"[:80])
    if failures:
        raise Fail("; ".join(failures))
    if not produced:
        raise Skip("the client produces none of " + ", ".join(CODECS))
    return "; ".join(notes) or None


@scenario("ordering", 45, "per-partition order and a stable key->partition mapping (3 partitions)")
def ordering(c, env):
    _wire_only(c)
    topic = env.setup.create_topic("ord", 3)
    recs = records(60, keys=6)
    placed = c.produce(topic, recs)
    got = c.fetch(topic, 60)
    check(len(got) == 60, f"fetched {len(got)} of 60")
    by_key: dict = {}
    last_offset: dict = {}
    for r in got:
        check(r.offset > last_offset.get(r.partition, -1), f"partition {r.partition} out of order")
        last_offset[r.partition] = r.offset
        by_key.setdefault(r.key, []).append((r.partition, int(r.value.split(b"-")[1])))
    for key, seen in by_key.items():
        check(len({p for p, _ in seen}) == 1, f"{key!r} landed on partitions {sorted({p for p, _ in seen})}")
        seq = [i for _, i in seen]
        check(seq == sorted(seq), f"{key!r} records out of produce order")
    if placed is not None:
        for rec, (p, _) in zip(recs, placed):
            check(by_key[rec.key][0][0] == p, f"{rec.key!r}: produce said {p}, fetch found another")
    return None


@scenario("offsets_time", 45, "ListOffsets earliest/latest and lookups by timestamp")
def offsets_time(c, env):
    _wire_only(c)
    topic = env.setup.create_topic("ts")
    t0 = now_ms() - 3_600_000
    recs = records(10, t0=t0, partition=0)
    note = None
    if c.sets_timestamps:
        c.produce(topic, recs)
    else:
        env.setup.produce(topic, recs)
        note = "records produced by kafka-python (the client cannot set timestamps)"
    check(c.offset_for(topic, 0, "earliest") == 0, "earliest != 0")
    latest = c.offset_for(topic, 0, "latest")
    check(latest == 10, f"latest = {latest}, want 10")
    for ts, want in ((t0 - 5000, 0), (t0, 0), (t0 + 2500, 3), (t0 + 9000, 9)):
        got = c.offset_for(topic, 0, ts)
        check(got == want, f"offset for t0{ts - t0:+d} ms = {got}, want {want}")
    after = c.offset_for(topic, 0, t0 + 60_000)
    check(after in (-1, None, 10), f"offset after the last timestamp = {after}, want none (-1)")
    return note


@scenario("idempotent", 45, "idempotent producer: every record once, offsets contiguous")
def idempotent(c, env):
    _wire_only(c)
    topic = env.setup.create_topic("idem", 2)
    recs = records(50, keys=5)
    c.produce(topic, recs, idempotent=True)
    got = c.fetch(topic, 50)
    values = sorted(r.value for r in got)
    check(values == sorted(r.value for r in recs), f"fetched {len(values)} records, {len(set(values))} distinct")
    for p in (0, 1):
        offsets = sorted(r.offset for r in got if r.partition == p)
        check(offsets == list(range(len(offsets))), f"partition {p} offsets not contiguous from 0")
    return None


def _stable(members, partitions, shared: bool) -> bool:
    sets = [m.assignment() for m in members]
    if any(not s for s in sets):
        return False
    if shared:   # every member of its own group has everything
        return all(s == set(range(partitions)) for s in sets)
    union = set().union(*sets)
    return union == set(range(partitions)) and sum(len(s) for s in sets) == partitions


def _run_members(c, env, groups, partitions, expect_each):
    topic = env.setup.create_topic("grp", partitions)
    members = [c.member(g, topic) for g in groups]
    try:
        shared = len(set(groups)) > 1
        if not wait_until(lambda: _stable(members, partitions, shared) or any(m.error for m in members), 30, 0.1):
            raise Fail(f"assignments never settled: {[m.assignment() for m in members]}")
        errors = [m.error for m in members if m.error]
        check(not errors, f"member failed: {errors[:1]}")
        assigned = [set(m.assignment()) for m in members]
        want = [Rec(f"g-{i:03d}".encode(), partition=i % partitions) for i in range(20)]
        env.setup.produce(topic, want)
        total = 20 * len(members) if expect_each else 20
        if not wait_until(lambda: sum(len(m.records) for m in members) >= total, 25, 0.1):
            raise Fail(f"members got {[len(m.records) for m in members]} records, want {total} in all")
        time.sleep(0.3)   # anything extra (a duplicate) shows up now
        return members, [r.value for r in want], assigned
    finally:
        for m in members:
            m.stop()


@scenario("group_queue", 90, "two members of one group split the partitions and the records")
def group_queue(c, env):
    _wire_only(c)
    group = unique("queue")
    members, want, assigned = _run_members(c, env, [group, group], 2, expect_each=False)
    seen = [r.value for m in members for r in m.records]
    check(sorted(seen) == sorted(want), f"union has {len(seen)} records, {len(set(seen))} distinct")
    check(all(m.records for m in members), f"a member got nothing: {[len(m.records) for m in members]}")
    for m, parts in zip(members, assigned):
        check({r.partition for r in m.records} <= parts, "a member read a partition it was not assigned")
    return None


@scenario("group_pubsub", 90, "members of two groups each receive every record")
def group_pubsub(c, env):
    _wire_only(c)
    members, want, _ = _run_members(c, env, [unique("pubA"), unique("pubB")], 2, expect_each=True)
    for i, m in enumerate(members):
        check(sorted(r.value for r in m.records) == sorted(want), f"group {i} got {len(m.records)} of 20")
    return None


@scenario("commit_resume", 60, "commit after 10 of 20 records; a new consumer resumes at offset 10")
def commit_resume(c, env):
    _wire_only(c)
    topic = env.setup.create_topic("commit")
    env.setup.produce(topic, records(20, partition=0))
    group = unique("resume")
    first = c.consume_in_group(group, topic, 10)
    check([r.offset for r in first] == list(range(10)), f"first consumer read offsets {[r.offset for r in first]}")
    second = c.consume_in_group(group, topic, 10)
    check([r.offset for r in second] == list(range(10, 20)),
          f"resumed at {[r.offset for r in second][:3]}..., want 10..19")
    return None


@scenario("admin", 60, "create (3 partitions, a config), describe, list, delete")
def admin(c, env):
    _wire_only(c)
    if not c.has_admin:
        raise Skip("the client has no admin API")
    name = unique("admin")
    c.create_topic(name, 3, {"retention.ms": "123456"})
    env.setup.wait_topic(name, 3)
    parts, configs = c.describe_topic(name)
    check(parts == 3, f"described {parts} partitions")
    check(configs.get("retention.ms") == "123456", f"retention.ms = {configs.get('retention.ms')!r}")
    check(name in c.list_topics(), "created topic not listed")
    c.delete_topic(name)
    check(wait_until(lambda: name not in c.list_topics(), 10, 0.2), "deleted topic still listed")
    return None


def _bad_input_checks(c, env):
    """(label, expected Kafka error code, action) for what this client can express."""
    checks = []
    if c.has_admin:
        existing = env.setup.create_topic("exists")
        checks += [
            ("invalid topic name", 17, lambda: c.create_topic(unique("bad") + " name!", 1)),
            ("0 partitions", 37, lambda: c.create_topic(unique("zero"), 0)),
            ("topic exists", 36, lambda: c.create_topic(existing, 1)),
            ("delete unknown topic", 3, lambda: c.delete_topic(unique("missing"))),
            ("invalid config value", 40, lambda: c.create_topic(unique("cfg"), 1, {"retention.ms": "abc"})),
        ]
    else:
        checks.append(("produce to an invalid topic name", 17,
                       lambda: c.produce(unique("bad") + " name!", [Rec(b"x")])))
    small = env.setup.create_topic("big", configs={"max.message.bytes": "1024"})
    checks.append(("record over max.message.bytes", 10,
                   lambda: c.produce(small, [Rec(b"x" * 4096, partition=0)], idempotent=False)))
    short = env.setup.create_topic("range")
    env.setup.produce(short, records(3, partition=0))
    checks.append(("fetch past the end, no reset", 1,
                   lambda: c.fetch(short, 1, partitions=[0], offset=100, reset="none", timeout=5)))
    return checks


@scenario("bad_input", 90, "bad requests get Kafka's error code and the broker keeps serving")
def bad_input(c, env):
    _wire_only(c)
    failures, notes = [], []
    for label, code, action in _bad_input_checks(c, env):
        try:
            action()
            failures.append(f"{label}: no error (want {code})")
        except Skip as exc:
            notes.append(f"{label}: n/a ({exc})")
        except ClientError as exc:
            if exc.local:
                notes.append(f"{label}: rejected by the client ({str(exc)[:60]})")
            elif exc.code != code:
                failures.append(f"{label}: error {exc.code}, want {code}")
        dead = env.setup.still_serving()
        if dead:
            raise Fail(f"after {label}: {dead}")
    if failures:
        raise Fail("; ".join(failures))
    return "; ".join(notes) or None


@scenario("spark-jvm", 300, "Spark's format(\"kafka\") reads (batch, JSON offsets, timestamp, headers, "
                            "availableNow) what this client wrote; this client reads Spark's two sinks")
def spark_jvm(c, env):
    _wire_only(c)
    if c.name != "java":
        raise Skip("Spark's connector runs on Apache Kafka's Java client: run in the java column")
    from .spark_jvm import checks
    return checks(c, env)


# ------------------------------------------------------------------------------ wire level
def _frame(api_key, version, body=b"", correlation_id=1, client_id=b"compat"):
    head = struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id
    return struct.pack(">i", len(head) + len(body)) + head + body


BAD_FRAMES = [
    ("garbage bytes", b"\xde\xad\xbe\xef" * 16),
    ("length prefix 2 GiB", struct.pack(">i", 2**31 - 1) + b"x"),
    ("negative length", struct.pack(">i", -5)),
    ("frame shorter than a header", struct.pack(">i", 3) + b"\x00\x03\x00"),
    ("unknown api key", _frame(9999, 0)),
    ("Metadata v99", _frame(3, 99)),
    ("Metadata body cut short", _frame(3, 1, b"\x00\x00\x00\x03\x00\x09ab")),
]


def _closed(sock) -> bool:
    sock.settimeout(10)
    try:
        return sock.recv(1) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False


@scenario("bad_frames", 60, "malformed frames close that connection only; ApiVersions v99 gets a v0 error")
def bad_frames(c, env):
    if not getattr(c, "wire_only", False):
        raise Skip("wire-level: see the raw-socket column")
    host, port = env.bootstrap.rsplit(":", 1)
    failures = []
    for label, payload in BAD_FRAMES:
        with socket.create_connection((host, int(port)), timeout=10) as s:
            try:
                s.sendall(payload)
            except OSError:
                pass
            if not _closed(s):
                failures.append(f"{label}: connection left open")
        dead = env.setup.still_serving()
        if dead:
            raise Fail(f"after {label}: {dead}")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(_frame(18, 99, b"\x00\x00", correlation_id=42))
        head = s.recv(10)
        if len(head) < 10:
            failures.append("ApiVersions v99: no response")
        else:
            size, cid, err = struct.unpack(">iih", head)
            if cid != 42 or err != 35:
                failures.append(f"ApiVersions v99: correlation {cid}, error {err} (want 42, 35)")
    if failures:
        raise Fail("; ".join(failures))
    return None
