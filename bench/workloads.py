"""Client-side workloads for the kwire benchmark harness.

Every function here runs in its own spawned child process (see
``run.py:run_in_child``) so that a hung librdkafka call can be killed by PID
and the client's CPU time is measured in isolation.  Each function returns a
plain dict::

    {"ok": bool, "error": str | None, "metrics": {...}, "notes": [...]}

All loops are bounded both by a count and by a wall-clock deadline.
"""

from __future__ import annotations

import logging
import math
import os
import resource
import struct
import threading
import time

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

MB = 1_000_000  # MB/s figures use decimal megabytes of record *value* bytes

# Client configuration shared by every broker under test.  Keep these
# identical across brokers: the point of the harness is the ratio.
THROUGHPUT_PRODUCER = {
    "linger.ms": 5,
    "batch.size": 1_000_000,
    "compression.type": "none",
    "enable.idempotence": False,
    "message.timeout.ms": 120_000,
}
LATENCY_PRODUCER = {
    "linger.ms": 0,
    "acks": 1,
    "compression.type": "none",
    "enable.idempotence": False,
    "message.timeout.ms": 30_000,
}
ASSIGN_CONSUMER = {
    # group.id is set (librdkafka wants one) but we only ever assign();
    # never subscribe() and never commit, so no group APIs are exercised
    # beyond what librdkafka does on its own.
    "group.id": "kwire-bench-assign-only",
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "auto.offset.reset": "earliest",
    "enable.partition.eof": False,
    # librdkafka pauses fetching for fetch.queue.backoff.ms (default 1000)
    # whenever its local prefetch queue is over queued.min.messages; the
    # Python loop drains slower than a fast broker fills it, so the default
    # turns the consume benchmark into a measurement of that 1 s timer.
    "fetch.queue.backoff.ms": 10,
}
LATENCY_CONSUMER_EXTRA = {
    "fetch.wait.max.ms": 10,
    "fetch.min.bytes": 1,
    "auto.offset.reset": "latest",
}


class WorkloadError(Exception):
    pass


class _ClientErrors:
    """Collects librdkafka error_cb reports so failures can name a cause."""

    def __init__(self, limit: int = 20):
        self.limit = limit
        self.items: list[str] = []
        self.count = 0

    def __call__(self, err: KafkaError) -> None:
        self.count += 1
        if len(self.items) < self.limit:
            self.items.append(f"{err.name()}: {err.str()}")

    def summary(self) -> str:
        if not self.items:
            return ""
        uniq = list(dict.fromkeys(self.items))
        return f"client errors ({self.count}): " + " | ".join(uniq[:5])


def _logger(log_path: str | None) -> logging.Logger:
    log = logging.getLogger("kwire-bench-client")
    if not log.handlers:
        if log_path:
            h: logging.Handler = logging.FileHandler(log_path)
        else:
            h = logging.NullHandler()
        h.setFormatter(logging.Formatter("%(asctime)s %(process)d %(message)s"))
        log.addHandler(h)
        log.setLevel(logging.INFO)
    return log


def _base(bootstrap: str, errs: _ClientErrors, log_path: str | None) -> dict:
    return {
        "bootstrap.servers": bootstrap,
        "client.id": "kwire-bench",
        "error_cb": errs,
        "logger": _logger(log_path),
        "socket.connection.setup.timeout.ms": 10_000,
        # Keep ApiVersions on (default) so missing APIs show up as
        # "unsupported" errors rather than as silent protocol confusion.
    }


def _result(ok: bool, error: str | None = None, metrics: dict | None = None,
            notes: list | None = None) -> dict:
    return {"ok": ok, "error": error, "metrics": metrics or {},
            "notes": notes or []}


def _cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


# --------------------------------------------------------------------------
# metadata / topic helpers


