"""kwire.testing.broker_process: kwire as a child process (start, stop, kill -9, restart)."""
import os
import socket

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

import kwire.testing

pytestmark = pytest.mark.clients


def produce(bootstrap, topic, values):
    p = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for v in values:
        p.send(topic, v).get(10)
    p.close(10)


def read_all(bootstrap, topic, partition=0):
    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=3000)
    tp = TopicPartition(topic, partition)
    c.assign([tp])
    c.seek_to_beginning(tp)
    got = [r.value for r in c]
    c.close()
    return got


def test_broker_process_serves_clients_then_is_stopped_and_cleaned_up():
    with kwire.testing.broker_process(partitions=3) as b:
        pid, data_dir = b.pid, b.data_dir
        produce(b.bootstrap, "orders", [b"a", b"b"])
        c = KafkaConsumer(bootstrap_servers=b.bootstrap)
        assert c.partitions_for_topic("orders") == {0, 1, 2}      # num.partitions=3 applied
        c.close()
        assert "kwire" in b.log_text()
    assert not b.alive()
    assert b.proc.returncode == 0                                  # SIGTERM: a clean stop
    assert not os.path.exists(data_dir)
    with pytest.raises(OSError):
        os.kill(pid, 0)


def test_restart_on_the_same_port_keeps_the_data(tmp_path):
    b = kwire.testing.BrokerProcess(tmp_path, log_segment_bytes=100_000).start()
    try:
        produce(b.bootstrap, "t", [b"one", b"two"])
        assert b.stop() == 0
        assert os.path.exists(tmp_path / "logs" / ".kwire_cleanshutdown")
        port = b.port
        b.start()
        assert b.port == port
        produce(b.bootstrap, "t", [b"three"])
        b.kill()
        assert not b.alive()
        b.start()
        assert read_all(b.bootstrap, "t") == [b"one", b"two", b"three"]
    finally:
        b.close()
    assert os.path.isdir(tmp_path / "logs"), "a data dir that was passed in is kept"


def test_a_broker_that_cannot_start_raises_with_its_log_and_leaves_nothing_running():
    b = kwire.testing.BrokerProcess(properties={"num.partitions": "not-a-number"})
    with pytest.raises(kwire.testing.BrokerStartError, match="num.partitions"):
        b.start(timeout=20)
    assert not b.alive()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", b.port), timeout=1).close()
    b.close()


def test_named_listeners_each_get_a_port_and_the_plaintext_one_stays_the_bootstrap(tmp_path):
    b = kwire.testing.BrokerProcess(tmp_path, listeners={"client": "SASL_SSL", "PLAINTEXT": "PLAINTEXT",
                                                         "INTERNAL": "SSL"})
    assert list(b.ports) == ["CLIENT", "PLAINTEXT", "INTERNAL"] and len(set(b.ports.values())) == 3
    assert b.bootstrap == b.address("plaintext") == f"127.0.0.1:{b.port}"
    assert b.properties["listeners"] == ",".join(f"{n}://127.0.0.1:{p}" for n, p in b.ports.items())
    assert b.properties["listener.security.protocol.map"] == "CLIENT:SASL_SSL,PLAINTEXT:PLAINTEXT,INTERNAL:SSL"
    # without a PLAINTEXT listener, the first is the bootstrap; without listeners, nothing changes
    assert kwire.testing.BrokerProcess(tmp_path, listeners={"A": "SSL", "B": "SSL"}).bootstrap_listener == "A"
    plain = kwire.testing.BrokerProcess(tmp_path, port=19092)
    assert plain.properties["listeners"] == "PLAINTEXT://127.0.0.1:19092" and plain.ports == {"PLAINTEXT": 19092}
    assert "listener.security.protocol.map" not in plain.properties
