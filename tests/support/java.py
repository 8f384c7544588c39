"""Run small Java programs (``tests/java/*.java``) against Apache Kafka's Java client.

    ok, why = java_available()
    if not ok:
        pytest.skip(why)
    proc = start_java("ClusterProducer", cluster.bootstrap, "topic", "1000", "3",
                      stdout=subprocess.PIPE, stderr=log_file)
    ...
    stop(proc)

The jars are not in the repository: they live in ``../shared/jars`` next to the
project root (see its README.md).  Sources are compiled once with ``javac``
against the client classpath into a cache folder under the temp dir keyed by a
hash of the sources and the jar names, so every test after the first starts
the JVM straight away.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from kwire.compat_tests.external import end_process

REPO_ROOT = Path(__file__).resolve().parents[2]
JARS = REPO_ROOT.parent / "shared" / "jars"
CLIENT_JAR = "kafka-clients-4.0.0-SNAPSHOT.jar"
SOURCES = REPO_ROOT / "tests" / "java"

__all__ = ["JARS", "SOURCES", "java_available", "client_classpath", "compile_sources", "run_to_end",
           "start_java", "stop"]


def java_available() -> tuple[bool, str]:
    """(True, "") when the jars, ``java`` and ``javac`` are all here, else (False, why)."""
    if not (JARS / CLIENT_JAR).is_file():
        return False, f"no {CLIENT_JAR} in {JARS} (the shared jars folder next to the project)"
    for tool in ("java", "javac"):
        if shutil.which(tool) is None:
            return False, f"no `{tool}` on PATH (Debian: openjdk-17-jdk-headless)"
    return True, ""


def client_classpath(jars: Path = JARS) -> str:
    """The Java client and its runtime dependencies, as a ``-cp`` value."""
    return os.pathsep.join([str(jars / CLIENT_JAR), str(jars / "deps" / "*")])


def compile_sources(sources: Path = SOURCES, timeout: float = 120) -> Path:
    """Compile every ``*.java`` in ``sources`` and return the folder holding the classes.

    Cached in ``<tmp>/kwire-java-<hash>``; a compile goes to a scratch folder that is
    renamed into place, so concurrent callers never see half a build.  Raises
    ``RuntimeError`` with javac's output when compilation fails.
    """
    files = sorted(sources.glob("*.java"))
    if not files:
        raise FileNotFoundError(f"no .java files in {sources}")
    digest = hashlib.sha256()
    for f in files:
        digest.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    digest.update(client_classpath().encode())
    out = Path(tempfile.gettempdir()) / f"kwire-java-{digest.hexdigest()[:16]}"
    if out.is_dir():
        return out
    scratch = Path(tempfile.mkdtemp(prefix=out.name + ".", dir=out.parent))
    try:
        result = subprocess.run(["javac", "-nowarn", "-encoding", "UTF-8", "-cp", client_classpath(),
                                 "-d", str(scratch), *map(str, files)],
                                capture_output=True, text=True, timeout=timeout)
        if result.returncode != 0:
            raise RuntimeError(f"javac failed ({result.returncode}):\n{result.stdout}{result.stderr}")
        try:
            scratch.rename(out)
        except OSError:             # another process won the race: its build is the same
            pass
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return out


def start_java(main_class: str, *args: Any, sources: Path = SOURCES, jvm_args: tuple[str, ...] = (),
               **popen_kwargs: Any) -> subprocess.Popen:
    """Compile (if needed) and start ``main_class`` with ``args`` as a child process.

    ``popen_kwargs`` go to ``subprocess.Popen`` (``stdout=subprocess.PIPE``,
    ``stderr=<file>``...); text mode is the default.  The caller owns the process:
    end it with ``stop()`` in a ``finally``.
    """
    classes = compile_sources(sources)
    popen_kwargs.setdefault("text", True)
    command = ["java", f"-Djava.library.path={JARS / 'deps' / 'native'}", *jvm_args,
               "-cp", os.pathsep.join([str(classes), client_classpath()]), main_class, *map(str, args)]
    return subprocess.Popen(command, **popen_kwargs)


def run_to_end(main_class: str, *args: Any, stderr_path: Path, timeout: float = 60) -> tuple[str, int]:
    """Run ``main_class args`` to its end (stopped after ``timeout`` s) with stderr in
    ``stderr_path``; its (stdout, exit code)."""
    with open(stderr_path, "w") as stderr:
        proc = start_java(main_class, *args, stdout=subprocess.PIPE, stderr=stderr)
        try:
            out, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            stop(proc)
            out = proc.stdout.read()
        finally:
            stop(proc)
    return out, proc.returncode


def stop(proc: subprocess.Popen, timeout: float = 10) -> int:
    """Terminate ``proc`` (then kill it) if it still runs; return its exit code."""
    return end_process(proc, timeout)