def metadata_check(bootstrap: str, timeout_s: float = 10.0,
                   log_path: str | None = None) -> dict:
    """One Metadata request: proves the broker speaks enough Kafka to serve."""
    errs = _ClientErrors()
    admin = AdminClient(_base(bootstrap, errs, log_path))
    try:
        md = admin.list_topics(timeout=timeout_s)
    except KafkaException as e:
        return _result(False, f"Metadata request failed: {e}. {errs.summary()}")
    brokers = {b.id: f"{b.host}:{b.port}" for b in md.brokers.values()}
    return _result(True, metrics={
        "cluster_id": md.cluster_id,
        "controller_id": md.controller_id,
        "brokers": brokers,
        "topics": sorted(md.topics),
    })


def _wait_topic(admin: AdminClient, topic: str, partitions: int,
                deadline: float) -> None:
    last = "no metadata"
    while time.monotonic() < deadline:
        try:
            md = admin.list_topics(topic=topic, timeout=5)
            t = md.topics.get(topic)
            if t is not None and t.error is None:
                ready = [p for p in t.partitions.values()
                         if p.error is None and p.leader >= 0]
                if len(ready) >= partitions:
                    return
                last = (f"{len(ready)}/{partitions} partitions have a leader"
                        f" (topic reports {len(t.partitions)} partitions)")
            elif t is not None:
                last = f"topic error {t.error}"
        except KafkaException as e:
            last = str(e)
        time.sleep(0.2)
    raise WorkloadError(f"topic {topic!r} not ready with {partitions} "
                        f"partition(s) before deadline: {last}")


def create_topic(bootstrap: str, topic: str, partitions: int,
                 errs: _ClientErrors, log_path: str | None,
                 timeout_s: float = 30.0) -> None:
    """CreateTopics via AdminClient; raises WorkloadError naming the cause."""
    admin = AdminClient(_base(bootstrap, errs, log_path))
    deadline = time.monotonic() + timeout_s
    try:
        fut = admin.create_topics(
            [NewTopic(topic, num_partitions=partitions, replication_factor=1)],
            operation_timeout=min(timeout_s, 20), request_timeout=timeout_s,
        )[topic]
        fut.result(timeout=timeout_s)
    except KafkaException as e:
        err = e.args[0] if e.args else e
        if isinstance(err, KafkaError) and err.code() == KafkaError.TOPIC_ALREADY_EXISTS:
            pass
        else:
            raise WorkloadError(f"CreateTopics({topic}, partitions={partitions})"
                                f" failed: {e}. {errs.summary()}") from None
    except Exception as e:  # concurrent.futures.TimeoutError, etc.
        what = (f"no CreateTopics result within {timeout_s:.0f}s"
                if "Timeout" in type(e).__name__ else
                f"{type(e).__name__}: {e}")
        raise WorkloadError(f"CreateTopics({topic}, partitions={partitions})"
                            f" failed: {what}. {errs.summary()}") from None
    _wait_topic(admin, topic, partitions, deadline)


def _ensure_single_partition_topic(bootstrap, topic, errs, log_path, notes):
    """Workloads 1 and 4 only need one partition: if CreateTopics is missing,
    fall back to broker auto-creation and say so, instead of failing."""
    try:
        create_topic(bootstrap, topic, 1, errs, log_path)
    except WorkloadError as e:
        notes.append(f"{e} -- falling back to auto-creation on produce")


def _partition_count(bootstrap, topic, errs, log_path) -> int | None:
    admin = AdminClient(_base(bootstrap, errs, log_path))
    try:
        t = admin.list_topics(topic=topic, timeout=5).topics.get(topic)
        return len(t.partitions) if t is not None and t.error is None else None
    except KafkaException:
        return None


# --------------------------------------------------------------------------
# workloads 1 and 2: produce throughput


