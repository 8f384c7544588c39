"""Blocking file work stays off the Trio thread: it goes through kwire/runtime/blocking.py only.

Checked by reading every module under kwire/:
- ``trio.to_thread`` is used in kwire/runtime/blocking.py and nowhere else;
- the known blocking calls below are never made directly by server code, except
  awaited (then the callee is one of blocking.py's coroutines) or inside a lambda
  or nested function handed to ``run_blocking``.
"""
from __future__ import annotations

import ast
import pathlib
import tempfile

import pytest
import trio
from kafka.protocol.admin import CreatePartitionsRequest, CreateTopicsRequest
from kafka.protocol.metadata import MetadataRequest

from kwire.admin.broker_config import load_broker_config
from kwire.server.broker import Broker, Endpoint
from kwire.codecs import messages
from kwire.handlers.registry import HANDLERS
from kwire.server.connection import RequestContext

ROOT = pathlib.Path(__file__).resolve().parents[1]
SERVER = ROOT / "kwire"
HELPER = SERVER / "runtime" / "blocking.py"

# Calls that block on the disk: fsyncs, atomic file replaces, topic and partition file
# creation, producer-id blocks, log-start checkpoints, whole-log flushes and scrubs.
BLOCKING_CALLS = {
    "fsync", "fdatasync", "write_atomically", "rmtree",
    "create_topic", "write_topic", "add_partitions", "write_partitions",
    "next_producer_id", "delete_records", "write_log_start_offset",
    "flush", "scrub",
}
# Modules whose functions never run on the broker's Trio thread (user-facing sync helpers
# that talk to a broker through a client, the CLI before trio.run); their async functions
# are still checked.
OFF_TRIO_THREAD = {"testing/__init__.py", "testing/process.py", "testing/pytest_plugin.py", "cli.py", "__main__.py"}
# Folders of such modules: the operator commands (kwire produce, consume, perf ...) are Kafka
# clients in a process of their own; their producer.flush() is kafka-python's.
OFF_TRIO_FOLDERS = {"tools"}

MODULES = sorted(p for p in SERVER.rglob("*.py") if p != HELPER)


def called_name(call: ast.Call) -> str | None:
    func = call.func
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return None


def direct_calls(function: ast.AST):
    """Calls made by ``function`` itself (not by functions or lambdas defined inside it),
    with whether each is the operand of an ``await``."""
    awaited = set()
    stack = list(ast.iter_child_nodes(function))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        if isinstance(node, ast.Await) and isinstance(node.value, ast.Call):
            awaited.add(id(node.value))
        if isinstance(node, ast.Call):
            yield node, id(node) in awaited
        stack.extend(ast.iter_child_nodes(node))


def blocking_call_sites(path: pathlib.Path) -> list[str]:
    sites = []
    for node in ast.walk(ast.parse(path.read_text())):
        is_async = isinstance(node, ast.AsyncFunctionDef)
        off_trio = path.relative_to(SERVER).as_posix() in OFF_TRIO_THREAD or OFF_TRIO_FOLDERS & set(path.relative_to(SERVER).parts)
        if not (is_async or (isinstance(node, ast.FunctionDef) and not off_trio)):
            continue
        for call, awaited in direct_calls(node):
            name = called_name(call)
            if name in BLOCKING_CALLS and not awaited:
                sites.append(f"{path.relative_to(ROOT)}:{call.lineno} {node.name} calls {name}()")
    return sites


def to_thread_uses(path: pathlib.Path) -> list[str]:
    uses = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute) and node.attr == "to_thread":
            uses.append(f"{path.relative_to(ROOT)}:{node.lineno}")
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
            if any("to_thread" in n for n in names):
                uses.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return uses


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_blocking_call_on_the_trio_thread(path):
    assert blocking_call_sites(path) == []


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_trio_to_thread_only_in_the_helper(path):
    assert to_thread_uses(path) == []


