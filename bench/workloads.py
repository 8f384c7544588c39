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


class _Deliveries:
    """Delivery reports of the throughput producer: counts and the first error."""

    def __init__(self):
        self.ok = 0
        self.err = 0
        self.first_err: str | None = None

    def on_delivery(self, err, _msg) -> None:
        if err is None:
            self.ok += 1
        else:
            self.err += 1
            if self.first_err is None:
                self.first_err = f"{err.name()}: {err.str()}"


class _StallWatch:
    """Notices when no delivery report has arrived for ``stall_s`` seconds."""

    def __init__(self, stall_s: float):
        self.stall_s = stall_s
        self.last_done = 0
        self.last_change = time.monotonic()

    def stalled(self, done: int) -> bool:
        now = time.monotonic()
        if done != self.last_done:
            self.last_done, self.last_change = done, now
            return False
        return (now - self.last_change) > self.stall_s


def _prepare_produce_topic(bootstrap, topic, partitions, create, errs,
                           log_path, notes) -> None:
    """create="required": CreateTopics must work; otherwise auto-creation may stand in."""
    if create == "required":
        create_topic(bootstrap, topic, partitions, errs, log_path)
    elif create == "existing":
        return
    else:
        _ensure_single_partition_topic(bootstrap, topic, errs, log_path, notes)


def _send_all(p: Producer, topic: str, payload: bytes | list[bytes], count: int,
              dr: _Deliveries, watch: _StallWatch, deadline: float,
              timeout_s: float) -> int:
    """produce() ``count`` records (``payload``, or the values of a list in
    turn), serving delivery reports whenever the local queue is full; returns
    how many were handed to librdkafka.  Raises WorkloadError on a stall, the
    deadline or all-failing deliveries."""
    produced = 0
    payloads = [payload] if isinstance(payload, bytes) else payload
    for i in range(count):
        while True:
            try:
                p.produce(topic, payloads[i % len(payloads)])
                break
            except BufferError:
                # local queue full: serve delivery reports and retry
                p.poll(0.01)
                if watch.stalled(dr.ok + dr.err):
                    raise WorkloadError(
                        f"no delivery progress for {watch.stall_s:.0f}s "
                        f"(queue full)")
                if time.monotonic() > deadline:
                    raise WorkloadError(f"timed out after {timeout_s:.0f}s "
                                        f"while producing")
        produced += 1
        if (i & 1023) == 0:
            p.poll(0)
            if dr.err and dr.ok == 0 and dr.err > 1000:
                raise WorkloadError("every delivery so far failed")
    return produced


def _await_deliveries(p: Producer, produced: int, dr: _Deliveries,
                      watch: _StallWatch, deadline: float,
                      timeout_s: float) -> None:
    """Serve delivery reports until every produced record has one; raises WorkloadError."""
    while dr.ok + dr.err < produced:
        p.poll(0.05)
        if watch.stalled(dr.ok + dr.err):
            raise WorkloadError(f"no delivery progress for "
                                f"{watch.stall_s:.0f}s")
        if time.monotonic() > deadline:
            raise WorkloadError(f"timed out after {timeout_s:.0f}s waiting "
                                f"for delivery reports")


def _produce_metrics(count, size, acks, partitions, dr: _Deliveries,
                     elapsed, client_cpu) -> dict:
    ok = dr.ok
    return {
        "records": count,
        "record_bytes": size,
        "acks": acks,
        "partitions": partitions,
        "delivered": ok,
        "delivery_errors": dr.err,
        "elapsed_s": round(elapsed, 3),
        "records_per_s": round(ok / elapsed, 1) if elapsed > 0 else None,
        "mb_per_s": round(ok * size / MB / elapsed, 2) if elapsed > 0 else None,
        "client_cpu_s": round(client_cpu, 2),
    }


