"""Small stock-client helpers for the Spark tests (kafka-python only)."""
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic


def create_topic(bootstrap, name, partitions=1):
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(name, partitions, 1)])
    finally:
        admin.close()


def produce(bootstrap, topic, values, partition=None, timestamps=None, keys=None, headers=None):
    p = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=2)
    try:
        futures = [p.send(topic, value=v, partition=partition,
                          key=keys[i] if keys else None,
                          timestamp_ms=timestamps[i] if timestamps else None,
                          headers=headers[i] if headers else None)
                   for i, v in enumerate(values)]
        p.flush(30)
        return [f.get(30) for f in futures]
    finally:
        p.close(10)


def consume_all(bootstrap, topic, partitions=(0,), timeout_s=15):
    """Every record now in ``topic`` via a stock KafkaConsumer in assign mode."""
    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None)
    try:
        tps = [TopicPartition(topic, p) for p in partitions]
        c.assign(tps)
        c.seek_to_beginning()
        end = c.end_offsets(tps)
        out = []
        import time
        deadline = time.monotonic() + timeout_s
        while any(c.position(tp) < end[tp] for tp in tps):
            assert time.monotonic() < deadline, "timed out reading back"
            for recs in c.poll(timeout_ms=500).values():
                out.extend(recs)
        return out
    finally:
        c.close()


def delete_records(bootstrap, topic, partition, before):
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.delete_records({TopicPartition(topic, partition): before}, timeout_ms=10000)
    finally:
        admin.close()
