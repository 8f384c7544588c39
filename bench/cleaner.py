#!/usr/bin/env python
"""Log cleaner benchmark (issue 12): cleaner throughput, its peak memory, and
start-up time after 1,000,000 offset commits to one group, before and after
cleaning.

    python bench/cleaner.py --quick            # harness check, < 2 min
    python bench/cleaner.py                    # full run
    python bench/cleaner.py --workloads B --repeat 3 --json /tmp/c.json

kwire only: it runs ``python -m kwire serve`` through run.py's Broker helper
(free 127.0.0.1 port, fresh data directory, stopped by PID) and restarts it
on the same data with other settings.  Client work (loading, committing,
verifying) runs in spawned child processes (run.py's run_in_child).

A. Throughput.  A compacted 1-partition topic is loaded with the cleaner
   off (log.cleaner.enable=false), then the broker is restarted with it on
   (log.cleaner.backoff.ms low) and the bench waits until the broker's
   "cleaned <topic>-0: ..." lines stop coming.  Reported: MB/s of dirty log
   from those lines and, as a cross-check, from the partition's own files
   (bytes of the closed segments before cleaning / wall time of the
   cleaning), and the broker's memory: VmHWM after cleaning minus the VmHWM
   of the same broker started on the same data with the cleaner off.  Done
   twice per repeat, on copies of the same dirty log: with
   log.cleaner.dedupe.buffer.size at its default and tiny (several passes).
   After each clean a client reads the whole partition back and checks it.
B. Start-up.  1,000,000 offsets are committed to one group (OffsetCommit
   requests of --commit-partitions partitions each, cleaner off,
   offsets.topic.num.partitions=1), then the time from spawning the broker
   to a fresh connection's OffsetFetch returning every committed offset is
   measured before cleaning, and again after a restart with the cleaner on
   has cleaned __consumer_offsets.

Results go to bench/results/<run-id>-cleaner/ (see bench/README.md,
"Cleaner benchmark").
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import random
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
if str(BENCH_DIR) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR))

import workloads as wl  # noqa: E402
from run import (  # noqa: E402
    Broker,
    _combine,
    _fmt,
    _status_kb,
    environment,
    find_tansu,
    log,
    run_in_child,
)

from kwire.testing.process import free_port  # noqa: E402

MODULE = "cleaner"
MB = wl.MB            # 10^6 bytes, as everywhere in bench/
MIB = 1 << 20
TOPIC_A = "bench-cleaner"
TOPIC_B = "bench-commits"
GROUP_B = "bench-cleaner-group"
OFFSETS_TOPIC = "__consumer_offsets"

CLEANER_OFF = {"log.cleaner.enable": "false"}

# the INFO line kwire.log.cleaner writes after each clean; fields are looked up
# one by one so that a reworded line still yields what it has
CLEANED_LINE = re.compile(r"cleaned (?P<tp>\S+)-(?P<partition>\d+): (?P<rest>.*)$")
NUM = r"([0-9][0-9_,.]*(?:[eE][-+]?\d+)?)"
CLEANED_FIELDS = {
    "read_bytes": NUM + r" bytes read",
    "written_bytes": NUM + r" bytes written",
    "seconds": r"written in " + NUM + r" s",
    "logged_mb_per_s": NUM + r" MB/s",
    "map_keys": NUM + r" keys in the offset map",
    "map_bytes": r"offset map \(" + NUM + r" bytes",
    "segments_in": NUM + r" segment\(s\)",
    "segments_out": r"segment\(s\) into " + NUM,
}
LOG_TIME = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")
REPLAYED = re.compile(r"replayed (\d+) group record")


# --------------------------------------------------------------------------
# the broker: one data directory, restarted with different settings


class CleanerBroker(Broker):
    """run.py's kwire Broker, restartable on the same port with other overrides.

    ``data_dir`` may be pointed at another directory between runs (a copy of
    a loaded log); nothing is deleted by ``stop()``: the caller owns the
    directories (``bench_args`` sets keep_data)."""

    def __init__(self, label: str, args, run_dir: Path):
        super().__init__("kwire", bench_args(args), run_dir)
        self.log_path = run_dir / f"{label}-kwire-broker.log"
        self.client_log = run_dir / f"{label}-kwire-client.log"
        self.overrides: dict[str, str] = {}

    def make_process(self):
        proc = super().make_process()
        proc.properties.update(self.overrides)
        return proc

    def start(self, overrides: dict | None = None) -> None:
        self.overrides = {k: str(v) for k, v in (overrides or {}).items()}
        # a fresh sampler and fresh peaks for this run of the process
        self._sampler_stop = threading.Event()
        self.peak_tree_rss_kb = self.peak_hwm_kb = 0
        self._known_desc = {}
        super().start()

    def log_size(self) -> int:
        try:
            return self.log_path.stat().st_size
        except OSError:
            return 0

    def log_since(self, mark: int) -> list[str]:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(mark)
                return f.read().decode("utf-8", "replace").splitlines()
        except OSError:
            return []

    def memory_kb(self) -> dict:
        pid = self.proc.pid if self.alive() else None
        return {k: (_status_kb(pid, k) if pid else None) for k in ("VmRSS", "VmHWM")}


def bench_args(args) -> argparse.Namespace:
    """run.Broker's view of the options: it must never delete a data dir here."""
    bargs = argparse.Namespace(**vars(args))
    bargs.keep_data = True
    return bargs


def wait_port(b: CleanerBroker, timeout_s: float) -> float:
    """Seconds until the restarted broker accepts connections (a Metadata check is not repeated)."""
    t0 = time.monotonic()
    b.process.wait_ready(timeout_s, interval=0.01)
    return time.monotonic() - t0


def partition_files(data_dir: Path, topic: str, partition: int) -> dict:
    """What a partition directory holds: its segments and its total size."""
    d = Path(data_dir) / f"{topic}-{partition}"
    segs, total, other = [], 0, []
    for f in sorted(d.iterdir()) if d.is_dir() else []:
        size = f.stat().st_size if f.is_file() else 0
        total += size
        if f.suffix == ".log" and f.stem.isdigit():
            segs.append((int(f.stem), size))
        elif f.suffix not in (".index", ".timeindex", ".txnindex", ".snapshot") and f.is_file():
            other.append(f.name)
    segs.sort()
    closed = sum(s for _, s in segs[:-1])
    return {"dir_bytes": total, "log_bytes": sum(s for _, s in segs), "segments": len(segs),
            "closed_segment_bytes": closed, "active_segment_bytes": segs[-1][1] if segs else 0,
            "active_base_offset": segs[-1][0] if segs else None, "other_files": other}