def _produce_failure(failure: str | None, dr: _Deliveries, count: int,
                     errs: _ClientErrors) -> str | None:
    """The run's error text (None when it succeeded), with the first causes."""
    if failure is None and dr.err:
        failure = (f"{dr.err} of {count} deliveries failed; first: "
                   f"{dr.first_err}")
    if failure is not None:
        if dr.first_err and dr.first_err not in failure:
            failure += f"; first delivery error: {dr.first_err}"
        if errs.items:
            failure += f". {errs.summary()}"
    return failure


def produce_throughput(bootstrap: str, topic: str, count: int, size: int,
                       acks, partitions: int, timeout_s: float,
                       stall_s: float = 60.0, create: str = "required",
                       log_path: str | None = None,
                       payload: bytes | list[bytes] | None = None) -> dict:
    """Produce ``count`` records of ``size`` bytes (``payload`` when given: the same
    bytes every time, e.g. a Confluent-framed Avro record, or a list of values sent
    in turn; random otherwise); the
    clock runs from the first produce() until every delivery report has come back.
    ``create="existing"``: the caller made the topic (with its configs)."""
    errs = _ClientErrors()
    notes: list[str] = []
    try:
        _prepare_produce_topic(bootstrap, topic, partitions, create, errs,
                               log_path, notes)
    except WorkloadError as e:
        return _result(False, str(e), notes=notes)

    dr = _Deliveries()
    conf = _base(bootstrap, errs, log_path)
    conf.update(THROUGHPUT_PRODUCER)
    conf["acks"] = acks
    conf["on_delivery"] = dr.on_delivery
    p = Producer(conf)
    payload = os.urandom(size) if payload is None else payload
    cpu0 = _cpu_s()
    t0 = time.perf_counter()
    deadline = time.monotonic() + timeout_s
    watch = _StallWatch(stall_s)
    failure = None
    try:
        produced = _send_all(p, topic, payload, count, dr, watch, deadline,
                             timeout_s)
        _await_deliveries(p, produced, dr, watch, deadline, timeout_s)
    except WorkloadError as e:
        failure = str(e)
    elapsed = time.perf_counter() - t0
    client_cpu = _cpu_s() - cpu0
    if len(p):
        p.purge()
        p.poll(0.5)

    metrics = _produce_metrics(count, size, acks, partitions, dr, elapsed,
                               client_cpu)
    if create == "fallback-auto":
        n = _partition_count(bootstrap, topic, errs, log_path)
        metrics["partitions_observed"] = n
        if n is not None and n != partitions:
            notes.append(f"topic has {n} partitions, expected {partitions}")
    failure = _produce_failure(failure, dr, count, errs)
    return _result(failure is None, failure, metrics, notes)


# --------------------------------------------------------------------------
# workload 3: consume throughput (assign mode, no group)


class _ConsumeProgress:
    """What the consume loop has seen so far (kept when it fails midway)."""

    def __init__(self):
        self.got = 0
        self.nbytes = 0
        self.first_at: float | None = None
        self.msg_errors: list[str] = []


def _learn_leader(c: Consumer, topic: str, prog: _ConsumeProgress) -> None:
    # Learn the partition leader first: if assign() runs before the
    # consumer has metadata, librdkafka parks the offset lookup on a
    # ~500 ms retry timer, which would dominate a short measurement.
    try:
        c.list_topics(topic=topic, timeout=10)
    except KafkaException as e:
        prog.msg_errors.append(f"metadata before assign failed: {e}")


def _consume_expected(c: Consumer, topic: str, partitions: int,
                      expected: int, prog: _ConsumeProgress, t0: float,
                      deadline: float, stall_s: float,
                      timeout_s: float) -> None:
    """assign() from the beginning and consume until ``expected`` records;
    raises WorkloadError (stall, deadline, fatal error) or KafkaException."""
    got, nbytes, first_at = prog.got, prog.nbytes, prog.first_at
    msg_errors = prog.msg_errors
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
    finally:
        prog.got, prog.nbytes, prog.first_at = got, nbytes, first_at