def produce_throughput(bootstrap: str, topic: str, count: int, size: int,
                       acks, partitions: int, timeout_s: float,
                       stall_s: float = 60.0, create: str = "required",
                       log_path: str | None = None) -> dict:
    """Produce ``count`` records of ``size`` bytes; the clock runs from the
    first produce() until every delivery report has come back."""
    errs = _ClientErrors()
    notes: list[str] = []
    try:
        if create == "required":
            create_topic(bootstrap, topic, partitions, errs, log_path)
        else:
            _ensure_single_partition_topic(bootstrap, topic, errs, log_path,
                                           notes)
    except WorkloadError as e:
        return _result(False, str(e), notes=notes)

    state = {"ok": 0, "err": 0, "first_err": None}

    def on_delivery(err, _msg):
        if err is None:
            state["ok"] += 1
        else:
            state["err"] += 1
            if state["first_err"] is None:
                state["first_err"] = f"{err.name()}: {err.str()}"

    conf = _base(bootstrap, errs, log_path)
    conf.update(THROUGHPUT_PRODUCER)
    conf["acks"] = acks
    conf["on_delivery"] = on_delivery
    p = Producer(conf)
    payload = os.urandom(size)
    cpu0 = _cpu_s()
    t0 = time.perf_counter()
    deadline = time.monotonic() + timeout_s
    produced = 0
    failure = None

    def progress_stalled(last_done, last_change):
        done = state["ok"] + state["err"]
        now = time.monotonic()
        if done != last_done:
            return done, now, False
        return last_done, last_change, (now - last_change) > stall_s

    last_done, last_change = 0, time.monotonic()
    try:
        for i in range(count):
            while True:
                try:
                    p.produce(topic, payload)
                    break
                except BufferError:
                    # local queue full: serve delivery reports and retry
                    p.poll(0.01)
                    last_done, last_change, stalled = progress_stalled(
                        last_done, last_change)
                    if stalled:
                        raise WorkloadError(
                            f"no delivery progress for {stall_s:.0f}s "
                            f"(queue full)")
                    if time.monotonic() > deadline:
                        raise WorkloadError(f"timed out after {timeout_s:.0f}s "
                                            f"while producing")
            produced += 1
            if (i & 1023) == 0:
                p.poll(0)
                if state["err"] and state["ok"] == 0 and state["err"] > 1000:
                    raise WorkloadError("every delivery so far failed")
        while state["ok"] + state["err"] < produced:
            p.poll(0.05)
            last_done, last_change, stalled = progress_stalled(
                last_done, last_change)
            if stalled:
                raise WorkloadError(f"no delivery progress for {stall_s:.0f}s")
            if time.monotonic() > deadline:
                raise WorkloadError(f"timed out after {timeout_s:.0f}s waiting "
                                    f"for delivery reports")
    except WorkloadError as e:
        failure = str(e)
    elapsed = time.perf_counter() - t0
    client_cpu = _cpu_s() - cpu0
    remaining = len(p)
    if remaining:
        p.purge()
        p.poll(0.5)

    ok = state["ok"]
    metrics = {
        "records": count,
        "record_bytes": size,
        "acks": acks,
        "partitions": partitions,
        "delivered": ok,
        "delivery_errors": state["err"],
        "elapsed_s": round(elapsed, 3),
        "records_per_s": round(ok / elapsed, 1) if elapsed > 0 else None,
        "mb_per_s": round(ok * size / MB / elapsed, 2) if elapsed > 0 else None,
        "client_cpu_s": round(client_cpu, 2),
    }
    if create != "required":
        n = _partition_count(bootstrap, topic, errs, log_path)
        metrics["partitions_observed"] = n
        if n is not None and n != partitions:
            notes.append(f"topic has {n} partitions, expected {partitions}")
    if failure is None and state["err"]:
        failure = (f"{state['err']} of {count} deliveries failed; first: "
                   f"{state['first_err']}")
    if failure is not None:
        if state["first_err"] and state["first_err"] not in failure:
            failure += f"; first delivery error: {state['first_err']}"
        if errs.items:
            failure += f". {errs.summary()}"
        return _result(False, failure, metrics, notes)
    return _result(True, None, metrics, notes)


# --------------------------------------------------------------------------
# workload 3: consume throughput (assign mode, no group)


