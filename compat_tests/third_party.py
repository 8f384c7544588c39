"""Run a test suite kwire's authors did not write: kafka-python's own integration tests.

    python -m kwire.compat_tests.third_party [--bootstrap HOST:PORT] [--json FILE]

The suite comes from kafka-python's source distribution on PyPI (the version
installed here), fetched once with ``pip download --no-binary :all:`` into
the cache.  Its fixtures use an already running broker when ``KAFKA_URI`` is
set (``KAFKA_VERSION`` tells the tests which broker features to expect), so
nothing in the suite is modified.  Two files its ``MANIFEST.in`` leaves out
are supplied: ``test/__init__.py`` (without it ``import test.testutil``
finds the standard library's ``test`` package) and ``test/service.py``
(only ``ExternalService``, the do-nothing wrapper for a broker that is already
running, is used with ``KAFKA_URI``).

Without ``--bootstrap`` an embedded kwire is started, configured like the
broker kafka-python's fixture would start: node id 0, a group minimum
session timeout of 1 s (``test_group`` uses 3 s sessions), 4 partitions per
topic and advertised.listeners set explicitly.

Every test runs except those in ``EXCLUDED``, each with its reason; the run
passes when every test that ran passed (the suite's own skips stay skips).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from .external import cache_dir

SUITE = "kafka-python"
KAFKA_VERSION = "4.2.0"   # the Kafka release kwire's ApiVersions ranges correspond to
BROKER_PROPERTIES = {"node.id": 0, "group.min.session.timeout.ms": 1000, "num.partitions": 4,
                     # set explicitly, as the fixture's server.properties does (port 0 = the bound port)
                     "advertised.listeners": "PLAINTEXT://127.0.0.1:0"}

# test id (relative to the sdist) -> why it does not run against kwire
EXCLUDED = {
    "test/integration/test_admin_integration.py::test_create_describe_delete_acls":
        "ACL APIs (CreateAcls/DescribeAcls/DeleteAcls) are not implemented: kwire has no authorizer",
    "test/integration/test_admin_integration.py::test_elect_leaders":
        "ElectLeaders: a single node has no other replica to elect",
    "test/integration/test_admin_integration.py::test_alter_replica_log_dirs":
        "AlterReplicaLogDirs is not implemented (one log dir, no replicas to move)",
    "test/integration/test_admin_integration.py::test_describe_metadata_quorum":
        "DescribeQuorum: kwire has no KRaft controller quorum",
    "test/integration/test_admin_integration.py::test_alter_partition_reassignments":
        "AlterPartitionReassignments: one node, nothing to reassign",
    "test/integration/test_admin_integration.py::test_list_partition_reassignments":
        "ListPartitionReassignments is not implemented",
    "test/integration/test_producer_integration.py::test_transactional_producer_messages":
        "transactions are not implemented (the producer waits for a transaction coordinator)",
    "test/integration/test_producer_integration.py::test_transactional_producer_offsets":
        "transactions are not implemented (FindCoordinator for a transaction: COORDINATOR_NOT_AVAILABLE)",
    "test/integration/test_sasl_integration.py":
        "SASL: kwire listens on PLAINTEXT only (the tests skip themselves without a SASL broker)",
    "test/integration/test_ssl_integration.py":
        "SSL: kwire listens on PLAINTEXT only; the fixture needs a JDK keytool to make keystores",
}

SERVICE_SHIM = '''"""Supplied by kwire's harness: the sdist omits test/service.py.

