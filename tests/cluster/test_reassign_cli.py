"""``kwire reassign`` (kafka-reassign-partitions.sh) run as a user runs it, against three brokers,
with a stock producer writing throughout and a consumer counting what it reads afterwards.

What an operator checks: the JSON round trip --generate -> --execute --throttle -> --verify, the
throttles set while moving and gone afterwards, a drained broker holding nothing, a stuck move
listed and cancelled, refusals printed as messages -- and every acknowledged record read once.
"""
from __future__ import annotations

import functools
import json
import time

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource

from tests.support.cluster_state import controller_of, create, local_bytes, reassign, topic_znode
from tests.support.counting import (join_producer, produce_in_background, read_all, tally,
                                    total, wait_acknowledged, wait_for)

pytestmark = pytest.mark.clients
RATE = 50_000_000                # high enough not to slow the test, checked as set and cleared
THROTTLE_KEYS = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")
RATE_KEYS = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")


def dynamic_configs(cluster, resources: list[ConfigResource]) -> dict[str, dict[str, str]]:
    """{"BROKER 1": {name: value}, "TOPIC t": {...}}: the non-default configs (DescribeConfigs)."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    out = {}
    for resource in resources:            # librdkafka: one BROKER resource per call
        entries = admin.describe_configs([resource])[resource].result(30)
        out[f"{resource.restype.name} {resource.name}"] = {
            k: e.value for k, e in entries.items() if k in THROTTLE_KEYS + RATE_KEYS and not e.is_default}
    return out


def proposed_json(stdout: str) -> dict:
    lines = stdout.splitlines()
    return json.loads(lines[lines.index("Proposed partition reassignment configuration") + 1])


def test_generate_execute_throttled_verify_then_drain_a_broker_while_a_producer_writes(cluster, tmp_path):
    create(cluster, "orders", [[1, 2], [2, 3], [3, 1]])
    thread, acked = produce_in_background("confluent", cluster.bootstrap, "orders", 30000, partitions=3,
                                          pause_every=20)
    wait_acknowledged(thread, acked, 1000)
    resources = [ConfigResource("BROKER", str(b)) for b in (1, 2, 3)] + [ConfigResource("TOPIC", "orders")]

    # --generate: everything onto brokers 2 and 3 (each partition on both)
    (tmp_path / "topics.json").write_text('{"version":1,"topics":[{"topic":"orders"}]}')
    generated = reassign(cluster, "--generate", "--topics-to-move-json-file", str(tmp_path / "topics.json"),
                         "--broker-list", "2,3")
    assert generated.returncode == 0, generated.stderr
    assert generated.stdout.startswith("Current partition replica assignment\n")
    proposal = proposed_json(generated.stdout)
    targets = {p["partition"]: p["replicas"] for p in proposal["partitions"]}
    assert sorted(targets) == [0, 1, 2] and all(sorted(r) == [2, 3] for r in targets.values()), proposal
    (tmp_path / "move.json").write_text(json.dumps(proposal))

    # --execute --throttle: the rollback JSON, the throttles, the moves started
    executed = reassign(cluster, "--execute", "--reassignment-json-file", str(tmp_path / "move.json"),
                        "--throttle", str(RATE))
    assert executed.returncode == 0, executed.stderr
    rollback = json.loads(executed.stdout.split("Current partition replica assignment\n\n")[1].split("\n")[0])
    assert {p["partition"]: p["replicas"] for p in rollback["partitions"]} == {0: [1, 2], 1: [2, 3], 2: [3, 1]}
    assert "Save this to use as the --reassignment-json-file option during rollback" in executed.stdout
    assert "Successfully started partition reassignments for orders-0,orders-1,orders-2" in executed.stdout
    throttles = dynamic_configs(cluster, resources)
    for b in (1, 2, 3):                   # every broker is a source or a destination here
        assert throttles[f"BROKER {b}"] == {k: str(RATE) for k in RATE_KEYS}, throttles
    # leaders: each partition's existing replicas; followers: the replicas being added
    assert throttles["TOPIC orders"][THROTTLE_KEYS[0]] == "0:1,0:2,1:2,1:3,2:1,2:3", throttles
    assert throttles["TOPIC orders"][THROTTLE_KEYS[1]] == "0:3,2:2", throttles
    assert thread.is_alive(), "the move did not happen under load"

    # --verify until done: then the throttles are cleared
    def verified():
        run = reassign(cluster, "--verify", "--reassignment-json-file", str(tmp_path / "move.json"))
        assert run.returncode == 0, run.stderr
        return "in progress" not in run.stdout and run
    done = wait_for(verified, 40, "--verify to report every move completed")
    for p in range(3):
        assert f"Reassignment of partition orders-{p} is completed." in done.stdout, done.stdout
    assert "Clearing broker-level throttles on brokers 1,2,3" in done.stdout
    assert "Clearing topic-level throttles on topic orders" in done.stdout
    assert dynamic_configs(cluster, resources) == {f"BROKER {b}": {} for b in (1, 2, 3)} | {"TOPIC orders": {}}
    assert {int(p): r for p, r in topic_znode(cluster, "orders")["partitions"].items()} == targets

    # --drain-broker 3 --wait: every replica of broker 3 (of every topic) goes to 1, in 3's place
    drained = reassign(cluster, "--drain-broker", "3", "--wait", "--timeout", "40")
    assert drained.returncode == 0, drained.stderr
    plan = proposed_json(drained.stdout)
    assert {p["partition"]: p["replicas"] for p in plan["partitions"] if p["topic"] == "orders"} == \
        {p: [1 if b == 3 else b for b in r] for p, r in targets.items()}
    assert "Status of partition reassignment:" in drained.stdout and "still in progress" not in drained.stdout
    znode = topic_znode(cluster, "orders")
    assert all(3 not in r for r in znode["partitions"].values()) and not znode.get("adding_replicas"), znode
    wait_for(lambda: all(local_bytes(cluster, 3, "orders", p) == 0 for p in range(3)), 20,
             "broker 3's copies to be emptied")
    assert all(local_bytes(cluster, 1, "orders", p) > 0 for p in range(3))
    listed = reassign(cluster, "--list")
    assert listed.returncode == 0 and listed.stdout.strip() == "No partition reassignments found.", listed

    join_producer(thread, 120)
    seen = read_all(cluster.bootstrap, "orders", 3, expected=total(acked))
    counts = tally(acked, seen)
    assert counts == {"acknowledged": 30000, "read": 30000, "lost": 0, "duplicates": 0, "out_of_order": 0}, counts


def test_a_stuck_move_times_out_is_listed_refused_twice_and_cancelled_and_bad_targets_are_messages(
        cluster_factory, tmp_path):
    # the paused broker's ZooKeeper session outlasts the test: it stays live, just silent
    cluster = cluster_factory(3, properties={"zookeeper.session.timeout.ms": 30000})
    silent = max(b for b in (1, 2, 3) if b != controller_of(cluster))    # admin requests go to the controller
    first, second = [b for b in (1, 2, 3) if b != silent]
    create(cluster, "stuck", [[first, second]])
    # a request kafka-python sends to the paused broker times out soon; the tool then asks another
    (tmp_path / "client.properties").write_text("request.timeout.ms=2000\nsocket.connection.setup.timeout.ms=2000\n")
    quick = functools.partial(reassign, cluster, command_config=tmp_path / "client.properties", own_process=True)

    def write(name: str, partitions: list[tuple[str, int, list[int]]]) -> str:
        path = tmp_path / name
        path.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": t, "partition": p, "replicas": r} for t, p, r in partitions]}))
        return str(path)

    for partitions, message in (
            ([("stuck", 0, [first, 99])], "Replica assignment has brokers that are not alive"),
            ([("stuck", 5, [first])], "Unable to find partition: stuck-5"),
            ([("nowhere", 0, [first])], "Topic nowhere not found.")):
        run = reassign(cluster, "--execute", "--reassignment-json-file", write("bad.json", partitions))
        assert run.returncode == 1 and message in run.stderr, (partitions, run.stderr)
    assert reassign(cluster, "--drain-broker", "1", "--dry-run").returncode == 0

    thread, acked = produce_in_background("kafka-python", cluster.bootstrap, "stuck", 4000, partitions=1,
                                          pause_every=20, timeout=60)
    wait_acknowledged(thread, acked, 200)
    move = write("move.json", [("stuck", 0, [second, silent])])
    cluster.pause(silent)                  # the new replica cannot catch up
    try:
        started = time.monotonic()
        run = quick("--execute", "--reassignment-json-file", move, "--wait", "--timeout", "3")
        assert run.returncode == 1 and "Timed out after 3 s: still moving stuck-0" in run.stderr, run
        assert time.monotonic() - started < 15, "--timeout was not honoured"
        assert "Successfully started partition reassignment for stuck-0" in run.stdout
        assert "still to copy" in run.stderr          # the plain progress lines, not on a terminal
        listed = quick("--list")
        assert listed.stdout.splitlines() == [
            "Current partition reassignments:",
            f"stuck-0: replicas: {second},{silent},{first}. adding: {silent}. removing: {first}."], listed
        again = quick("--execute", "--reassignment-json-file", move)
        assert again.returncode == 1 and "Cannot execute because there is an existing partition assignment" \
            in again.stderr, again
        verified = quick("--verify", "--reassignment-json-file", move)
        assert "Reassignment of partition stuck-0 is still in progress." in verified.stdout
        assert "Clearing" not in verified.stdout
        # the paused broker cannot have its throttles cleared now: --verify does it later
        cancelled = quick("--cancel", "--reassignment-json-file", move, "--preserve-throttles")
        assert cancelled.returncode == 0, cancelled.stderr
        assert cancelled.stdout.strip() == "Successfully cancelled partition reassignment for: stuck-0"
        assert quick("--list").stdout.strip() == "No partition reassignments found."
        assert sorted(topic_znode(cluster, "stuck")["partitions"]["0"]) == sorted([first, second])
    finally:
        cluster.resume(silent)
    # the resumed broker may have re-registered: --verify clears its throttles once all know it
    wait_for(lambda: all(len(AdminClient({"bootstrap.servers": cluster.broker(b).bootstrap}).list_topics(timeout=10)
                             .brokers) == 3 for b in (1, 2, 3)), 30, "every broker in every broker's metadata")
    verified = reassign(cluster, "--verify", "--reassignment-json-file", move)
    assert verified.returncode == 0, verified.stderr
    assert (f"There is no active reassignment of partition stuck-0, but replica set is {first},{second} rather "
            f"than {second},{silent}.") in verified.stdout or \
        (f"replica set is {second},{first} rather than {second},{silent}.") in verified.stdout, verified.stdout
    assert "Clearing topic-level throttles on topic stuck" in verified.stdout
    join_producer(thread, 60)
    seen = read_all(cluster.bootstrap, "stuck", 1, expected=total(acked))
    counts = tally(acked, seen)
    assert counts["acknowledged"] == 4000 and counts["lost"] == 0 and counts["duplicates"] == 0, counts