def notable_lines(lines: list[str]) -> list[str]:
    """Broker log lines worth a note: errors, tracebacks, unknown settings."""
    out = []
    for line in lines:
        if (" ERROR " in line or " CRITICAL " in line or line.startswith("Traceback")
                or "unknown configuration" in line):
            out.append(line[:300])
    return out


def _number(text: str) -> float | int:
    text = text.replace(",", "").replace("_", "")
    return float(text) if any(c in text for c in ".eE") else int(text)


def parse_cleaned(lines: list[str], topic: str, partition: int) -> list[dict]:
    """The "cleaned <topic>-<partition>: ..." lines, one dict each (missing fields left out)."""
    out = []
    for line in lines:
        m = CLEANED_LINE.search(line)
        if not m or m["tp"] != topic or int(m["partition"]) != partition:
            continue
        row: dict = {"line": line[m.start():][:400]}
        for key, pattern in CLEANED_FIELDS.items():
            f = re.search(pattern, m["rest"])
            if f:
                row[key] = _number(f.group(1))
        t = LOG_TIME.match(line)
        if t:
            row["at"] = _dt.datetime.strptime(t.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
        out.append(row)
    return out


def cleaner_checkpoint(data_dir, topic: str, partition: int) -> int | None:
    """The partition's cleaner-offset-checkpoint (where the last clean ended), if readable."""
    try:
        lines = (Path(data_dir) / f"{topic}-{partition}" / "cleaner-offset-checkpoint").read_text().split()
        return int(lines[1])
    except (OSError, IndexError, ValueError):
        return None


def cleaning_now(data_dir, topic: str, partition: int) -> bool:
    """A pass is writing or swapping files (``.cleaned`` / ``.swap``)."""
    d = Path(data_dir) / f"{topic}-{partition}"
    try:
        return any(n.endswith((".cleaned", ".swap")) for n in os.listdir(d))
    except OSError:
        return False


def wait_cleaned(b: CleanerBroker, mark: int, topic: str, partition: int, target: int | None,
                 p: dict) -> tuple[list[dict], str | None, str | None]:
    """Wait until the broker has cleaned topic-partition up to ``target`` (the active segment's
    base offset before cleaning: the cleaner checkpoint reaches it) and then logged no clean for
    ``quiet_s``.  A log whose checkpoint stays below the target is given up on once no pass has
    come for three times the longest one so far.  Returns (cleans, error, note)."""
    deadline = time.monotonic() + p["clean_timeout"]
    seen, last_new = 0, time.monotonic()
    while True:
        cleans = parse_cleaned(b.log_since(mark), topic, partition)
        now = time.monotonic()
        if len(cleans) != seen or cleaning_now(b.data_dir, topic, partition):
            seen, last_new = len(cleans), now
        if not b.alive():
            return cleans, "broker died while cleaning: " + b.died_reason(), None
        if cleans:
            quiet = now - last_new
            ckpt = cleaner_checkpoint(b.data_dir, topic, partition)
            if (target is None or ckpt is None or ckpt >= target) and quiet >= p["quiet_s"]:
                return cleans, None, None
            longest = max(c.get("seconds", 0) for c in cleans)
            if quiet >= max(p["quiet_s"], 3 * longest + 10 * p["backoff_ms"] / 1000 + 5):
                return cleans, None, (f"cleaning stopped at offset {ckpt}, below the active segment "
                                      f"({target}): no pass for {quiet:.0f}s")
        if now > deadline:
            what = (f"still cleaning after {p['clean_timeout']:.0f}s ({len(cleans)} passes so far)" if cleans
                    else f"no 'cleaned {topic}-{partition}' line in the broker log within "
                         f"{p['clean_timeout']:.0f}s (is the log cleaner in this build?)")
            return cleans, what, None
        time.sleep(0.1)


def clean_metrics(cleans: list[dict], ready_at: float, dirty_bytes: int) -> dict:
    """Throughput from the broker's lines, and the bench's own figure from the files and the clock."""
    m: dict = {"passes": len(cleans)}
    if not cleans:
        return m
    for key in ("read_bytes", "written_bytes", "seconds"):
        if all(key in c for c in cleans):
            m[key if key != "seconds" else "busy_s"] = round(sum(c[key] for c in cleans), 3)
    if all("logged_mb_per_s" in c for c in cleans):
        m["logged_mb_per_s"] = [c["logged_mb_per_s"] for c in cleans]
    for key in ("map_keys", "map_bytes"):
        if any(key in c for c in cleans):
            m[f"max_{key}"] = max(c.get(key, 0) for c in cleans)
    if m.get("busy_s"):
        m["read_mb_per_s"] = round(m.get("read_bytes", 0) / MB / m["busy_s"], 2)
        if "logged_mb_per_s" in m:
            # each line's MB/s x its seconds = the dirty MB it counted; summed over the passes
            dirty = sum(c["logged_mb_per_s"] * c["seconds"] for c in cleans)
            m["logged_dirty_mb"] = round(dirty, 2)
            m["mb_per_s_lines"] = round(dirty / m["busy_s"], 2)
    if all("at" in c for c in cleans):
        start = cleans[0]["at"] - cleans[0].get("seconds", 0)
        m["clean_wall_s"] = round(cleans[-1]["at"] - start, 3)
        m["ready_to_clean_s"] = round(cleans[-1]["at"] - ready_at, 3)
        if m["clean_wall_s"] > 0:
            m["mb_per_s_files"] = round(dirty_bytes / MB / m["clean_wall_s"], 2)
        if m["ready_to_clean_s"] > 0:
            m["mb_per_s_files_from_ready"] = round(dirty_bytes / MB / m["ready_to_clean_s"], 2)
    return m


def run_clean(b: CleanerBroker, overrides: dict, topic: str, partition: int, target: int | None,
              p: dict) -> dict:
    """Start the broker with the cleaner on, wait for the clean, read its memory; leaves it running."""
    mark = b.log_size()
    b.start({**overrides, "log.cleaner.enable": "true", "log.cleaner.backoff.ms": p["backoff_ms"]})
    ready_s = wait_port(b, p["start_timeout"])
    ready_at = time.time()
    at_ready = b.memory_kb()
    cleans, error, note = wait_cleaned(b, mark, topic, partition, target, p)
    after = b.memory_kb()
    b._sample_once()
    return {"error": error, "note": note, "cleans": cleans, "ready_s": round(ready_s, 3), "ready_at": ready_at,
            "checkpoint": cleaner_checkpoint(b.data_dir, topic, partition), "target": target,
            "rss_at_ready_kb": at_ready["VmRSS"], "hwm_at_ready_kb": at_ready["VmHWM"],
            "rss_after_kb": after["VmRSS"], "hwm_after_kb": after["VmHWM"],
            "tree_rss_peak_kb": b.peak_tree_rss_kb, "child_processes": len(b._known_desc),
            "notable": notable_lines(b.log_since(mark))}


def _mb(kb) -> float | None:
    return None if kb is None else round(kb / 1024, 1)


# --------------------------------------------------------------------------
# client side (run in child processes through run.run_in_child)


class _KeyedDeliveries(wl._Deliveries):
    """Delivery reports that also check each record landed at offset == its sequence number."""

    def __init__(self):
        super().__init__()
        self.offset_not_seq = 0

    def on_delivery(self, err, msg) -> None:
        super().on_delivery(err, msg)
        if err is None and struct.unpack_from(">q", msg.value())[0] != msg.offset():
            self.offset_not_seq += 1


def key_sequence(count: int, keys: int, seed: int) -> list[int]:
    """The key index of every record, the same in the loader and the verifier."""
    rng = random.Random(seed)
    return [rng.randrange(keys) for _ in range(count)]


def _create_topic(bootstrap: str, topic: str, partitions: int, config: dict,
                  errs: wl._ClientErrors, log_path: str | None) -> None:
    """CreateTopics with topic configs (workloads.create_topic takes none)."""
    admin = wl.AdminClient(wl._base(bootstrap, errs, log_path))
    fut = admin.create_topics([wl.NewTopic(topic, num_partitions=partitions, replication_factor=1,
                                           config=config)], request_timeout=30)[topic]
    try:
        fut.result(timeout=30)
    except Exception as e:
        raise wl.WorkloadError(f"CreateTopics({topic}, {config}) failed: {e}. {errs.summary()}") from None
    wl._wait_topic(admin, topic, partitions, time.monotonic() + 30)


def load_compacted(bootstrap: str, topic: str, count: int, size: int, keys: int, seed: int,
                   topic_config: dict, timeout_s: float, log_path: str | None = None) -> dict:
    """Produce ``count`` keyed records of ``size`` bytes (value = 8-byte sequence number + padding)
    to a new compacted 1-partition topic, as fast as the client goes."""
    errs = wl._ClientErrors()
    try:
        _create_topic(bootstrap, topic, 1, topic_config, errs, log_path)
    except wl.WorkloadError as e:
        return wl._result(False, str(e))
    conf = wl._base(bootstrap, errs, log_path)
    conf.update(wl.THROUGHPUT_PRODUCER)
    dr = _KeyedDeliveries()
    conf.update({"acks": 1, "on_delivery": dr.on_delivery})
    prod = wl.Producer(conf)
    pad = os.urandom(size - 8)
    seq_keys = key_sequence(count, keys, seed)
    watch, deadline = wl._StallWatch(60.0), time.monotonic() + timeout_s
    t0 = time.perf_counter()
    failure = None
    try:
        for i, k in enumerate(seq_keys):
            value = struct.pack(">q", i) + pad
            while True:
                try:
                    prod.produce(topic, value, b"k%08d" % k, partition=0)
                    break
                except BufferError:
                    prod.poll(0.01)
                    if watch.stalled(dr.ok + dr.err) or time.monotonic() > deadline:
                        raise wl.WorkloadError(f"no progress while producing ({dr.ok} delivered)")
            if (i & 1023) == 0:
                prod.poll(0)
        wl._await_deliveries(prod, count, dr, watch, deadline, timeout_s)
    except wl.WorkloadError as e:
        failure = str(e)
    elapsed = time.perf_counter() - t0
    failure = wl._produce_failure(failure, dr, count, errs)
    metrics = {"records": count, "record_bytes": size, "delivered": dr.ok, "keys": keys,
               "distinct_keys": len(set(seq_keys)), "elapsed_s": round(elapsed, 2),
               "mb_per_s": round(dr.ok * size / MB / elapsed, 1), "offset_not_seq": dr.offset_not_seq}
    notes = [f"{dr.offset_not_seq} records did not land at offset == sequence (retries?); "
             f"the verifier's offset check is then approximate"] if dr.offset_not_seq else []
    return wl._result(failure is None, failure, metrics, notes)


def verify_compacted(bootstrap: str, topic: str, count: int, keys: int, seed: int,
                     active_base: int, timeout_s: float, log_path: str | None = None) -> dict:
    """Read the cleaned partition back: every key's latest record must be there, at its offset.

    Counts records kept, older versions still present (``stale``; ``stale_below_active``: those
    in the closed segments that a newer record of the key in the closed segments supersedes,
    which a complete clean removes) and damage (a record whose offset or key
    does not match what was produced, a key whose latest record is missing)."""
    seq_keys = key_sequence(count, keys, seed)
    latest: dict[int, int] = {}             # key -> its last sequence number
    latest_below: dict[int, int] = {}       # the same among the records below the active segment
    for i, k in enumerate(seq_keys):
        latest[k] = i
        if i < active_base:
            latest_below[k] = i
    errs = wl._ClientErrors()
    conf = wl._base(bootstrap, errs, log_path)
    conf.update(wl.ASSIGN_CONSUMER)
    c = wl.Consumer(conf)
    tp = wl.TopicPartition(topic, 0, wl.OFFSET_BEGINNING)
    low, high = c.get_watermark_offsets(tp, timeout=10)
    c.assign([tp])
    counts = dict.fromkeys(("records", "stale", "stale_below_active", "offset_moved", "wrong_key",
                            "msg_errors"), 0)
    found: set[int] = set()
    stale_at: list[int] = []
    pos, deadline, t0 = low, time.monotonic() + timeout_s, time.perf_counter()
    failure = None
    while pos < high:
        if time.monotonic() > deadline:
            failure = f"read back only to offset {pos} of {high} within {timeout_s:.0f}s"
            break
        for m in c.consume(num_messages=10_000, timeout=1.0):
            if m.error() is not None:
                counts["msg_errors"] += 1
                continue
            pos = m.offset() + 1
            counts["records"] += 1
            seq = struct.unpack_from(">q", m.value())[0]
            key = int(m.key()[1:])
            counts["offset_moved"] += seq != m.offset()
            counts["wrong_key"] += not (0 <= seq < count and seq_keys[seq] == key)
            if latest.get(key) == seq:
                found.add(key)
            else:
                counts["stale"] += 1
                # the cleaner sees only the closed segments: below the active segment, each key
                # keeps its last record there; anything older there should be gone
                if m.offset() < active_base and latest_below.get(key) != seq:
                    counts["stale_below_active"] += 1
                    if len(stale_at) < 20:
                        stale_at.append(m.offset())
    c.close()
    metrics = {**counts, "low": low, "high": high, "keys_latest_found": len(found),
               "keys_latest_missing": len(latest) - len(found), "read_s": round(time.perf_counter() - t0, 2),
               "stale_below_active_offsets": stale_at}
    if failure is None and (metrics["keys_latest_missing"] or counts["wrong_key"] or counts["offset_moved"]):
        failure = (f"cleaned log is wrong: {metrics['keys_latest_missing']} keys lost their latest record, "
                   f"{counts['wrong_key']} records with the wrong key, {counts['offset_moved']} records "
                   f"at another offset than produced")
    notes = []
    if counts["stale_below_active"]:
        notes.append(f"{counts['stale_below_active']} records below the active segment (offset "
                     f"{active_base}) survived the clean although a later record of their key is there too "
                     f"(offsets {stale_at[:8]}...)")
    return wl._result(failure is None, failure, metrics, notes)


def commit_offsets(bootstrap: str, group: str, topic: str, partitions: int, rounds: int,
                   in_flight: int, timeout_s: float, log_path: str | None = None) -> dict:
    """``rounds`` OffsetCommit requests of ``partitions`` offsets each, to one group, from one
    assign-mode consumer (librdkafka, asynchronous commits, at most ``in_flight`` outstanding).
    Round r commits offset r * partitions + p + 1 for partition p."""
    errs = wl._ClientErrors()
    try:
        wl.create_topic(bootstrap, topic, partitions, errs, log_path)
    except wl.WorkloadError as e:
        return wl._result(False, str(e))
    done, failed = [0], []

    def on_commit(err, parts):
        done[0] += 1
        bad = [p for p in parts or [] if p.error is not None]
        if (err is not None or bad) and len(failed) < 5:
            failed.append(str(err or bad[0].error))

    conf = wl._base(bootstrap, errs, log_path)
    conf.update({"group.id": group, "enable.auto.commit": False, "on_commit": on_commit})
    c = wl.Consumer(conf)

    def offsets(r):
        return [wl.TopicPartition(topic, p, r * partitions + p + 1) for p in range(partitions)]

    t0, deadline = time.perf_counter(), time.monotonic() + timeout_s
    failure = None
    try:
        c.commit(offsets=offsets(0), asynchronous=False)    # finds the coordinator first
        sent = 1
        done[0] += 1
        for r in range(1, rounds):
            while sent - done[0] >= in_flight:
                c.poll(0.01)
                if time.monotonic() > deadline:
                    raise wl.WorkloadError(f"timed out after {sent} of {rounds} commits")
            c.commit(offsets=offsets(r), asynchronous=True)
            sent += 1
        while done[0] < sent and time.monotonic() < deadline:
            c.poll(0.05)
        if done[0] < sent:
            raise wl.WorkloadError(f"only {done[0]} of {sent} commits answered in {timeout_s:.0f}s")
    except (wl.WorkloadError, wl.KafkaException) as e:
        failure = str(e)
    elapsed = time.perf_counter() - t0
    if failure is None and failed:
        failure = "commits failed: " + " | ".join(failed)
    c.close()
    n = rounds * partitions
    metrics = {"commits": n, "requests": rounds, "partitions_per_request": partitions,
               "elapsed_s": round(elapsed, 2), "commits_per_s": round(n / elapsed)}
    return wl._result(failure is None, failure, metrics)


def offset_fetch(port: int, group: str, topic: str, partitions: int, timeout_s: float = 5.0) -> dict:
    """OffsetFetch v1 on a new connection, the first request of a fresh client: partition ->
    (committed offset, error code).  Raises OSError when the broker does not answer."""
    def s(text: str) -> bytes:
        raw = text.encode()
        return struct.pack(">h", len(raw)) + raw

    body = (struct.pack(">hhi", 9, 1, 1) + s("kwire-bench-cleaner") + s(group) + struct.pack(">i", 1)
            + s(topic) + struct.pack(">i", partitions) + b"".join(struct.pack(">i", p) for p in range(partitions)))
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as sock:
        sock.sendall(struct.pack(">i", len(body)) + body)
        data = _recv(sock, struct.unpack(">i", _recv(sock, 4))[0])
    pos, out = 4, {}                        # after the correlation id
    (n_topics,) = struct.unpack_from(">i", data, pos)
    pos += 4
    for _ in range(n_topics):
        (n,) = struct.unpack_from(">h", data, pos)
        pos += 2 + n
        (n_parts,) = struct.unpack_from(">i", data, pos)
        pos += 4
        for _ in range(n_parts):
            part, offset, meta = struct.unpack_from(">iqh", data, pos)
            pos += 14 + max(meta, 0)
            (err,) = struct.unpack_from(">h", data, pos)
            pos += 2
            out[part] = (offset, err)
    return out


def _recv(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise OSError("connection closed")
        buf += chunk
    return bytes(buf)


# --------------------------------------------------------------------------
# workload A: cleaner throughput and memory


def memory_baseline(b: CleanerBroker, p: dict) -> dict:
    """The broker's own memory on the loaded data with the cleaner off: start, settle, read."""
    b.start(CLEANER_OFF)
    try:
        wait_port(b, p["start_timeout"])
        time.sleep(p["settle_s"])
        return b.memory_kb()
    finally:
        b.stop()


def clean_a(b: CleanerBroker, p: dict, dedupe: int, before: dict, baseline: dict) -> dict:
    """One clean of a fresh copy of the loaded log; the copy is removed afterwards."""
    pa = p["A"]
    res = run_clean(b, {"log.cleaner.dedupe.buffer.size": dedupe, "log.cleaner.threads": 1},
                    TOPIC_A, 0, before["active_base_offset"], p)
    notes = [f"broker log: {line}" for line in res["notable"][:5]] + ([res["note"]] if res["note"] else [])
    m = clean_metrics(res["cleans"], res["ready_at"], before["closed_segment_bytes"])
    m.update({"dedupe_buffer_bytes": dedupe, "ready_s": res["ready_s"], "checkpoint_after": res["checkpoint"],
              "active_base_offset": before["active_base_offset"],
              "dirty_bytes": before["closed_segment_bytes"],
              "peak_rss_mb": _mb(res["hwm_after_kb"]),
              "peak_increase_vs_cleaner_off_mb": _mb(res["hwm_after_kb"] - baseline["VmHWM"])
              if res["hwm_after_kb"] and baseline["VmHWM"] else None,
              "peak_increase_vs_ready_rss_mb": _mb(res["hwm_after_kb"] - res["rss_at_ready_kb"])
              if res["hwm_after_kb"] and res["rss_at_ready_kb"] else None,
              "rss_at_ready_mb": _mb(res["rss_at_ready_kb"]), "rss_after_mb": _mb(res["rss_after_kb"]),
              "tree_rss_peak_sampled_mb": _mb(res["tree_rss_peak_kb"]),
              "child_processes": res["child_processes"]})
    m["cleans"] = [c["line"] for c in res["cleans"]]
    ok, error = res["error"] is None, res["error"]
    if ok:
        after = partition_files(b.data_dir, TOPIC_A, 0)
        m.update({"log_bytes_after": after["log_bytes"], "segments_after": after["segments"],
                  "dir_bytes_after": after["dir_bytes"]})
        ver = run_in_child(b, "verify_compacted", dict(
            bootstrap=b.bootstrap, topic=TOPIC_A, count=pa["records"], keys=pa["keys"], seed=pa["seed"],
            active_base=before["active_base_offset"], timeout_s=p["timeout"],
            log_path=str(b.client_log)), p["timeout"] + 60, module=MODULE)
        m["verify"] = ver["metrics"]
        notes += ver["notes"]
        if not ver["ok"]:
            ok, error = False, f"verify: {ver['error']}"
    b.stop()
    return {"ok": ok, "error": error, "metrics": m, "notes": notes}


def workload_a(args, p: dict, run_dir: Path) -> dict:
    pa = p["A"]
    out: dict = {"ok": True, "error": None}
    b = CleanerBroker("A", args, run_dir)
    pristine = b.data_dir
    copies: list[Path] = []
    try:
        b.start(CLEANER_OFF)
        out["port"] = b.port
        b.wait_ready(p["start_timeout"])
        log(f"A: loading {pa['records']:,} x {pa['record_bytes']} B over {pa['keys']:,} keys "
            f"(segment.bytes {pa['segment_bytes']:,}), cleaner off")
        load = run_in_child(b, "load_compacted", dict(
            bootstrap=b.bootstrap, topic=TOPIC_A, count=pa["records"], size=pa["record_bytes"],
            keys=pa["keys"], seed=pa["seed"], topic_config=pa["topic_config"], timeout_s=p["timeout"],
            log_path=str(b.client_log)), p["timeout"] + 60, module=MODULE)
        out["load"] = load
        b.stop()
        if not load["ok"]:
            raise RuntimeError(f"load failed: {load['error']}")
        log(f"A: loaded at {load['metrics']['mb_per_s']} MB/s")
        before = out["before"] = partition_files(pristine, TOPIC_A, 0)
        baseline = memory_baseline(b, p)
        out["cleaner_off_memory"] = {"rss_mb": _mb(baseline["VmRSS"]), "hwm_mb": _mb(baseline["VmHWM"])}
        for label, dedupe in (("default", pa["dedupe_default"]), ("tiny", pa["dedupe_tiny"])):
            runs = []
            for rep in range(p["repeat"]):
                copy = Path(tempfile.mkdtemp(prefix="kwire-bench-cleaner-copy-"))
                copies.append(copy)
                shutil.copytree(pristine, copy, dirs_exist_ok=True)
                b.data_dir = copy
                log(f"A: clean with dedupe buffer {dedupe:,} B, run {rep + 1}/{p['repeat']} ...")
                res = clean_a(b, p, dedupe, before, baseline)
                runs.append(res)
                log(f"A: {label}: {one_line_a(res)}")
                if not args.keep_data:
                    shutil.rmtree(copy, ignore_errors=True)
                if not res["ok"]:
                    break
            out[label] = _combine(runs)
            out["ok"] = out["ok"] and out[label]["ok"]
    except Exception as e:
        out["ok"], out["error"] = False, f"{type(e).__name__}: {e}"
        log(f"A: FAILED: {out['error']}")
    finally:
        if b.alive():
            b.stop()
        b.data_dir = pristine
        if not args.keep_data:
            for d in [pristine, *copies]:
                shutil.rmtree(d, ignore_errors=True)
    return out


def one_line_a(res: dict) -> str:
    m = res["metrics"]
    text = (f"{m.get('passes')} pass(es), {m.get('mb_per_s_lines')} MB/s of dirty log (lines), "
            f"{m.get('mb_per_s_files')} MB/s (files/wall), peak +{m.get('peak_increase_vs_cleaner_off_mb')} MiB")
    return text if res["ok"] else f"FAILED: {res['error']} [{text}]"


# --------------------------------------------------------------------------
# workload B: start-up after 1,000,000 offset commits


def timed_start(b: CleanerBroker, overrides: dict, partitions: int, expected: dict, p: dict) -> dict:
    """Spawn the broker; seconds until the port accepts and until a fresh connection's OffsetFetch
    returns every expected offset (polled every 10 ms).  Stops the broker again."""
    mark = b.log_size()
    t0 = time.perf_counter()
    b.start(overrides)
    port_s = offsets_s = None
    last = "nothing yet"
    deadline = time.monotonic() + p["start_timeout"]
    try:
        while offsets_s is None:
            if not b.alive():
                raise RuntimeError("broker exited during start-up: " + b.died_reason())
            if time.monotonic() > deadline:
                raise RuntimeError(f"no complete OffsetFetch within {p['start_timeout']:.0f}s: {last}")
            try:
                got = offset_fetch(b.port, GROUP_B, TOPIC_B, partitions)
                if port_s is None:
                    port_s = time.perf_counter() - t0
                wrong = [q for q, want in expected.items() if got.get(q) != (want, 0)]
                if not wrong:
                    offsets_s = time.perf_counter() - t0
                    break
                last = f"{len(wrong)} partitions not as committed, e.g. {wrong[0]}: {got.get(wrong[0])}"
            except OSError as e:
                last = f"{type(e).__name__}: {e}"
            time.sleep(0.01)
        cpu = b.cpu_seconds()
        mem = b.memory_kb()
    finally:
        b.stop()
    lines = b.log_since(mark)
    replayed = [int(m.group(1)) for line in lines for m in [REPLAYED.search(line)] if m]
    return {"ok": True, "error": None, "notes": [f"broker log: {x}" for x in notable_lines(lines)[:3]],
            "metrics": {"port_open_s": round(port_s, 3), "offsets_s": round(offsets_s, 3),
                        "startup_cpu_s": round(cpu, 2) if cpu is not None else None,
                        "rss_at_ready_mb": _mb(mem["VmRSS"]), "hwm_at_ready_kb": mem["VmHWM"],
                        "records_replayed": replayed[-1] if replayed else None}}


def startups(b: CleanerBroker, label: str, overrides: dict, partitions: int, expected: dict, p: dict) -> dict:
    runs = []
    for rep in range(p["repeat"]):
        try:
            res = timed_start(b, overrides, partitions, expected, p)
        except RuntimeError as e:
            res = {"ok": False, "error": str(e), "metrics": {}, "notes": []}
        runs.append(res)
        m = res["metrics"]
        log(f"B: start-up {label} run {rep + 1}/{p['repeat']}: "
            + (f"offsets after {m['offsets_s']} s (port {m['port_open_s']} s), "
               f"{m['records_replayed']} records replayed" if res["ok"] else f"FAILED: {res['error']}"))
        if not res["ok"]:
            break
    return _combine(runs)


def load_commits(b: CleanerBroker, overrides: dict, rounds: int, p: dict) -> dict:
    pb = p["B"]
    b.start(overrides)
    try:
        b.wait_ready(p["start_timeout"])
        return run_in_child(b, "commit_offsets", dict(
            bootstrap=b.bootstrap, group=GROUP_B, topic=TOPIC_B, partitions=pb["partitions"],
            rounds=rounds, in_flight=pb["in_flight"], timeout_s=p["timeout"], log_path=str(b.client_log)),
            p["timeout"] + 60, module=MODULE)
    finally:
        b.stop()


def workload_b(args, p: dict, run_dir: Path) -> dict:
    pb = p["B"]
    parts, rounds = pb["partitions"], pb["rounds"]
    expected = {q: (rounds - 1) * parts + q + 1 for q in range(parts)}
    broker_conf = {**CLEANER_OFF, **pb["broker_config"]}
    out: dict = {"ok": True, "error": None}
    b = CleanerBroker("B", args, run_dir)
    ref = CleanerBroker("B-ref", args, run_dir)
    out["port"] = b.port
    try:
        log(f"B: committing {rounds:,} x {parts} offsets to group {GROUP_B}, cleaner off")
        commit = out["commit"] = load_commits(b, broker_conf, rounds, p)
        if not commit["ok"]:
            raise RuntimeError(f"commits failed: {commit['error']}")
        log(f"B: {commit['metrics']['commits']:,} commits in {commit['metrics']['elapsed_s']} s")
        out["offsets_before"] = partition_files(b.data_dir, OFFSETS_TOPIC, 0)
        out["before"] = startups(b, "before cleaning", broker_conf, parts, expected, p)
        log(f"B: reference: one round of {parts} commits (only the live keys) ...")
        ref_commit = load_commits(ref, broker_conf, 1, p)
        if ref_commit["ok"]:
            out["reference"] = startups(ref, "reference", broker_conf, parts,
                                        {q: q + 1 for q in range(parts)}, p)
        else:
            out["reference"] = ref_commit
        log("B: restart with the cleaner on, waiting for __consumer_offsets to be cleaned ...")
        res = run_clean(b, {**pb["broker_config"], "log.cleaner.threads": 1}, OFFSETS_TOPIC, 0,
                        out["offsets_before"]["active_base_offset"], p)
        b.stop()
        cm = clean_metrics(res["cleans"], res["ready_at"], out["offsets_before"]["closed_segment_bytes"])
        hwm_off = out["before"]["metrics"].get("hwm_at_ready_kb")
        cm.update({"peak_rss_mb": _mb(res["hwm_after_kb"]),
                   "peak_increase_vs_cleaner_off_mb": _mb(res["hwm_after_kb"] - hwm_off)
                   if res["hwm_after_kb"] and hwm_off else None})
        out["clean"] = {"error": res["error"], "notes": res["notable"][:5] + ([res["note"]] if res["note"] else []),
                        "metrics": cm,
                        "lines": [c["line"] for c in res["cleans"]]}
        if res["error"]:
            raise RuntimeError(f"clean of {OFFSETS_TOPIC}-0: {res['error']}")
        out["offsets_after"] = partition_files(b.data_dir, OFFSETS_TOPIC, 0)
        out["after"] = startups(b, "after cleaning", broker_conf, parts, expected, p)
    except Exception as e:
        out["ok"], out["error"] = False, f"{type(e).__name__}: {e}"
        log(f"B: FAILED: {out['error']}")
    finally:
        for x in (b, ref):
            if x.alive():
                x.stop()
            if not args.keep_data:
                shutil.rmtree(x.data_dir, ignore_errors=True)
    for k in ("before", "after", "reference"):
        if k in out and not out[k]["ok"]:
            out["ok"] = False
    return out


def tansu_reference(args) -> dict:
    """Tansu as a start-up reference needs a storage engine that survives a restart; the memory
    engine does not.  Probe for one (sqlite needs the libsql feature) and say why it is skipped."""
    try:
        tansu = find_tansu(args.tansu_bin)
    except Exception as e:
        return {"skipped": f"tansu not found: {e}"}
    with tempfile.TemporaryDirectory(prefix="kwire-bench-tansu-") as d:
        url = f"tcp://127.0.0.1:{free_port()}"
        try:
            res = subprocess.run([tansu, "broker", "--listener-url", url, "--advertised-listener-url", url,
                                  "--storage-engine", f"sqlite://{d}/tansu.db"],
                                 capture_output=True, text=True, timeout=3, cwd=d)
            text = (res.stdout + res.stderr).strip().splitlines()
            reason = next((x for x in text if "Error" in x), text[-1] if text else f"exit {res.returncode}")
            return {"skipped": "tansu has no persistent storage engine here, so nothing survives its "
                               f"restart (memory only; sqlite:// said: {reason.strip()[:200]})"}
        except subprocess.TimeoutExpired:
            return {"skipped": "tansu accepted sqlite:// storage, but the start-up comparison against it "
                               "is not implemented in this bench"}


# --------------------------------------------------------------------------
# plan, report, main


def kwire_source() -> dict:
    """Where the broker's code comes from, and whether it is the commit ``environment`` names."""
    import kwire

    where = str(Path(kwire.__file__).resolve().parent)
    out = {"kwire_imported_from": where}
    if where == str(BENCH_DIR.parent / "kwire"):
        dirty = subprocess.run(["git", "-C", str(BENCH_DIR.parent), "status", "--porcelain", "--", "kwire",
                                "log", "codecs", "groups", "admin"], capture_output=True, text=True).stdout
        out["uncommitted_broker_changes"] = dirty.splitlines()[:20]
    return out


def plan(args) -> dict:
    q = args.quick
    a_mb = args.a_mb or (20 if q else 200)
    size = max(16, args.a_record_bytes)
    seg = int((args.segment_mb or (4 if q else 16)) * MIB)
    b_commits = args.commits or (50_000 if q else 1_000_000)
    parts = args.commit_partitions
    offsets_seg = int((args.offsets_segment_mb or (0.5 if q else 4)) * MIB)
    return {
        "quick": q, "repeat": max(1, args.repeat), "timeout": args.timeout,
        "start_timeout": args.start_timeout,
        "clean_timeout": args.clean_timeout or (90 if q else 900),
        "backoff_ms": args.backoff_ms,
        "quiet_s": max(3.0, 10 * args.backoff_ms / 1000),   # no clean for this long: the log is clean
        "settle_s": 2.0,
        "A": {"records": int(a_mb * MB) // size, "record_bytes": size,
              "keys": args.a_keys or (5_000 if q else 100_000), "seed": 12,
              "segment_bytes": seg,
              "topic_config": {"cleanup.policy": "compact", "segment.bytes": str(seg),
                               "min.cleanable.dirty.ratio": str(args.min_dirty_ratio)},
              "dedupe_default": 134217728,
              "dedupe_tiny": int((args.tiny_buffer_kib or (128 if q else 1024)) * 1024)},
        "B": {"commits": b_commits, "partitions": parts, "rounds": max(1, b_commits // parts),
              "in_flight": 64,
              "broker_config": {"offsets.topic.num.partitions": 1,
                                # both: offsets.topic.segment.bytes if this build has it, else the
                                # broker default that __consumer_offsets inherits
                                "offsets.topic.segment.bytes": offsets_seg,
                                "log.segment.bytes": offsets_seg}},
    }


def ratio(a, b):
    return round(a / b, 2) if a is not None and b else None


# The rows of table A: (label, metric key); rows without a key are composed in _a_cell.
A_ROWS = [("passes (cleaned lines)", "passes"),
          ("MB/s of dirty log (broker's lines)", "mb_per_s_lines"),
          ("  the lines' MB/s, min-max (all passes)", None),
          ("MB/s of dirty log (closed segs / wall)", "mb_per_s_files"),
          ("MB/s from port open to clean", "mb_per_s_files_from_ready"),
          ("MB/s read (bytes read / busy s)", "read_mb_per_s"),
          ("cleaner busy s (sum of passes)", "busy_s"),
          ("port open -> last clean s", "ready_to_clean_s"),
          ("bytes read / dirty bytes", None),
          ("log MB (segments) before -> after", None),
          ("offset map keys / bytes (max)", None),
          ("peak RSS MiB (VmHWM)", "peak_rss_mb"),
          ("peak increase vs cleaner off MiB", "peak_increase_vs_cleaner_off_mb"),
          ("peak increase vs RSS at port open MiB", "peak_increase_vs_ready_rss_mb"),
          ("verify: records kept / latest per key", None),
          ("verify: stale below active / damaged", None)]
B_ROWS = (("spawn -> OffsetFetch has all offsets s", "offsets_s"),
          ("spawn -> port accepts s", "port_open_s"),
          ("records replayed", "records_replayed"),
          ("broker CPU s at that point", "startup_cpu_s"),
          ("RSS at that point MiB", "rss_at_ready_mb"))


def _a_cell(a: dict, k: str, label: str, key: str | None) -> str:
    """One cell of table A: column ``k`` (default or tiny buffer), row ``label``."""
    m = a[k]["metrics"]
    v = m.get("verify") or {}
    if key:
        val = m.get(key)
        return "/".join(_fmt(x) for x in val) if isinstance(val, list) else _fmt(val)
    if "min-max" in label:
        vals = [x for r in a[k].get("runs") or [m] for x in r.get("logged_mb_per_s") or []]
        return f"{_fmt(min(vals))}-{_fmt(max(vals))}" if vals else "-"
    if label.startswith("bytes read"):
        return f"{_fmt(ratio(m.get('read_bytes'), m.get('dirty_bytes')))}"
    if label.startswith("log MB"):
        bf = a.get("before") or {}
        return (f"{_fmt(bf.get('log_bytes', 0) / MB)} ({bf.get('segments')}) -> "
                f"{_fmt(m.get('log_bytes_after', 0) / MB)} ({m.get('segments_after')})")
    if label.startswith("offset map"):
        return f"{_fmt(m.get('max_map_keys'))} / {_fmt(m.get('max_map_bytes'))}"
    if "records kept" in label:
        return f"{_fmt(v.get('records'))} / {_fmt(v.get('keys_latest_found'))}"
    return (f"{_fmt(v.get('stale_below_active'))} / "
            f"{_fmt((v.get('keys_latest_missing') or 0) + (v.get('wrong_key') or 0) + (v.get('offset_moved') or 0)) if v else '-'}")


def _report_a(a: dict, pa: dict, repeat) -> list[str]:
    lines = [f"== A: cleaner throughput and memory (kwire; median of {repeat} run(s)) =="]
    if a.get("load"):
        lm = a["load"]["metrics"]
        bf = a.get("before") or {}
        lines.append(f"  dirty log: {lm.get('records', 0):,} records x {pa['record_bytes']} B over "
                     f"{lm.get('distinct_keys', 0):,} keys, {bf.get('segments')} segments of "
                     f"{pa['segment_bytes'] / MIB:g} MiB: {_fmt((bf.get('closed_segment_bytes') or 0) / MB)} MB "
                     f"in closed segments + {_fmt((bf.get('active_segment_bytes') or 0) / MB)} MB active; "
                     f"loaded at {lm.get('mb_per_s')} MB/s")
    if a.get("cleaner_off_memory"):
        lines.append(f"  broker on this data with the cleaner off: VmHWM "
                     f"{a['cleaner_off_memory']['hwm_mb']} MiB")
    cols = [k for k in ("default", "tiny") if k in a]
    if cols:
        head = f"  {'metric':<46}" + "".join(
            f"{'buffer ' + _fmt(a[k]['metrics'].get('dedupe_buffer_bytes', 0) / MIB) + ' MiB':>24}"
            for k in cols)
        lines += [head, "  " + "-" * (len(head) - 2)]
        for label, key in A_ROWS:
            lines.append(f"  {label:<46}" + "".join(f"{_a_cell(a, k, label, key):>24}" for k in cols))
        for k in cols:
            if not a[k]["ok"]:
                lines.append(f"  {k} FAILED: {a[k]['error']}")
            for n in a[k].get("notes", []):
                lines.append(f"  {k} note: {n}")
    if a.get("error"):
        lines.append(f"  ERROR: {a['error']}")
    lines.append("")
    return lines


def _report_b_logs(b: dict, pb: dict) -> list[str]:
    """Part B's commit load, the offsets log before and after cleaning, and the clean itself."""
    lines = []
    if b.get("commit"):
        cm = b["commit"]["metrics"]
        lines.append(f"  commits: {cm.get('requests', 0):,} OffsetCommit x {cm.get('partitions_per_request')} "
                     f"partitions in {cm.get('elapsed_s')} s ({cm.get('commits_per_s', 0):,} commits/s); "
                     f"{OFFSETS_TOPIC} segments of {pb['broker_config']['log.segment.bytes'] / MIB:g} MiB")
    for key, label in (("offsets_before", "before cleaning"), ("offsets_after", "after cleaning")):
        f = b.get(key)
        if f:
            lines.append(f"  {OFFSETS_TOPIC}-0 {label}: {_fmt(f['log_bytes'] / MB)} MB of log in "
                         f"{f['segments']} segment(s) (active {_fmt(f['active_segment_bytes'] / MB)} MB), "
                         f"directory {_fmt(f['dir_bytes'] / MB)} MB")
    cm = (b.get("clean") or {}).get("metrics")
    if cm:
        parts = [f"{cm.get('passes')} pass(es)", f"{cm.get('mb_per_s_lines')} MB/s of dirty log (lines)",
                 f"{cm.get('mb_per_s_files')} MB/s (files/wall)",
                 f"port open -> clean {cm.get('ready_to_clean_s')} s",
                 f"peak RSS {cm.get('peak_rss_mb')} MiB (+{cm.get('peak_increase_vs_cleaner_off_mb')} MiB over "
                 f"the cleaner-off start-up's)"]
        lines.append("  clean: " + ", ".join(parts))
    return lines


def _report_b(b: dict, pb: dict, repeat) -> list[str]:
    lines = [f"== B: start-up after {pb['rounds'] * pb['partitions']:,} offset commits to one group "
             f"(kwire; median of {repeat} run(s)) =="]
    lines += _report_b_logs(b, pb)
    cols = [k for k in ("before", "after", "reference") if k in b and b[k].get("metrics")]
    if cols:
        head = f"  {'metric':<40}" + "".join(f"{c:>12}" for c in cols) + f"{'after/before':>14}"
        lines += [head, "  " + "-" * (len(head) - 2)]
        for label, key in B_ROWS:
            vals = [b[c]["metrics"].get(key) for c in cols]
            r = ratio(b.get("after", {}).get("metrics", {}).get(key),
                      b.get("before", {}).get("metrics", {}).get(key))
            lines.append(f"  {label:<40}" + "".join(f"{_fmt(v):>12}" for v in vals)
                         + f"{_fmt(r):>14}")
        lines.append("  reference = a fresh broker whose group has one round of commits (the live "
                     "keys only)")
    for k in ("commit", "before", "after", "reference"):
        r = b.get(k)
        if r and not r.get("ok", True):
            lines.append(f"  {k} FAILED: {r.get('error')}")
        for n in (r or {}).get("notes", []):
            lines.append(f"  {k} note: {n}")
    for n in (b.get("clean") or {}).get("notes", []):
        lines.append(f"  clean note: {n}")
    if b.get("error"):
        lines.append(f"  ERROR: {b['error']}")
    lines.append("")
    return lines


def report(doc: dict) -> str:
    p = doc["params"]
    lines = []
    res = doc["results"]
    if "A" in res:
        lines += _report_a(res["A"], p["A"], p["repeat"])
    if "B" in res:
        lines += _report_b(res["B"], p["B"], p["repeat"])
    if doc.get("tansu"):
        lines.append(f"tansu: skipped: {doc['tansu'].get('skipped')}")
    return "\n".join(lines)


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small sizes: checks the harness in < 2 min")
    ap.add_argument("--workloads", default="A,B", help="A (throughput, memory), B (start-up) or both")
    ap.add_argument("--repeat", type=int, default=1, metavar="N",
                    help="cleans per buffer size (A) and start-ups per state (B); medians reported")
    ap.add_argument("--json", metavar="PATH", help="also write the JSON results here")
    ap.add_argument("--a-mb", type=float, help="A: MB of record values to load (default 200; quick 20)")
    ap.add_argument("--a-record-bytes", type=int, default=1024,
                    help="A: bytes of each record's value (default 1024)")
    ap.add_argument("--a-keys", type=int, help="A: distinct keys (default 100,000; quick 5,000)")
    ap.add_argument("--segment-mb", type=float, help="A: segment.bytes in MiB (default 16; quick 4)")
    ap.add_argument("--min-dirty-ratio", type=float, default=0.01,
                    help="A: the topic's min.cleanable.dirty.ratio (default 0.01, so that a small "
                         "buffer's passes carry on until the whole log is clean)")
    ap.add_argument("--tiny-buffer-kib", type=float,
                    help="A: the small log.cleaner.dedupe.buffer.size in KiB (default 1024; quick 128)")
    ap.add_argument("--commits", type=int, help="B: offset commits (default 1,000,000; quick 50,000)")
    ap.add_argument("--commit-partitions", type=int, default=100,
                    help="B: partitions per OffsetCommit request (default 100)")
    ap.add_argument("--offsets-segment-mb", type=float,
                    help="B: segment size of __consumer_offsets in MiB (default 4; quick 0.5)")
    ap.add_argument("--backoff-ms", type=int, default=200, help="log.cleaner.backoff.ms (default 200)")
    ap.add_argument("--clean-timeout", type=float, help="seconds to wait for a clean (default 900; quick 90)")
    ap.add_argument("--timeout", type=float, default=600.0, help="per client step, seconds (default 600)")
    ap.add_argument("--start-timeout", type=float, default=120.0,
                    help="seconds a broker may take to start (default 120)")
    ap.add_argument("--kwire-arg", action="append", default=[],
                    help="extra argument for 'python -m kwire serve' (repeatable)")
    ap.add_argument("--tansu-bin", help="tansu binary, for the reference probe")
    ap.add_argument("--keep-data", action="store_true", help="keep the data directories")
    ap.add_argument("--results-dir", default=str(BENCH_DIR / "results"))
    args = ap.parse_args(argv)
    selected = [w.strip().upper() for w in args.workloads.split(",") if w.strip()]
    if not selected or any(w not in ("A", "B") for w in selected):
        ap.error("--workloads takes A, B or A,B")
    return args, selected


def main(argv=None) -> int:
    args, selected = parse_args(argv)
    run_id = _dt.datetime.now().strftime("%Y%m%d-%H%M%S") + ("-quick" if args.quick else "") + "-cleaner"
    run_dir = Path(args.results_dir) / run_id
    run_dir.mkdir(parents=True, exist_ok=True)
    p = plan(args)
    doc = {"run_id": run_id, "started": _dt.datetime.now().isoformat(timespec="seconds"),
           "workloads_selected": selected, "params": p, "environment": {**environment(args), **kwire_source()}, "results": {}}
    log(f"cleaner run {run_id}: workloads {selected}, repeat {p['repeat']}; output in {run_dir}")
    interrupted = False
    try:
        if "A" in selected:
            doc["results"]["A"] = workload_a(args, p, run_dir)
        if "B" in selected:
            doc["results"]["B"] = workload_b(args, p, run_dir)
            doc["tansu"] = tansu_reference(args)
    except KeyboardInterrupt:
        interrupted = True
        log("interrupted; writing partial results")
    doc["finished"] = _dt.datetime.now().isoformat(timespec="seconds")
    text = report(doc)
    print(text)
    (run_dir / "results.json").write_text(json.dumps(doc, indent=2, default=str))
    (run_dir / "report.txt").write_text(text + "\n")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(doc, indent=2, default=str))
    log(f"results: {run_dir / 'results.json'}" + (f" and {args.json}" if args.json else ""))
    if interrupted:
        return 130
    return 0 if all(r.get("ok") for r in doc["results"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
