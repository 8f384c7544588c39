"""kwire.testing: the embedded broker and its pytest fixtures."""
import asyncio
import os
import socket
import uuid

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import TopicAlreadyExistsError

import kwire.testing
from kwire.admin.broker_config import ConfigError


def accepts(bootstrap):
    host, port = bootstrap.split(":")
    with socket.create_connection((host, int(port)), timeout=2):
        return True


def test_start_stop_and_temp_dir_removed():
    with kwire.testing.broker() as b:
        data_dir = b.data_dir
        assert os.path.isdir(data_dir)
        assert b.bootstrap.startswith("127.0.0.1:")
        assert accepts(b.bootstrap)
        port = b.port
    assert not os.path.exists(data_dir)
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()


def test_stop_is_idempotent_and_explicit_data_dir_is_kept(tmp_path):
    b = kwire.testing.EmbeddedBroker(data_dir=str(tmp_path)).start()
    p = KafkaProducer(bootstrap_servers=b.bootstrap)
    p.send("kept", b"x").get(10)
    p.close()
    b.stop()
    b.stop()
    assert any(tmp_path.iterdir())   # the caller's directory is never removed


def test_properties_keywords_and_dict():
    with kwire.testing.broker(partitions=3, auto_create_topics_enable=False,
                              properties={"log.retention.ms": 60000}) as b:
        assert b.properties["num.partitions"] == "3"
        assert b.properties["auto.create.topics.enable"] == "false"
        admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
        try:
            b.create_topic("three")            # num.partitions applies
            described = admin.describe_topics(["three"])
            assert len(described[0]["partitions"]) == 3
            c = KafkaConsumer(bootstrap_servers=b.bootstrap)
            assert not c.partitions_for_topic("not-auto-created")
            c.close()
            assert "not-auto-created" not in admin.list_topics()
        finally:
            admin.close()


def test_bad_property_raises_and_cleans_up():
    b = kwire.testing.EmbeddedBroker({"num.partitions": "zero"})
    with pytest.raises(ConfigError):
        b.start()
    assert not os.path.exists(b.data_dir)


def test_create_topic_helper():
    with kwire.testing.broker() as b:
        name = b.create_topic(partitions=4, configs={"cleanup.policy": "delete"})
        with pytest.raises(TopicAlreadyExistsError):
            b.create_topic(name)
        c = KafkaConsumer(bootstrap_servers=b.bootstrap)
        assert c.partitions_for_topic(name) == {0, 1, 2, 3}
        c.close()
        b.delete_topic(name)


def test_two_brokers_side_by_side():
    with kwire.testing.broker() as a, kwire.testing.broker() as b:
        assert a.port != b.port and a.data_dir != b.data_dir


def test_session_fixture_round_trip(kwire_broker, kwire_topic):
    p = KafkaProducer(bootstrap_servers=kwire_broker.bootstrap)
    p.send(kwire_topic, key=b"k", value=b"v").get(10)
    p.close()
    c = KafkaConsumer(bootstrap_servers=kwire_broker.bootstrap, consumer_timeout_ms=5000)
    c.assign([TopicPartition(kwire_topic, 0)])
    c.seek_to_beginning()
    got = next(iter(c))
    c.close()
    assert (got.key, got.value) == (b"k", b"v")


def test_function_fixture_is_private(kwire_broker, kwire_broker_function):
    assert kwire_broker_function.port != kwire_broker.port
    name = kwire_broker_function.create_topic()
    c = KafkaConsumer(bootstrap_servers=kwire_broker.bootstrap)
    assert name not in c.topics()
    c.close()


def test_fixture_from_asyncio_code(kwire_broker):
    """The broker's own event loop (trio, on its thread) does not meet the test's asyncio loop."""
    topic = f"aio-{uuid.uuid4().hex[:8]}"
    kwire_broker.create_topic(topic)

    async def main():
        producer = AIOKafkaProducer(bootstrap_servers=kwire_broker.bootstrap)
        await producer.start()
        try:
            await producer.send_and_wait(topic, b"from asyncio")
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=kwire_broker.bootstrap,
                                    auto_offset_reset="earliest")
        await consumer.start()
        try:
            return (await asyncio.wait_for(consumer.getone(), 10)).value
        finally:
            await consumer.stop()

    assert asyncio.run(main()) == b"from asyncio"


def test_broker_started_inside_a_running_event_loop():
    async def main():
        with kwire.testing.broker() as b:   # a blocking start of a few ms is fine in a test
            producer = AIOKafkaProducer(bootstrap_servers=b.bootstrap)
            await producer.start()
            try:
                meta = await producer.send_and_wait("t", b"x")
            finally:
                await producer.stop()
            return meta.offset

    assert asyncio.run(main()) == 0


def test_startup_time_is_recorded():
    """Measured, not asserted (timing belongs in bench/startup.py); printed with -s."""
    times = []
    for _ in range(5):
        with kwire.testing.broker() as b:
            times.append(b.startup_s)
    times.sort()
    print(f"embedded start-up median of 5: {times[2] * 1000:.1f} ms")
    assert all(t > 0 for t in times)