Only ExternalService is used when KAFKA_URI names a running broker.
"""


class ExternalService:
    def __init__(self, host, port):
        self.host, self.port = host, port

    def open(self):
        pass

    def close(self):
        pass


class SpawnedService:
    def __init__(self, *args, **kwargs):
        raise RuntimeError("spawning a Kafka broker is not supported by this harness")
'''


class Unavailable(Exception):
    """The suite cannot be fetched or prepared; the message says why."""


def installed_version() -> str:
    import kafka

    return kafka.__version__


def fetch_sdist(version: str, timeout: float = 180) -> Path:
    """The extracted sdist directory (downloaded once into the cache)."""
    root = cache_dir() / "sdists"
    src = root / f"kafka_python-{version}"
    if (src / "test" / "integration").is_dir():
        return src
    root.mkdir(parents=True, exist_ok=True)
    try:
        res = subprocess.run([sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps",
                              "--disable-pip-version-check", "-q", "-d", str(root), f"kafka-python=={version}"],
                             capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise Unavailable(f"pip download kafka-python=={version} timed out") from None
    archive = root / f"kafka_python-{version}.tar.gz"
    if res.returncode != 0 or not archive.exists():
        raise Unavailable(f"pip download kafka-python=={version} failed: {res.stderr.strip()[-200:]}")
    with tarfile.open(archive) as tar:
        tar.extractall(root, filter="data")
    if not (src / "test" / "integration").is_dir():
        raise Unavailable(f"the kafka-python {version} sdist ships no test/integration")
    return src


def prepare(src: Path) -> None:
    (src / "test" / "__init__.py").touch()
    if not (src / "test" / "service.py").exists():
        (src / "test" / "service.py").write_text(SERVICE_SHIM)
    (src / "servers" / KAFKA_VERSION / "kafka-bin").mkdir(parents=True, exist_ok=True)


def run_suite(bootstrap: str, src: Path, timeout: float = 240) -> dict:
    """Run the suite against ``bootstrap``; returns counts and per-test outcomes."""
    junit = Path(tempfile.mkdtemp(prefix="kwire-3rd-")) / "junit.xml"
    deselect = []
    for test_id in EXCLUDED:
        deselect += ["--ignore" if test_id.endswith(".py") else "--deselect", test_id]
    env = {**os.environ, "KAFKA_URI": f"tcp://{bootstrap}", "KAFKA_VERSION": KAFKA_VERSION,
           "KAFKA_ROOT": str(src / "servers" / KAFKA_VERSION / "kafka-bin")}
    args = [sys.executable, "-m", "pytest", "test/integration", "-q", "-rfEs", "-p", "no:cacheprovider",
            "-p", "no:hypothesispytest", "-p", "no:randomly", "--timeout", "60", "-W", "ignore::DeprecationWarning",
            "-o", "addopts=", f"--junitxml={junit}", *deselect]
    # src first on sys.path: the suite imports its own ``test`` package; the installed kafka is used
    try:
        res = subprocess.run(args, cwd=src, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": f"the suite did not finish in {timeout:.0f}s", "tests": {}}
    tests = parse_junit(junit) if junit.exists() else {}
    counts = {k: sum(1 for v in tests.values() if v == k) for k in ("passed", "failed", "error", "skipped")}
    return {"ok": res.returncode == 0 and counts["passed"] > 0, "returncode": res.returncode, "counts": counts,
            "tests": tests, "excluded": EXCLUDED, "output_tail": res.stdout[-3000:]}


def parse_junit(path: Path) -> dict[str, str]:
    import xml.etree.ElementTree as ET

    out = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        status = "passed"
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                status = {"failure": "failed"}.get(child.tag, child.tag)
        out[name] = status
    return out


def run(bootstrap: str | None = None) -> dict:
    """Fetch, prepare and run the suite; starts an embedded kwire when no bootstrap is given."""
    version = installed_version()
    src = fetch_sdist(version)
    prepare(src)
    if bootstrap:
        return {"suite": f"{SUITE} {version}", **run_suite(bootstrap, src)}
    import kwire.testing

    with kwire.testing.EmbeddedBroker(BROKER_PROPERTIES) as b:
        return {"suite": f"{SUITE} {version}", "broker": "embedded kwire", **run_suite(b.bootstrap, src)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="kafka-python's integration tests against a broker")
    ap.add_argument("--bootstrap", help="HOST:PORT of a running broker (default: start an embedded kwire)")
    ap.add_argument("--json", help="write the outcome as JSON")
    args = ap.parse_args(argv)
    try:
        result = run(args.bootstrap)
    except Unavailable as exc:
        print(f"skipped: {exc}")
        return 0
    print(result.get("output_tail", result.get("error", "")))
    print(f"{result['suite']}: {result.get('counts')}; excluded {len(EXCLUDED)} (see EXCLUDED for reasons)")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
