"""A kafka-python consumer-group member in a process of its own, for the group scenarios.

    python -m kwire.compat_tests.member_proc BOOTSTRAP GROUP TOPIC

Prints {"assigned": [partitions]} on every assignment change and
{"record": {...}} per record; leaves the group and exits when stdin closes.
Two kafka-python 3.0.12 consumers in one process occasionally lose the
leader's SyncGroup completion (the response arrives, the assignment is never
applied, the member stops heartbeating); separate processes are also how
consumers are deployed, so each member gets its own.
"""
from __future__ import annotations

import base64
import json
import logging
import os
import sys
import threading


def main(bootstrap: str, group: str, topic: str) -> int:
    from kafka import KafkaConsumer

    if os.environ.get("KWIRE_COMPAT_MEMBER_LOG"):   # debugging aid: kafka-python's own log
        logging.basicConfig(filename=f"{os.environ['KWIRE_COMPAT_MEMBER_LOG']}.{os.getpid()}", level=logging.DEBUG,
                            format="%(relativeCreated)d %(threadName)s %(name)s %(message)s")

    done = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                      enable_auto_commit=True, heartbeat_interval_ms=300, session_timeout_ms=10000,
                      max_poll_interval_ms=30000, request_timeout_ms=10000)
    # topic metadata first: a leader whose metadata response lands while its SyncGroup
    # completes can hang (kafka-python 3.0.12; see FINDINGS.md)
    c.partitions_for_topic(topic)
    c.subscribe([topic])
    last = None
    try:
        while not done.is_set():
            for tp, msgs in c.poll(100).items():
                for m in msgs:
                    print(json.dumps({"record": {
                        "value": base64.b64encode(m.value).decode(), "partition": m.partition,
                        "offset": m.offset}}), flush=True)
            now = sorted(tp.partition for tp in c.assignment())
            if now != last:
                print(json.dumps({"assigned": now}), flush=True)
                last = now
    finally:
        c.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
