"""A consumer-group member run as its own process, so a test can kill -9 it.

Usage: python -m tests.integration.group_member BOOTSTRAP TOPIC GROUP OUTFILE [commit-before|commit-after]
Writes one line per consumed record ("partition offset value") to OUTFILE,
flushing each line, and commits synchronously before or after writing it.
"""
import sys

from confluent_kafka import Consumer


def main():
    bootstrap, topic, group, outfile = sys.argv[1:5]
    order = sys.argv[5] if len(sys.argv) > 5 else "commit-after"
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
                  "heartbeat.interval.ms": 500})
    c.subscribe([topic])
    with open(outfile, "a", buffering=1) as out:
        while True:
            m = c.poll(0.2)
            if m is None or m.error():
                continue
            if order == "commit-before":
                c.commit(message=m, asynchronous=False)
            out.write(f"{m.partition()} {m.offset()} {m.value().decode()}\n")
            if order == "commit-after":
                c.commit(message=m, asynchronous=False)


if __name__ == "__main__":
    main()