def consume_throughput(bootstrap: str, topic: str, expected: int,
                       partitions: int, timeout_s: float,
                       stall_s: float = 60.0,
                       log_path: str | None = None) -> dict:
    errs = _ClientErrors()
    conf = _base(bootstrap, errs, log_path)
    conf.update(ASSIGN_CONSUMER)
    c = Consumer(conf)
    got = 0
    nbytes = 0
    first_at = None
    failure = None
    msg_errors: list[str] = []
    try:
        # Learn the partition leader first: if assign() runs before the
        # consumer has metadata, librdkafka parks the offset lookup on a
        # ~500 ms retry timer, which would dominate a short measurement.
        c.list_topics(topic=topic, timeout=10)
    except KafkaException as e:
        msg_errors.append(f"metadata before assign failed: {e}")
    cpu0 = _cpu_s()
    t0 = time.perf_counter()
    deadline = time.monotonic() + timeout_s
    last_progress = time.monotonic()
    try:
        c.assign([TopicPartition(topic, i, OFFSET_BEGINNING)
                  for i in range(partitions)])
        # bounded: at most one iteration per 1s timeout until the deadline
        while got < expected:
            # consume() blocks until num_messages or the timeout: never ask
            # for more than remain, or the last batch would wait out the
            # timeout and inflate the elapsed time
            msgs = c.consume(num_messages=min(10_000, expected - got),
                             timeout=1.0)
            now = time.monotonic()
            for m in msgs:
                e = m.error()
                if e is not None:
                    if len(msg_errors) < 10:
                        msg_errors.append(f"{e.name()}: {e.str()}")
                    if e.fatal():
                        raise WorkloadError(f"consumer error {e.name()}: "
                                            f"{e.str()}")
                    continue
                got += 1
                nbytes += len(m)
            if msgs:
                if first_at is None:
                    first_at = time.perf_counter() - t0
                last_progress = now
            elif now - last_progress > stall_s:
                raise WorkloadError(f"no records for {stall_s:.0f}s "
                                    f"(got {got}/{expected})")
            if now > deadline:
                raise WorkloadError(f"timed out after {timeout_s:.0f}s "
                                    f"(got {got}/{expected})")
    except WorkloadError as e:
        failure = str(e)
    except KafkaException as e:
        failure = f"consumer failed: {e}"
    elapsed = time.perf_counter() - t0
    client_cpu = _cpu_s() - cpu0
    try:
        c.close()
    except Exception:
        pass
    metrics = {
        "records": got,
        "expected": expected,
        "bytes": nbytes,
        "elapsed_s": round(elapsed, 3),
        "first_record_s": round(first_at, 3) if first_at is not None else None,
        "records_per_s": round(got / elapsed, 1) if elapsed > 0 else None,
        # excluding the time to the first record (connect, ListOffsets, ...)
        "records_per_s_after_first": (
            round(got / (elapsed - first_at), 1)
            if first_at is not None and elapsed > first_at else None),
        "mb_per_s": round(nbytes / MB / elapsed, 2) if elapsed > 0 else None,
        "client_cpu_s": round(client_cpu, 2),
    }
    notes = []
    if msg_errors:
        notes.append("message errors: " + " | ".join(dict.fromkeys(msg_errors)))
    if failure is None and got > expected:
        notes.append(f"received {got - expected} more records than expected")
    if failure is not None:
        if msg_errors:
            failure += "; message errors: " + " | ".join(
                dict.fromkeys(msg_errors))
        if errs.items:
            failure += f". {errs.summary()}"
        return _result(False, failure, metrics, notes)
    return _result(True, None, metrics, notes)


# --------------------------------------------------------------------------
# workload 4: end-to-end latency at a fixed rate

_HDR = struct.Struct(">qq")  # seq (-1 = warm-up), send time (perf_counter_ns)


