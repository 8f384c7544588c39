"""Applying a schedule's faults to a ``FaultCluster``: resolve the target, inject, heal, recover.

    injector = Injector(env, sampler, history, topic="data", partitions=3)
    injector.run(fault)          # inject, wait fault.duration_s, heal, wait for recovery

A fault's ``role`` is resolved when it starts, from a live broker's Metadata
for ``topic``: the leader or a follower of partition ``pick % partitions``,
the controller, or any broker (``pick % brokers``).  After the heal the
injector waits (``RECOVERY_S`` at most) until every watched partition has a
live leader and a full ISR and records a ``Recovery``; once the cluster has
settled (``settle_s`` after the heal, every ISR full again) it opens a
fault-free window, which ``quiet()`` keeps for a while and the next fault
closes.

A broker that cannot be restarted makes ``run`` raise ``ScheduleAborted``: the
runner stops injecting, heals what it can and checks the history.  A disk
filled while the tmpfs could not be mounted is skipped, with the reason.
"""
from __future__ import annotations

import os
import signal
import time

from kwire.testing.process import BrokerStartError
from kwire.testing.zookeeper import ZooKeeperStartError

from .environment import FaultCluster
from .history import History, Recovery
from .nemesis import Fault, Timeouts
from .replicas import partition_bytes
from .observe import IsrSampler

__all__ = ["Injector", "ScheduleAborted"]

RECOVERY_S = 30.0                     # a heal's bound for leaders and full ISRs
RESTART_S = 60.0


class ScheduleAborted(Exception):
    """The cluster cannot be brought back (a broker does not restart); the message says why."""


