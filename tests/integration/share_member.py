"""A share consumer in a process of its own, for tests that kill it (-9) holding records.

    python share_member.py BOOTSTRAP GROUP TOPIC N

Polls in explicit acknowledgement mode until it holds at least N records, prints their
offsets as one line ("acquired 0 1 2 ..."), then sleeps without acknowledging them.
"""
import sys
import time

from confluent_kafka import ShareConsumer

bootstrap, group, topic, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                          "share.acknowledgement.mode": "explicit", "max.poll.records": n})
consumer.subscribe([topic])
held: list[int] = []
deadline = time.monotonic() + 30
while len(held) < n and time.monotonic() < deadline:
    for msg in consumer.poll(0.5) or []:
        if msg.error() is None:
            held.append(msg.offset())
print("acquired", *held, flush=True)
time.sleep(600)