def _consume_metrics(prog: _ConsumeProgress, expected: int, elapsed: float,
                     client_cpu: float) -> dict:
    got, first_at = prog.got, prog.first_at
    return {
        "records": got,
        "expected": expected,
        "bytes": prog.nbytes,
        "elapsed_s": round(elapsed, 3),
        "first_record_s": round(first_at, 3) if first_at is not None else None,
        "records_per_s": round(got / elapsed, 1) if elapsed > 0 else None,
        # excluding the time to the first record (connect, ListOffsets, ...)
        "records_per_s_after_first": (
            round(got / (elapsed - first_at), 1)
            if first_at is not None and elapsed > first_at else None),
        "mb_per_s": round(prog.nbytes / MB / elapsed, 2) if elapsed > 0 else None,
        "client_cpu_s": round(client_cpu, 2),
    }


def _consume_result(failure: str | None, prog: _ConsumeProgress,
                    expected: int, metrics: dict, errs: _ClientErrors) -> dict:
    notes = []
    msg_errors = prog.msg_errors
    if msg_errors:
        notes.append("message errors: " + " | ".join(dict.fromkeys(msg_errors)))
    if failure is None and prog.got > expected:
        notes.append(f"received {prog.got - expected} more records than expected")
    if failure is not None:
        if msg_errors:
            failure += "; message errors: " + " | ".join(
                dict.fromkeys(msg_errors))
        if errs.items:
            failure += f". {errs.summary()}"
        return _result(False, failure, metrics, notes)
    return _result(True, None, metrics, notes)


def consume_throughput(bootstrap: str, topic: str, expected: int,
                       partitions: int, timeout_s: float,
                       stall_s: float = 60.0,
                       log_path: str | None = None) -> dict:
    """Consume ``expected`` records from the beginning with assign(); the
    clock runs from assign() until the last one arrived."""
    errs = _ClientErrors()
    conf = _base(bootstrap, errs, log_path)
    conf.update(ASSIGN_CONSUMER)
    c = Consumer(conf)
    prog = _ConsumeProgress()
    failure = None
    _learn_leader(c, topic, prog)
    cpu0 = _cpu_s()
    t0 = time.perf_counter()
    deadline = time.monotonic() + timeout_s
    try:
        _consume_expected(c, topic, partitions, expected, prog, t0, deadline,
                          stall_s, timeout_s)
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
    metrics = _consume_metrics(prog, expected, elapsed, client_cpu)
    return _consume_result(failure, prog, expected, metrics, errs)


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


class _LatencyConsumer:
    """Reads the timed records on a thread of its own, from the log end:
    latency per sequence number (poll() return minus send time), warm-up
    records, duplicates, the first error."""

    def __init__(self, conf: dict, topic: str, count: int,
                 hard_deadline: float):
        self.consumer = Consumer(conf)
        self.topic = topic
        self.count = count
        self.hard_deadline = hard_deadline
        self.lat_ns = [0] * count
        self.seen = bytearray(count)
        self.received = 0
        self.warm = 0
        self.dups = 0
        self.error: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        try:
            self._loop()
        except Exception as e:  # report, don't hang the producer side
            self.error = f"consumer thread: {type(e).__name__}: {e}"

    def _loop(self) -> None:
        consumer, count = self.consumer, self.count
        lat_ns, seen = self.lat_ns, self.seen
        consumer.list_topics(topic=self.topic, timeout=10)  # see consume_throughput
        consumer.assign([TopicPartition(self.topic, 0, OFFSET_END)])
        while not self._stop.is_set() and time.monotonic() < self.hard_deadline:
            # poll() returns as soon as one record is there (consume()
            # would wait for a whole batch or the timeout)
            m = consumer.poll(0.05)
            now = time.perf_counter_ns()
            if m is None:
                continue
            if m.error() is not None:
                e = m.error()
                if self.error is None:
                    self.error = f"{e.name()}: {e.str()}"
                continue
            v = m.value()
            if v is None or len(v) < _HDR.size:
                continue
            seq, sent = _HDR.unpack_from(v)
            if seq < 0:
                self.warm += 1
            elif seq < count:
                if seen[seq]:
                    self.dups += 1
                else:
                    seen[seq] = 1
                    lat_ns[seq] = now - sent
                    self.received += 1

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def close(self) -> None:
        try:
            self.consumer.close()
        except Exception:
            pass

    def latencies_ms(self, lo: int = 0, hi: int | None = None) -> list[float]:
        """Sorted latencies of the received records with lo <= seq < hi."""
        hi = self.count if hi is None else hi
        return sorted(self.lat_ns[i] / 1e6 for i in range(lo, hi) if self.seen[i])