def test_the_checks_catch_what_they_should():
    """The rules fire on code written the old way (guards against a check that passes vacuously)."""
    old = ast.parse("async def h(ctx):\n"
                    "    plog.delete_records(1)\n"
                    "    await trio.to_thread.run_sync(plog.flush)\n"
                    "    await run_blocking(lambda: logs.write_topic(1))\n")
    calls = [(called_name(c), awaited) for c, awaited in direct_calls(old.body[0])]
    assert ("delete_records", False) in calls and ("run_sync", True) in calls
    assert "write_topic" not in [name for name, _ in calls]
    assert to_thread_uses(HELPER) != []


# --- the same, observed: the Trio thread keeps serving while files are written -------------

async def call(broker, request, version: int) -> dict:
    """One request through its registered handler, decoded from the bytes a client would send."""
    body = bytes(request.encode(version=version))
    decoded = messages.decode_request(request.API_KEY, version, body, 0)
    ctx = RequestContext(broker=broker, api_key=request.API_KEY, api_version=version, correlation_id=1,
                         client_id="inproc", peer="127.0.0.1:40000")
    return await HANDLERS[request.API_KEY].func(ctx, decoded)


def with_broker(test, **properties):
    async def main():
        with tempfile.TemporaryDirectory(prefix="kwire-blocking-") as data_dir:
            broker = Broker(load_broker_config(None, {"log.dirs": data_dir, **properties}))
            broker.advertised = Endpoint("127.0.0.1", 9092)  # no listener: handlers only
            broker.open()
            try:
                with trio.fail_after(60):
                    await test(broker)
            finally:
                broker.close()
    trio.run(main)


def create_topics(name: str, partitions: int):
    return CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=1, assignments=[], configs=[])],
        timeout_ms=10000, validate_only=False)


def test_the_event_loop_keeps_running_while_a_topic_is_created():
    """A 300-partition CreateTopics fsyncs hundreds of files; a ticking task must not stall meanwhile."""
    async def scenario(broker):
        gaps = []

        async def tick():
            last = trio.current_time()
            while True:
                await trio.sleep(0.002)
                now = trio.current_time()
                gaps.append(now - last)
                last = now

        async with trio.open_nursery() as nursery:
            nursery.start_soon(tick)
            await trio.sleep(0.05)
            started = trio.current_time()
            response = await call(broker, create_topics("big", 300), 5)
            took = trio.current_time() - started
            await trio.sleep(0.05)  # lets the ticker record the gap it is in
            nursery.cancel_scope.cancel()
        assert response["topics"][0]["error_code"] == 0
        assert len(broker.logs.get("big").partitions) == 300
        assert max(gaps) < max(took / 3, 0.05), f"the loop stalled {max(gaps):.3f} s of {took:.3f} s"
    # Blocking file I/O on the loop stalls it on every run; on this 2-core VM a single run
    # rarely sees one ~0.2 s scheduling hiccup besides (twice in full CI runs, never alone),
    # so a stall must show up in two fresh runs to fail the test.
    try:
        with_broker(scenario)
    except AssertionError:
        with_broker(scenario)


def test_concurrent_auto_creates_make_one_topic_and_growth_is_whole():
    async def scenario(broker):
        results = []

        async def metadata():
            request = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="auto")],
                                      allow_auto_topic_creation=True)
            results.append(await call(broker, request, 9))

        async with trio.open_nursery() as nursery:
            for _ in range(6):
                nursery.start_soon(metadata)
        assert [(r["topics"][0]["error_code"], len(r["topics"][0]["partitions"])) for r in results] == [(0, 3)] * 6
        grow = CreatePartitionsRequest(topics=[CreatePartitionsRequest.CreatePartitionsTopic(
            name="auto", count=8, assignments=None)], timeout_ms=10000, validate_only=False)
        assert (await call(broker, grow, 1))["results"][0]["error_code"] == 0
        assert len(broker.logs.get("auto").partitions) == 8
    with_broker(scenario, **{"num.partitions": "3"})
