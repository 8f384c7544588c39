"""aiokafka (asyncio) against kwire."""
import asyncio
import uuid

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition


@pytest.mark.parametrize("codec", [None, "gzip", "snappy", "lz4", "zstd"])
def test_round_trip(broker, codec):
    topic = f"aio-{uuid.uuid4().hex[:10]}"

    async def main():
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, compression_type=codec, acks="all")
        await producer.start()
        try:
            offsets = []
            for i in range(100):
                md = await producer.send_and_wait(topic, value=f"m{i}".encode(), key=b"k",
                                                  headers=[("n", str(i).encode())])
                offsets.append(md.offset)
        finally:
            await producer.stop()
        assert offsets == list(range(100))
        consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False)
        await consumer.start()
        try:
            tp = TopicPartition(topic, 0)
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            got = []
            async with asyncio.timeout(20):
                while len(got) < 100:
                    batch = await consumer.getmany(tp, timeout_ms=500)
                    got.extend(batch.get(tp, []))
            assert [m.value for m in got] == [f"m{i}".encode() for i in range(100)]
            assert got[5].headers == (("n", b"5"),)
            assert (await consumer.end_offsets([tp]))[tp] == 100
        finally:
            await consumer.stop()

    asyncio.run(main())