class _Acks:
    """Delivery reports of the latency producer, with produce->ack times."""

    def __init__(self, count: int):
        self.ok = 0
        self.err = 0
        self.first_err: str | None = None
        self.ack_ms: list[float] = []
        self._keep = count + 10_000

    def on_delivery(self, err, msg) -> None:
        if err is None:
            self.ok += 1
            lat = msg.latency()  # produce() -> delivery report, seconds
            if lat is not None and len(self.ack_ms) < self._keep:
                self.ack_ms.append(lat * 1e3)
        else:
            self.err += 1
            self.first_err = self.first_err or f"{err.name()}: {err.str()}"


def _warm_up(p: Producer, topic: str, pad: bytes, rate: int,
             cons: _LatencyConsumer) -> None:
    """Send warm-up records until the consumer (at the log end) sees one,
    then 0.5 s more at the target rate.  Raises WorkloadError after 30 s."""
    # this proves the consumer's position is resolved and its fetch loop is
    # running before the clock starts
    warm_deadline = time.monotonic() + 30
    warm_sent = 0
    while cons.warm == 0:
        if time.monotonic() > warm_deadline or warm_sent >= 600:
            raise WorkloadError(f"warm-up: consumer received none of "
                                f"{warm_sent} warm-up records within 30s "
                                f"(assign at OFFSET_END)")
        p.produce(topic, _HDR.pack(-1, time.perf_counter_ns()) + pad)
        warm_sent += 1
        p.poll(0)
        time.sleep(0.05)
    t_end = time.monotonic() + 0.5
    while time.monotonic() < t_end:
        p.produce(topic, _HDR.pack(-1, time.perf_counter_ns()) + pad)
        p.poll(1.0 / rate)


def _send_timed(p: Producer, topic: str, pad: bytes, count: int, rate: int,
                hard_deadline: float, timeout_s: float) -> dict:
    """Send records 0..count-1 on a fixed schedule, each stamped with its send
    time; returns the schedule's figures.  Raises WorkloadError."""
    interval_ns = int(1e9 / rate)
    late = 0
    max_lag_ns = 0
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
            raise WorkloadError(f"producer queue full at seq {seq}") from None
        p.poll(0)
        if time.monotonic() > hard_deadline:
            raise WorkloadError(f"timed out after {timeout_s:.0f}s while sending")
    return {"send_elapsed": (time.perf_counter_ns() - start_ns) / 1e9,
            "late": late, "max_lag_ns": max_lag_ns}


def _await_timed(p: Producer, cons: _LatencyConsumer, count: int,
                 hard_deadline: float) -> None:
    """Flush, then give the consumer up to 5 s to see every timed record."""
    p.flush(min(10.0, max(0.1, hard_deadline - time.monotonic())))
    grace = time.monotonic() + 5
    while cons.received < count and time.monotonic() < min(grace,
                                                             hard_deadline):
        time.sleep(0.05)


