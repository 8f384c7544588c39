"""Apache Kafka's Java client against kwire: fixtures for ``tests/java_client``.

Each test module runs one of ``tests/java/Jc*.java`` once (the JVM's start-up is the slow
part) against an in-process broker of its own, and its tests assert on the JSON line each
check of the program printed (``JcOut``: ``{"check": name, "ok": true, ...}``).  A check that
threw prints ``ok: false`` and the exception, so one failure never hides the other checks.

Everything here skips, saying why, when ``../shared/jars``, ``java`` or ``javac`` is missing.
"""
from __future__ import annotations

import json
import time
import uuid

import pytest

import kwire.testing
from tests.support.java import java_available, run_to_end


@pytest.fixture(scope="module", autouse=True)
def require_java():
    ok, why = java_available()
    if not ok:
        pytest.skip(f"the Java client cannot run here: {why}")


@pytest.fixture(scope="module")
def kwire_broker():
    """An in-process kwire broker for one module (initial rebalance delay 0, as in tests)."""
    with kwire.testing.broker() as b:
        yield b


class JavaChecks:
    """The checks one ``Jc*`` program printed, by name, with its stderr for failure messages."""

    def __init__(self, main_class: str, lines: list[str], returncode: int | None, stderr: str):
        self.main_class = main_class
        self.returncode = returncode
        self.stderr = stderr
        self.checks: dict[str, dict] = {}
        self.other: list[str] = []
        for line in lines:
            try:
                item = json.loads(line)
            except ValueError:
                self.other.append(line)
                continue
            self.checks[item.pop("check")] = item

    def __getitem__(self, name: str) -> dict:
        """The results of check ``name``; fails the test when it is missing or threw."""
        tail = self.stderr[-3000:]
        assert name in self.checks, (f"{self.main_class} printed no {name!r} (exit {self.returncode}; "
                                     f"checks {list(self.checks)}); stderr:\n{tail}")
        result = self.checks[name]
        assert result.get("ok") is True, f"{self.main_class} {name}: {result.get('error')}\n{result}"
        return result


def run_checks(tmp_path_factory, main_class: str, bootstrap: str, timeout: float = 180) -> JavaChecks:
    """Run ``main_class bootstrap <unique prefix>`` to its end and collect its checks."""
    prefix = f"jc-{uuid.uuid4().hex[:8]}"
    stderr_path = tmp_path_factory.mktemp(main_class) / "stderr.txt"
    started = time.monotonic()
    out, code = run_to_end(main_class, bootstrap, prefix, stderr_path=stderr_path, timeout=timeout)
    result = JavaChecks(main_class, out.splitlines(), code, stderr_path.read_text())
    print(f"\n{main_class}: {len(result.checks)} checks in {time.monotonic() - started:.1f} s "
          f"(exit {code})")
    return result