class Injector:
    def __init__(self, env: FaultCluster, sampler: IsrSampler, history: History, *, topic: str, partitions: int,
                 timeouts: Timeouts = Timeouts()):
        self.env, self.sampler, self.history = env, sampler, history
        self.settle_s = 1.5 * timeouts.lag_ms / 1000 + 0.5      # a lag, plus the leader's check interval
        self.topic, self.partitions = topic, partitions
        self.injected: list[str] = []      # labels, in order
        self.skipped: list[str] = []
        self.targets: list[str] = []        # "label -> broker N" lines for the report
        self.window_open: float | None = None     # opened by a recovery, closed by a fault

    @property
    def cluster(self):
        return self.env.cluster

    # -- windows -------------------------------------------------------------------
    def close_window(self) -> None:
        if self.window_open is not None:
            self.history.windows.append((self.window_open, time.monotonic()))
            self.window_open = None

    # -- one fault -----------------------------------------------------------------
    def run(self, fault: Fault) -> None:
        """Inject ``fault``, hold it for its duration, heal it and wait for recovery.
        Raises ``ScheduleAborted``."""
        if fault.kind == "disk-full" and self.env.disk_error:
            self.skipped.append(f"{fault.label}: {self.env.disk_error}")
            return
        target = self.resolve(fault)
        self.close_window()
        self.injected.append(fault.label)
        self.targets.append(f"t={time.monotonic() - self.history.t0:.1f}s {fault.describe()} -> "
                            f"{'zookeeper' if target is None else f'broker {target}'}")
        heal = self.inject(fault, target)
        time.sleep(fault.duration_s)
        heal()
        self.recover(fault.label, time.monotonic())

    def resolve(self, fault: Fault) -> int | None:
        """The broker ``fault`` hits now (None for ZooKeeper)."""
        if fault.role == "zookeeper":
            return None
        ids = sorted(self.cluster.brokers)
        try:
            snapshot = self.cluster.metadata(timeout=2)
        except OSError:
            return ids[fault.pick % len(ids)]
        state = snapshot["topics"].get(self.topic, {}).get(fault.pick % self.partitions)
        if fault.role == "controller" and snapshot["controller_id"] in ids:
            return snapshot["controller_id"]
        if state and fault.role == "leader" and state["leader"] in ids:
            return state["leader"]
        if state and fault.role == "follower":
            followers = sorted(r for r in state["replicas"] if r != state["leader"])
            if followers:
                return followers[(fault.pick // self.partitions) % len(followers)]
        return ids[fault.pick % len(ids)]

    def inject(self, fault: Fault, target: int | None):
        """Start ``fault`` on ``target``; returns the function that heals it."""
        cluster, env = self.cluster, self.env
        if fault.kind == "kill":
            cluster.kill(target)
            return lambda: self.restart(target)
        if fault.kind == "term-kill":
            self.term_kill(target, fault.kill_delay_s)
            return lambda: self.restart(target)
        if fault.kind == "pause":
            cluster.pause(target)
            return lambda: cluster.resume(target)
        if fault.kind == "partition":
            env.cut(target, fault.links, fault.variant)
            return env.heal_network
        if fault.kind == "zookeeper":
            (cluster.zookeeper.kill if fault.variant == "kill" else cluster.zookeeper.stop)()
            return self.restart_zookeeper
        if fault.kind == "disk-full":
            env.fill_disk(target)
            return lambda: self.free_disk(target)
        if fault.kind == "move":
            victim = self.move(fault, target)
            cluster.kill(victim)

            def heal() -> None:
                self.restart(victim)
                self.throttle(None, None)      # with every broker up: the tool may ask any
            return heal
        raise ValueError(f"unknown fault kind {fault.kind!r}")

    def move(self, fault: Fault, mover: int) -> int:
        """Reassign partition ``pick % partitions`` without ``mover`` (a stock admin client's
        AlterPartitionReassignments), wait until that completes (its copy is deleted), then
        reassign it back with ``mover`` last, whose copy now starts empty: returns the broker
        to kill while it copies (the variant's victim).  Anything refused is noted and the
        mover is killed instead."""
        from kafka import TopicPartition
        from kafka.admin import KafkaAdminClient
        p = fault.pick % self.partitions
        tp = TopicPartition(self.topic, p)
        try:
            state = self.cluster.metadata(timeout=5)["topics"][self.topic][p]
            replicas = list(state["replicas"])
            rest = [r for r in replicas if r != mover]
            admin = KafkaAdminClient(bootstrap_servers=self.env.bootstrap, request_timeout_ms=10000)
            try:
                refused = admin.alter_partition_reassignments({tp: rest})[tp]
                if refused is not None:
                    raise RuntimeError(f"reassigning {tp} to {rest}: {refused.__name__}")
                deadline = time.monotonic() + 20
                while admin.list_partition_reassignments([tp]):
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"the move of {self.topic}-{p} to {rest} did not complete in 20 s")
                    time.sleep(0.05)
                # throttled to about a quarter of the partition per second, so the kill lands mid-copy
                size = max(len(partition_bytes(d, self.topic, p)) for d in self.env.log_dirs().values())
                self.throttle(f"{p}:{mover}", max(size // 4, 20_000))
                refused = admin.alter_partition_reassignments({tp: rest + [mover]})[tp]
                if refused is not None:
                    raise RuntimeError(f"reassigning {tp} back to {rest + [mover]}: {refused.__name__}")
                snapshot = self.cluster.metadata(timeout=5)
                copying = bool(admin.list_partition_reassignments([tp]))
            finally:
                admin.close()
        except Exception as exc:            # noqa: BLE001  (the fault still happens: the mover dies)
            self.history.notes.append(f"{fault.label}: {exc!r}; killing broker {mover}")
            return mover
        ids = set(self.cluster.brokers)
        victim = {"leader": snapshot["topics"][self.topic][p]["leader"], "joining": mover,
                  "controller": snapshot["controller_id"]}[fault.variant]
        victim = victim if victim in ids else mover
        self.history.notes.append(f"{fault.label}: {self.topic}-{p} moved to {rest}, then back to "
                                  f"{rest + [mover]}; broker {victim} killed "
                                  f"{'during the copy' if copying else 'after the copy had completed'}")
        return victim

    def throttle(self, replicas: str | None, rate: int | None) -> None:
        """Set (or with None, remove) the brokers' default follower.replication.throttled.rate
        and the data topic's follower.replication.throttled.replicas, with ``kwire configs``."""
        import contextlib
        import io
        from kwire.tools.configs import main as configs
        bootstrap = ["--bootstrap-server", self.env.bootstrap]
        if rate is None:
            steps = [["--entity-type", "brokers", "--entity-default", "--delete-config",
                      "follower.replication.throttled.rate"],
                     ["--topic", self.topic, "--delete-config", "follower.replication.throttled.replicas"]]
        else:
            steps = [["--entity-type", "brokers", "--entity-default", "--add-config",
                      f"follower.replication.throttled.rate={rate}"],
                     ["--topic", self.topic, "--add-config", f"follower.replication.throttled.replicas={replicas}"]]
        for step in steps:
            for _ in range(3):
                out = io.StringIO()
                with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
                    code = configs(["alter", *bootstrap, *step])
                if not code:
                    break
                time.sleep(0.5)
            if code:
                self.history.notes.append(f"kwire configs alter {' '.join(step)}: exit {code}: {out.getvalue()[-300:]}")

    def term_kill(self, target: int, delay_s: float) -> None:
        """SIGTERM (a controlled shutdown starts), then SIGKILL ``delay_s`` later if still running."""
        broker = self.cluster.broker(target)
        os.kill(broker.pid, signal.SIGTERM)
        time.sleep(delay_s)
        if broker.alive():
            broker.kill()
        else:
            self.history.notes.append(f"broker {target} exited within {delay_s * 1000:.0f} ms of SIGTERM")

    def restart(self, target: int) -> None:
        """Start broker ``target`` again.  A start that fails is a violation (``restart-failed``)
        and is retried once, as a supervisor would; a second failure raises ``ScheduleAborted``."""
        for attempt in (1, 2):
            try:
                self.cluster.start_broker(target, timeout=RESTART_S)
                return
            except BrokerStartError as exc:
                why = crash_reason(str(exc))
                if attempt == 2:
                    raise ScheduleAborted(f"broker {target} did not restart twice; last: {why}") from None
                self.history.incidents.append((
                    "restart-failed", f"broker {target} failed to start at "
                                      f"t={time.monotonic() - self.history.t0:.1f}s: {why}"))

    def restart_zookeeper(self) -> None:
        try:
            self.cluster.zookeeper.start(30)
        except ZooKeeperStartError as exc:
            raise ScheduleAborted(f"ZooKeeper did not restart: {exc}") from None

    def free_disk(self, target: int) -> None:
        """Delete the filler.  Partitions that went offline on the full disk stay offline until the
        broker restarts (Kafka's rule for a failed log dir): restart it as an operator would."""
        self.env.free_disk(target)
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            offline = self.offline_on(target)
            if not offline:
                return
            time.sleep(0.5)
        self.history.notes.append(f"broker {target}: {offline} offline after its disk was freed; restarted")
        self.cluster.stop(target, timeout=15)
        self.restart(target)

    def offline_on(self, broker: int) -> list[str]:
        try:
            snapshot = self.cluster.metadata(self.cluster.observed_address(broker), timeout=2)
        except OSError:
            return []
        return [f"{t}-{p}" for t, parts in snapshot["topics"].items() for p, s in parts.items()
                if broker in s["offline_replicas"]]

    # -- recovery ------------------------------------------------------------------
    def recover(self, label: str, healed_at: float, bound_s: float = RECOVERY_S, settle: bool = True) -> Recovery:
        """Wait until every watched partition has a live leader and a full ISR (in a sample taken
        after the heal) and record the ``Recovery``.  Then let the cluster settle: a follower that
        fell behind during the fault may still be dropped by its leader's next ISR check
        (replica.lag.time.max.ms after it last caught up), so the fault-free window opens only
        ``settle_s`` after the heal (unless ``settle`` is false: nothing was faulted), once
        every ISR is full again."""
        self.close_window()
        leader_at, isr_at = self._wait_healthy(healed_at, healed_at + bound_s)
        recovery = Recovery(label, healed_at, leader_at, isr_at)
        self.history.recoveries.append(recovery)
        if isr_at is not None:
            if settle:
                time.sleep(max(0.0, healed_at + self.settle_s - time.monotonic()))
                _, isr_at = self._wait_healthy(time.monotonic(), time.monotonic() + bound_s)
            self.window_open = isr_at
        return recovery

    def _wait_healthy(self, after: float, deadline: float) -> tuple[float | None, float | None]:
        """Times of the first samples (taken after ``after``) where every partition has a live
        leader, and where besides every ISR is full; None for what was not seen by ``deadline``."""
        leader_at = None
        while time.monotonic() < deadline:
            sample = self.sampler.latest
            if sample is not None and sample.at > after and sample.states:
                live = set(self.cluster.live_ids())
                replication = self.sampler.replication_of()
                led = all(leader in live for leader, _ in sample.states.values())
                if led and leader_at is None:
                    leader_at = sample.at
                if led and all(len(isr) >= replication.get(tp, 0) for tp, (_, isr) in sample.states.items()):
                    return leader_at, sample.at
            time.sleep(0.05)
        return leader_at, None

    def quiet(self, seconds: float) -> None:
        """Fault-free time: ``seconds`` counted from the opening of the window."""
        start = self.window_open if self.window_open is not None else time.monotonic()
        time.sleep(max(0.0, start + seconds - time.monotonic()))

    def heal_all(self) -> list[str]:
        """Undo whatever may still be in effect (network, pauses, ZooKeeper, disks, dead brokers);
        returns what had to be undone.  Raises ``ScheduleAborted``."""
        undone = [f"network of {p.address}" for p in [*self.env.proxies.values(), *self.env.zk_proxies.values()]
                  if p.partitioned or p.refusing]
        self.env.heal_network()
        for i in self.cluster.brokers:
            if i not in self.cluster.live_ids() and self.cluster.broker(i).alive():
                undone.append(f"pause of broker {i}")
            self.cluster.resume(i)
            self.env.free_disk(i)
        if not self.cluster.zookeeper.alive():
            undone.append("zookeeper down")
            self.restart_zookeeper()
        for i, b in self.cluster.brokers.items():
            if not b.alive():
                undone.append(f"broker {i} down")
                self.restart(i)
        return undone


def crash_reason(text: str) -> str:
    """The gist of a start failure: the broker's own innermost frame, its code line and the
    exception of the log tail's traceback, else the text's first line."""
    lines = [line.strip(" |") for line in text.splitlines()]
    errors = [n for n, line in enumerate(lines) if line.split(":")[0].endswith(("Error", "Exception", "InUse"))]
    if not errors:
        return lines[0] if lines else "no output"
    last = errors[-1]
    own = [n for n in range(last) if lines[n].startswith("File ") and "site-packages" not in lines[n]
           and "/lib/python" not in lines[n]]
    where = f"{lines[own[-1]]}: {lines[own[-1] + 1]}: " if own and own[-1] + 1 < last else ""
    return where + lines[last]