def _pct(sorted_vals: list[float], p: float) -> float:
    """Nearest-rank percentile."""
    if not sorted_vals:
        return float("nan")
    k = max(0, min(len(sorted_vals) - 1,
                   math.ceil(p / 100.0 * len(sorted_vals)) - 1))
    return sorted_vals[k]


def e2e_latency(bootstrap: str, topic: str, rate: int, duration_s: float,
                size: int, timeout_s: float,
                log_path: str | None = None) -> dict:
    errs = _ClientErrors()
    notes: list[str] = []
    _ensure_single_partition_topic(bootstrap, topic, errs, log_path, notes)

    count = int(rate * duration_s)
    lat_ns = [0] * count
    seen = bytearray(count)
    st = {"received": 0, "warm": 0, "dups": 0, "cerr": None}
    stop = threading.Event()
    hard_deadline = time.monotonic() + timeout_s

    cconf = _base(bootstrap, errs, log_path)
    cconf.update(ASSIGN_CONSUMER)
    cconf.update(LATENCY_CONSUMER_EXTRA)
    consumer = Consumer(cconf)

    def consume_loop():
        try:
            consumer.list_topics(topic=topic, timeout=10)  # see consume_throughput
            consumer.assign([TopicPartition(topic, 0, OFFSET_END)])
            while not stop.is_set() and time.monotonic() < hard_deadline:
                # poll() returns as soon as one record is there (consume()
                # would wait for a whole batch or the timeout)
                m = consumer.poll(0.05)
                now = time.perf_counter_ns()
                if m is not None:
                    if m.error() is not None:
                        e = m.error()
                        if st["cerr"] is None:
                            st["cerr"] = f"{e.name()}: {e.str()}"
                        continue
                    v = m.value()
                    if v is None or len(v) < _HDR.size:
                        continue
                    seq, sent = _HDR.unpack_from(v)
                    if seq < 0:
                        st["warm"] += 1
                    elif seq < count:
                        if seen[seq]:
                            st["dups"] += 1
                        else:
                            seen[seq] = 1
                            lat_ns[seq] = now - sent
                            st["received"] += 1
        except Exception as e:  # report, don't hang the producer side
            st["cerr"] = f"consumer thread: {type(e).__name__}: {e}"

    th = threading.Thread(target=consume_loop, daemon=True)
    th.start()

    pconf = _base(bootstrap, errs, log_path)
    pconf.update(LATENCY_PRODUCER)
    dr = {"ok": 0, "err": 0, "first_err": None}
    ack_ms: list[float] = []

    def on_delivery(err, msg):
        if err is None:
            dr["ok"] += 1
            lat = msg.latency()  # produce() -> delivery report, seconds
            if lat is not None and len(ack_ms) < count + 10_000:
                ack_ms.append(lat * 1e3)
        else:
            dr["err"] += 1
            dr["first_err"] = dr["first_err"] or f"{err.name()}: {err.str()}"

    pconf["on_delivery"] = on_delivery
    p = Producer(pconf)
    pad = b"\0" * max(0, size - _HDR.size)

    def fail(msg: str) -> dict:
        stop.set()
        th.join(timeout=5)
        p.purge()
        try:
            consumer.close()
        except Exception:
            pass
        if dr["first_err"]:
            msg += f"; first delivery error: {dr['first_err']}"
        if st["cerr"]:
            msg += f"; consumer error: {st['cerr']}"
        if errs.items:
            msg += f". {errs.summary()}"
        return _result(False, msg, {"sent": 0}, notes)

    # Warm-up: the consumer starts at the log end, so keep sending warm-up
    # records until one arrives -- this proves the consumer's position is
    # resolved and its fetch loop is running before the clock starts.
    warm_deadline = time.monotonic() + 30
    warm_sent = 0
    while st["warm"] == 0:
        if time.monotonic() > warm_deadline or warm_sent >= 600:
            return fail(f"warm-up: consumer received none of {warm_sent} "
                        f"warm-up records within 30s (assign at OFFSET_END)")
        p.produce(topic, _HDR.pack(-1, time.perf_counter_ns()) + pad)
        warm_sent += 1
        p.poll(0)
        time.sleep(0.05)
    # a little more warm-up at the target rate
    t_end = time.monotonic() + 0.5
    while time.monotonic() < t_end:
        p.produce(topic, _HDR.pack(-1, time.perf_counter_ns()) + pad)
        p.poll(1.0 / rate)

    interval_ns = int(1e9 / rate)
    late = 0
    max_lag_ns = 0
    cpu0 = _cpu_s()
    start_ns = time.perf_counter_ns()
    for seq in range(count):
        due = start_ns + seq * interval_ns
        now = time.perf_counter_ns()
        if now < due:
            time.sleep((due - now) / 1e9)
        else:
            late += 1
        sent = time.perf_counter_ns()
        max_lag_ns = max(max_lag_ns, sent - due)
        try:
            p.produce(topic, _HDR.pack(seq, sent) + pad)
        except BufferError:
            return fail(f"producer queue full at seq {seq}")
        p.poll(0)
        if time.monotonic() > hard_deadline:
            return fail(f"timed out after {timeout_s:.0f}s while sending")
    send_elapsed = (time.perf_counter_ns() - start_ns) / 1e9
    p.flush(min(10.0, max(0.1, hard_deadline - time.monotonic())))
    grace = time.monotonic() + 5
    while st["received"] < count and time.monotonic() < min(grace,
                                                           hard_deadline):
        time.sleep(0.05)
    stop.set()
    th.join(timeout=5)
    client_cpu = _cpu_s() - cpu0
    try:
        consumer.close()
    except Exception:
        pass

    vals = sorted(lat_ns[i] / 1e6 for i in range(count) if seen[i])
    n = len(vals)
    acks_sorted = sorted(ack_ms[-count:])
    # drift check: median latency of the records sent in each second
    p50_per_s = []
    for lo in range(0, count, rate):
        sec = sorted(lat_ns[i] / 1e6 for i in range(lo, min(count, lo + rate))
                     if seen[i])
        p50_per_s.append(round(_pct(sec, 50), 2) if sec else None)
    metrics = {
        "target_rate": rate,
        "duration_s": duration_s,
        "record_bytes": size,
        "sent": count,
        "delivered_acks": dr["ok"],
        "received": n,
        "lost": count - n,
        "duplicates": st["dups"],
        "achieved_send_rate": round(count / send_elapsed, 1),
        "late_sends": late,
        "max_send_lag_ms": round(max_lag_ns / 1e6, 3),
        "p50_ms": round(_pct(vals, 50), 3) if n else None,
        "p90_ms": round(_pct(vals, 90), 3) if n else None,
        "p99_ms": round(_pct(vals, 99), 3) if n else None,
        "p99_9_ms": round(_pct(vals, 99.9), 3) if n else None,
        "max_ms": round(vals[-1], 3) if n else None,
        "mean_ms": round(sum(vals) / n, 3) if n else None,
        # produce -> delivery report (acks=1) for the same records: the
        # produce half of the end-to-end figure
        "ack_p50_ms": round(_pct(acks_sorted, 50), 3) if acks_sorted else None,
        "ack_p99_ms": round(_pct(acks_sorted, 99), 3) if acks_sorted else None,
        "client_cpu_s": round(client_cpu, 2),
        "p50_ms_each_second": p50_per_s,
    }
    if n == 0:
        return fail("no timed records received")
    if count - n > 0:
        notes.append(f"{count - n} of {count} timed records not received "
                     f"within 5s after the last send")
    if dr["err"]:
        notes.append(f"{dr['err']} delivery errors; first: {dr['first_err']}")
    if st["cerr"]:
        notes.append(f"consumer error: {st['cerr']}")
    ok = n >= 0.99 * count and dr["err"] == 0
    err = None if ok else f"only {n}/{count} timed records received"
    if not ok and errs.items:
        err += f". {errs.summary()}"
    return _result(ok, err, metrics, notes)
