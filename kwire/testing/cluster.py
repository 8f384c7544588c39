"""A kwire cluster as real processes: ZooKeeper and N ``kwire serve`` brokers on loopback.

    from kwire.testing.cluster import ClusterProcess

    with ClusterProcess(3) as cluster:              # started, and every broker in Metadata
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
        ...
        leader = cluster.metadata()["topics"]["orders"][0]["leader"]
        cluster.kill(leader)                         # kill -9
        cluster.wait_for(lambda: cluster.metadata()["topics"]["orders"][0]["leader"] != leader,
                         30, "a new leader")
        cluster.start_broker(leader)                 # same port, same data

Broker ``i`` (1..N) is a ``BrokerProcess`` with ``broker.id=i``, its own free
port and ``<data_dir>/broker-<i>`` (``logs/`` and ``broker.log``);
ZooKeeper is a ``ZooKeeperProcess`` in ``<data_dir>/zookeeper`` unless one is
passed in (it is then started if needed and left running by ``close()``).
Properties are Kafka keys and apply to every broker; ``TEST_DEFAULTS`` differ
from a production broker only where tests want them to.  One broker's
properties can be changed between runs through ``cluster.broker(i).properties``
(they are read when the process starts), e.g. to route its
``zookeeper.connect`` through ``tests/support/proxy.py``'s ``TcpProxy``.

``metadata()`` asks one live broker with a Metadata v9 request over a plain
socket (kafka-python's codec), so a test chooses whom it asks and is never
stuck behind a client's retries against a paused or killed broker.

Secured clusters: ``listeners={"CLIENT": "SASL_SSL", "INTERNAL": "SSL"}`` gives
every broker those listeners, each on a port of its own (``bootstrap_for(name)``;
``bootstrap`` stays the first PLAINTEXT listener's, else the first's).  The
harness watches the cluster (ApiVersions, Metadata) through ``observe_listener``
(default: the bootstrap listener), over TLS with ``observe_ssl`` (an
``ssl.SSLContext``; with a client certificate on a mutual-TLS listener).  It
speaks no SASL: observe through a PLAINTEXT or SSL listener.  Per-broker settings
(each broker's own keystore) go in ``cluster.broker(i).properties`` before
``start()``.
"""
from __future__ import annotations

import os
import signal
import socket
import ssl
import struct
import tempfile
import time
from typing import Any, Callable, Mapping, TypeVar

from kwire.testing.process import BrokerProcess, BrokerStartError
from kwire.testing.zookeeper import ZooKeeperProcess

__all__ = ["ClusterProcess", "TEST_DEFAULTS", "metadata_snapshot", "recv_exactly", "send_request", "wait_serving"]

T = TypeVar("T")

TEST_DEFAULTS = {
    # a killed broker leaves the ISR and loses leadership in seconds, not Kafka's 18 s/30 s
    "zookeeper.session.timeout.ms": "6000",
    "replica.lag.time.max.ms": "5000",
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "5",
    # no automatic preferred-leader election in the middle of a test that moved leadership
    "leader.imbalance.check.interval.seconds": "3600",
}
METADATA_VERSION = 9        # controller_id, leader_epoch and offline_replicas; kwire serves 0..12


def send_request(address: str, request: Any, timeout: float = 5.0,
                 ssl_context: ssl.SSLContext | None = None) -> Any:
    """Send one kafka-python request object (``MetadataRequest[9](...)``) to ``host:port`` on a
    new connection (TLS with ``ssl_context``) and return the decoded response.

    Raises ``OSError`` (``ConnectionError``, ``TimeoutError``, ``ssl.SSLError``) when the broker
    cannot be reached, closes the connection or does not answer within ``timeout`` seconds.
    """
    host, port = address.rsplit(":", 1)
    request.with_header(correlation_id=1, client_id="kwire-testing-cluster")
    s = socket.create_connection((host, int(port)), timeout=timeout)
    if ssl_context is not None:
        try:
            s = ssl_context.wrap_socket(s, server_hostname=host)
        except BaseException:
            s.close()
            raise
    with s:
        s.sendall(bytes(request.encode(header=True, framed=True)))
        size, = struct.unpack(">i", recv_exactly(s, 4))
        body = recv_exactly(s, size)
    response_class = request.header.get_response_class()
    response = response_class.decode(body, header=True)
    if response.header.correlation_id != 1:
        raise ConnectionError(f"answer to correlation_id {response.header.correlation_id}, not 1")
    return response