def _latency_metrics(cons: _LatencyConsumer, acks: _Acks, rate: int,
                     duration_s: float, size: int, sending: dict,
                     client_cpu: float) -> dict:
    count = cons.count
    vals = cons.latencies_ms()
    n = len(vals)
    acks_sorted = sorted(acks.ack_ms[-count:])
    # drift check: median latency of the records sent in each second
    p50_per_s = []
    for lo in range(0, count, rate):
        sec = cons.latencies_ms(lo, min(count, lo + rate))
        p50_per_s.append(round(_pct(sec, 50), 2) if sec else None)
    return {
        "target_rate": rate,
        "duration_s": duration_s,
        "record_bytes": size,
        "sent": count,
        "delivered_acks": acks.ok,
        "received": n,
        "lost": count - n,
        "duplicates": cons.dups,
        "achieved_send_rate": round(count / sending["send_elapsed"], 1),
        "late_sends": sending["late"],
        "max_send_lag_ms": round(sending["max_lag_ns"] / 1e6, 3),
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


def _latency_failure(msg: str, cons: _LatencyConsumer, p: Producer,
                     acks: _Acks, errs: _ClientErrors, notes: list) -> dict:
    """Stop everything and report ``msg`` with the first causes."""
    cons.stop()
    p.purge()
    cons.close()
    if acks.first_err:
        msg += f"; first delivery error: {acks.first_err}"
    if cons.error:
        msg += f"; consumer error: {cons.error}"
    if errs.items:
        msg += f". {errs.summary()}"
    return _result(False, msg, {"sent": 0}, notes)


def _latency_result(metrics: dict, cons: _LatencyConsumer, acks: _Acks,
                    errs: _ClientErrors, notes: list) -> dict:
    count, n = cons.count, metrics["received"]
    if count - n > 0:
        notes.append(f"{count - n} of {count} timed records not received "
                     f"within 5s after the last send")
    if acks.err:
        notes.append(f"{acks.err} delivery errors; first: {acks.first_err}")
    if cons.error:
        notes.append(f"consumer error: {cons.error}")
    ok = n >= 0.99 * count and acks.err == 0
    err = None if ok else f"only {n}/{count} timed records received"
    if not ok and errs.items:
        err += f". {errs.summary()}"
    return _result(ok, err, metrics, notes)


def e2e_latency(bootstrap: str, topic: str, rate: int, duration_s: float,
                size: int, timeout_s: float,
                log_path: str | None = None) -> dict:
    """``rate`` records/s for ``duration_s`` to one partition, read by an
    assign()ed consumer from the log end; latency is send time to poll()."""
    errs = _ClientErrors()
    notes: list[str] = []
    _ensure_single_partition_topic(bootstrap, topic, errs, log_path, notes)

    count = int(rate * duration_s)
    hard_deadline = time.monotonic() + timeout_s
    cconf = _base(bootstrap, errs, log_path)
    cconf.update(ASSIGN_CONSUMER)
    cconf.update(LATENCY_CONSUMER_EXTRA)
    cons = _LatencyConsumer(cconf, topic, count, hard_deadline)
    cons.start()

    acks = _Acks(count)
    pconf = _base(bootstrap, errs, log_path)
    pconf.update(LATENCY_PRODUCER)
    pconf["on_delivery"] = acks.on_delivery
    p = Producer(pconf)
    pad = b"\0" * max(0, size - _HDR.size)
    try:
        _warm_up(p, topic, pad, rate, cons)
        cpu0 = _cpu_s()
        sending = _send_timed(p, topic, pad, count, rate, hard_deadline,
                              timeout_s)
    except WorkloadError as e:
        return _latency_failure(str(e), cons, p, acks, errs, notes)
    _await_timed(p, cons, count, hard_deadline)
    cons.stop()
    client_cpu = _cpu_s() - cpu0
    cons.close()

    metrics = _latency_metrics(cons, acks, rate, duration_s, size, sending,
                               client_cpu)
    if metrics["received"] == 0:
        return _latency_failure("no timed records received", cons, p, acks,
                                errs, notes)
    return _latency_result(metrics, cons, acks, errs, notes)