def recv_exactly(s: socket.socket, n: int) -> bytes:
    """``n`` bytes from blocking socket ``s``; raises ConnectionError when the peer closes first."""
    chunks, left = [], n
    while left:
        chunk = s.recv(min(left, 1 << 20))
        if not chunk:
            raise ConnectionError("the broker closed the connection before answering")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def wait_serving(broker: BrokerProcess, timeout: float = 60, listener: str | None = None,
                 ssl_context: ssl.SSLContext | None = None) -> None:
    """Return once ``broker`` answers ApiVersions (through ``listener``, default its bootstrap
    listener; TLS with ``ssl_context``): a broker in cluster mode listens before it
    has registered in ZooKeeper and answers only after (after a kill -9, once its old
    session has expired).  Raises ``BrokerStartError`` with the log's tail; a broker that
    did not come up is killed."""
    from kafka.protocol.metadata import ApiVersionsRequest
    deadline = time.monotonic() + timeout
    address = broker.address(listener) if listener else broker.bootstrap
    broker.wait_ready(timeout)
    while True:
        try:
            send_request(address, ApiVersionsRequest[3](client_software_name="kwire-testing-cluster",
                                                        client_software_version="1"), 1.0, ssl_context)
            return
        except OSError:
            if not broker.alive() or time.monotonic() > deadline:
                if broker.alive():
                    broker.kill()
                raise BrokerStartError(f"{address} did not answer ApiVersions within {timeout:.0f} s; "
                                       f"log tail ({broker.log_path}):\n{broker.log_tail()}") from None
            time.sleep(0.05)


def metadata_snapshot(address: str, timeout: float = 5.0, ssl_context: ssl.SSLContext | None = None) -> dict:
    """One broker's view of the cluster: ``{"cluster_id", "controller_id", "answered_by",
    "brokers": {id: "host:port"}, "topics": {name: {partition: {"leader", "leader_epoch",
    "replicas", "isr", "offline_replicas", "error_code"}}}}``; the brokers' addresses are those
    of the listener ``address`` belongs to.  Raises ``OSError``."""
    from kafka.protocol.metadata import MetadataRequest
    request = MetadataRequest[METADATA_VERSION](topics=None, allow_auto_topic_creation=False)
    response = send_request(address, request, timeout, ssl_context).to_dict()
    return {
        "cluster_id": response["cluster_id"],
        "controller_id": response["controller_id"],
        "answered_by": address,
        "brokers": {b["node_id"]: f"{b['host']}:{b['port']}" for b in response["brokers"]},
        "topics": {t["name"]: {p["partition_index"]: {
            "leader": p["leader_id"], "leader_epoch": p["leader_epoch"], "replicas": list(p["replica_nodes"]),
            "isr": list(p["isr_nodes"]), "offline_replicas": list(p["offline_replicas"]),
            "error_code": p["error_code"]} for p in t["partitions"]} for t in response["topics"]},
    }


class ClusterProcess:
    """ZooKeeper plus brokers 1..N as child processes; see the module docstring.

    Attributes: ``zookeeper`` (a ``ZooKeeperProcess``), ``brokers`` ({id: ``BrokerProcess``}),
    ``data_dir``, ``properties`` (what every broker gets besides broker.id/zookeeper.connect),
    ``observe_listener`` and ``observe_ssl`` (how the harness itself talks to the brokers).
    """

    def __init__(self, brokers: int = 3, *, properties: Mapping[str, Any] | None = None,
                 data_dir: str | os.PathLike | None = None, zookeeper: ZooKeeperProcess | None = None,
                 listeners: Mapping[str, str] | None = None, observe_listener: str | None = None,
                 observe_ssl: ssl.SSLContext | None = None):
        if brokers < 1:
            raise ValueError(f"a cluster needs at least one broker, not {brokers}")
        self._tmp = None
        if data_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="kwire-cluster-")
            data_dir = self._tmp.name
        self.data_dir = os.path.abspath(os.fspath(data_dir))
        self._own_zookeeper = zookeeper is None
        self.zookeeper = zookeeper or ZooKeeperProcess(os.path.join(self.data_dir, "zookeeper"))
        self.properties = dict(TEST_DEFAULTS)
        if brokers < 3:     # Kafka refuses to create __consumer_offsets with fewer brokers than its RF
            self.properties["offsets.topic.replication.factor"] = str(brokers)
        self.properties.update({k: str(v) for k, v in (properties or {}).items()})
        self.brokers: dict[int, BrokerProcess] = {
            i: BrokerProcess(os.path.join(self.data_dir, f"broker-{i}"),
                             properties={**self.properties, "broker.id": i,
                                         "zookeeper.connect": self.zookeeper.connect},
                             listeners=listeners)
            for i in range(1, brokers + 1)}
        self.observe_listener = observe_listener
        self.observe_ssl = observe_ssl
        self._paused: set[int] = set()

    # -- addresses ---------------------------------------------------------------
    @property
    def bootstrap(self) -> str:
        """Every broker's ``host:port``, comma-separated (clients skip the dead ones)."""
        return ",".join(b.bootstrap for b in self.brokers.values())

    def live_ids(self) -> list[int]:
        """Brokers whose process runs and is not paused."""
        return [i for i, b in self.brokers.items() if b.alive() and i not in self._paused]

    def live_bootstrap(self) -> str:
        return ",".join(self.brokers[i].bootstrap for i in self.live_ids())

    def bootstrap_for(self, listener: str) -> str:
        """Every broker's ``host:port`` of the listener named ``listener``.  Raises ``KeyError``."""
        return ",".join(b.address(listener) for b in self.brokers.values())

    def observed_address(self, i: int) -> str:
        """Where the harness asks broker ``i`` (its ``observe_listener``)."""
        b = self.brokers[i]
        return b.address(self.observe_listener) if self.observe_listener else b.bootstrap

    def broker(self, i: int) -> BrokerProcess:
        """Broker ``i`` (its ``broker.id``).  Raises ``KeyError``."""
        return self.brokers[i]

    # -- lifecycle ---------------------------------------------------------------
    def start(self, timeout: float = 60) -> "ClusterProcess":
        """Start ZooKeeper (unless it runs) and every broker; return once each broker answers
        ApiVersions (it listens before it has registered in ZooKeeper, and answers after).

        Says nothing about the cluster having formed: ``wait_until_ready()`` does.
        Raises ``ZooKeeperStartError`` or ``BrokerStartError`` (with the log's tail);
        ``close()`` ends what did start.
        """
        if not self.zookeeper.alive():
            self.zookeeper.start()
        for b in self.brokers.values():        # all spawned first: they start in parallel
            if not b.alive():
                b.spawn()
        for i in self.brokers:
            wait_serving(self.brokers[i], timeout, self.observe_listener, self.observe_ssl)
        for i, b in self.brokers.items():       # one that died after another answered for it
            if not b.alive():
                raise BrokerStartError(f"broker {i} exited with code {b.proc.returncode} while the "
                                       f"cluster started; log tail ({b.log_path}):\n{b.log_tail()}")
        return self

    def start_broker(self, i: int, timeout: float = 60) -> BrokerProcess:
        """(Re)start broker ``i`` on its port and data and wait until it answers ApiVersions.
        After a kill -9 that takes until its old ZooKeeper session expires
        (zookeeper.session.timeout.ms).  Raises ``BrokerStartError``."""
        self._paused.discard(i)
        self.brokers[i].spawn()
        wait_serving(self.brokers[i], timeout, self.observe_listener, self.observe_ssl)
        return self.brokers[i]

    def stop(self, i: int, timeout: float = 40) -> int:
        """SIGTERM broker ``i`` (a controlled shutdown) and wait for it to exit; returns the exit code."""
        self.resume(i)                          # a stopped process would not act on SIGTERM
        return self.brokers[i].stop(timeout)

    def kill(self, i: int) -> None:
        """kill -9 of broker ``i``: its ZooKeeper session lives on until it times out."""
        self.brokers[i].kill()
        self._paused.discard(i)

    def pause(self, i: int) -> None:
        """SIGSTOP broker ``i``: it keeps its sockets but answers nothing, not even ZooKeeper's pings."""
        os.kill(self._pid(i), signal.SIGSTOP)
        self._paused.add(i)

    def resume(self, i: int) -> None:
        """SIGCONT broker ``i`` (nothing if it is not paused)."""
        if i in self._paused:
            self._paused.discard(i)
            if self.brokers[i].alive():
                os.kill(self._pid(i), signal.SIGCONT)

    def _pid(self, i: int) -> int:
        b = self.brokers[i]
        if not b.alive():
            raise RuntimeError(f"broker {i} is not running")
        return b.pid

    def close(self) -> None:
        """Stop every broker (SIGTERM, then -9), then our own ZooKeeper; remove a temporary dir.
        Idempotent."""
        for i in list(self._paused):
            self.resume(i)
        for b in self.brokers.values():
            b.close(timeout=40)
        if self._own_zookeeper:
            self.zookeeper.close()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> "ClusterProcess":
        try:
            self.start()
            self.wait_until_ready()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- observing ---------------------------------------------------------------
    def metadata(self, bootstrap: str | None = None, timeout: float = 5.0) -> dict:
        """The cluster as the first broker that answers a Metadata request sees it (the shape of
        ``metadata_snapshot``); ``bootstrap`` ("host:port,...") defaults to the live brokers'
        observed addresses (``observe_ssl`` applies either way).

        Raises ``ConnectionError`` when none answers within ``timeout`` seconds each.
        """
        addresses = (bootstrap or ",".join(self.observed_address(i) for i in self.live_ids())).split(",")
        failures = []
        for address in filter(None, addresses):
            try:
                return metadata_snapshot(address, timeout, self.observe_ssl)
            except OSError as exc:
                failures.append(f"{address}: {exc!r}")
        raise ConnectionError("no broker answered Metadata: " + ("; ".join(failures) or "none is live"))

    def wait_for(self, predicate: Callable[[], T], timeout: float = 30, what: str = "the condition",
                 interval: float = 0.1) -> T:
        """Poll ``predicate()`` until it returns something truthy, and return that.  An ``OSError``
        from it (a broker going away mid-request) counts as not yet.

        Raises ``TimeoutError`` after ``timeout`` seconds, naming ``what`` and the last error.
        """
        deadline = time.monotonic() + timeout
        last_error: OSError | None = None
        while True:
            try:
                value = predicate()
                if value:
                    return value
            except OSError as exc:
                last_error = exc
            if time.monotonic() > deadline:
                detail = f" (last error: {last_error!r})" if last_error else ""
                raise TimeoutError(f"timed out after {timeout} s waiting for {what}{detail}")
            time.sleep(interval)

    def wait_until_ready(self, timeout: float = 60) -> dict:
        """Return (a Metadata snapshot) once every live broker lists every live broker and a live
        controller.  Raises ``TimeoutError`` with each broker's log tail."""
        def formed() -> dict | None:
            live = self.live_ids()
            snapshot = None
            for i in live:
                snapshot = self.metadata(self.observed_address(i), timeout=2)
                if not set(live) <= set(snapshot["brokers"]) or snapshot["controller_id"] not in live:
                    return None
            return snapshot
        try:
            return self.wait_for(formed, timeout, "every live broker in Metadata", interval=0.2)
        except TimeoutError as exc:
            raise TimeoutError(f"{exc}\n{self.log_tails()}") from None

    def error_lines(self, limit: int = 40) -> str:
        """Each broker's last ``limit`` log lines that report an error (ERROR, WARNING, a
        traceback), for a failed test's report."""
        marks = ("ERROR", "WARNING", "Traceback", "Error", "Exception", "  File ")
        parts = []
        for i, b in self.brokers.items():
            lines = [line for line in b.log_text()[-400_000:].splitlines() if any(m in line for m in marks)]
            parts.append(f"--- broker {i} ---\n" + "\n".join(lines[-limit:]))
        return "\n".join(parts)

    def log_tails(self, lines: int = 15) -> str:
        """The end of each broker's log and ZooKeeper's, for an assertion message."""
        parts = [f"--- broker {i} ({'alive' if b.alive() else 'down'}) ---\n{b.log_tail(lines)}"
                 for i, b in self.brokers.items()]
        parts.append(f"--- zookeeper ---\n{self.zookeeper.log_tail(lines)}")
        return "\n".join(parts)
