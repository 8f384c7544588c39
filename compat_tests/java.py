"""The `java` column: Apache Kafka's Java client through ``java/CompatClient.java``.

The jars are not shipped with kwire.  They are looked for in ``$KWIRE_COMPAT_JAVA_JARS``
(``kwire compat --java-jars DIR`` sets it), then in ``../shared/jars`` next to the project
root (a clone's layout); the folder holds ``kafka-clients-*.jar`` and its runtime in
``deps/`` (``deps/native`` for zstd-jni's library).  The source is compiled once with
``javac`` into ``<cache>/java-<hash>`` (``KWIRE_COMPAT_CACHE``, default
``~/.cache/kwire-compat``); every operation then runs in a JVM of its own, bounded.
"""
from __future__ import annotations

import base64
import glob
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from .external import JsonLinesMember, cache_dir, call_json_tool
from .model import FETCH_TIMEOUT, Client, ClientError, Rec

SOURCES = Path(__file__).with_name("java")
MAIN = "CompatClient"
JARS_ENV = "KWIRE_COMPAT_JAVA_JARS"


def jars_dir() -> Path:
    """Where the Java client's jars are expected (they may be absent)."""
    if os.environ.get(JARS_ENV):
        return Path(os.environ[JARS_ENV]).resolve()
    return Path(__file__).resolve().parents[1].parent / "shared" / "jars"


def client_jar(jars: Path) -> Path | None:
    found = sorted(glob.glob(str(jars / "kafka-clients-*.jar")))
    return Path(found[-1]) if found else None


def unavailable() -> str | None:
    """None when the Java client can run here, else why not."""
    jars = jars_dir()
    if client_jar(jars) is None:
        return (f"no kafka-clients-*.jar in {jars} (give the jars folder with --java-jars "
                f"or ${JARS_ENV})")
    for tool in ("java", "javac"):
        if shutil.which(tool) is None:
            return f"no `{tool}` on PATH (Debian: openjdk-17-jdk-headless)"
    return None


def classpath(jars: Path) -> str:
    return os.pathsep.join([str(client_jar(jars)), str(jars / "deps" / "*")])


def compile_client(timeout: float = 180) -> Path:
    """Compile ``java/*.java`` against the client (cached by a hash of sources and jars) and
    return the classes folder.  Raises ClientError with javac's output on failure."""
    jars = jars_dir()
    files = sorted(SOURCES.glob("*.java"))
    digest = hashlib.sha256(classpath(jars).encode())
    for f in files:
        digest.update(f.name.encode() + b"\0" + f.read_bytes())
    out = cache_dir() / f"java-{digest.hexdigest()[:16]}"
    if out.is_dir():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=out.name + ".", dir=out.parent))
    try:
        res = subprocess.run(["javac", "-nowarn", "-encoding", "UTF-8", "-cp", classpath(jars),
                              "-d", str(scratch), *map(str, files)],
                             capture_output=True, text=True, timeout=timeout)
        if res.returncode != 0:
            raise ClientError(None, f"javac failed: {(res.stdout + res.stderr)[-300:]}", local=True)
        try:
            scratch.rename(out)
        except OSError:        # another worker compiled the same sources first
            pass
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return out


def java_command(*args) -> list[str]:
    jars = jars_dir()
    classes = compile_client()
    return ["java", f"-Djava.library.path={jars / 'deps' / 'native'}", "-Xshare:auto",
            "-XX:TieredStopAtLevel=1", "-cp", os.pathsep.join([str(classes), classpath(jars)]),
            MAIN, *map(str, args)]


def _b64(b: bytes | None) -> str:
    return "-" if b is None else base64.b64encode(b).decode()


def _line(r: Rec) -> str:
    headers = ",".join(f"{k}={_b64(v)}" for k, v in r.headers)
    return "\t".join([str(-1 if r.partition is None else r.partition),
                      str(-1 if r.timestamp is None else r.timestamp), _b64(r.key), _b64(r.value), headers])


def _rec(d: dict) -> Rec:
    def un(s):
        return None if s is None else base64.b64decode(s)
    return Rec(un(d["value"]), un(d["key"]), [(k, un(v)) for k, v in d["headers"]], d["timestamp"],
               d["partition"], d["offset"])


class JavaClient(Client):
    name = "java"

    @classmethod
    def library_version(cls):
        jar = client_jar(jars_dir())
        if jar is None:
            return None
        return "Apache Kafka Java client " + jar.name[len("kafka-clients-"):-len(".jar")]

    def unavailable(self):
        return unavailable()

    def _call(self, op, *args, stdin="", timeout=45):
        reply = call_json_tool("java", op, java_command(op, self.bootstrap, *args), stdin, timeout,
                               reply_prefix='{"ok"')
        if not reply["ok"]:
            code = reply["code"]
            raise ClientError(code, f"{reply['type']}: {reply['message']}", local=code is None)
        return reply["result"]

    def produce(self, topic, recs, compression=None, idempotent=None):
        flag = "default" if idempotent is None else str(bool(idempotent)).lower()
        placed = self._call("produce", topic, compression or "none", flag,
                            stdin="".join(_line(r) + "\n" for r in recs))
        return [tuple(x) for x in placed]

    def fetch(self, topic, count, partitions=None, offset=None, reset="earliest", timeout=FETCH_TIMEOUT):
        parts = "all" if partitions is None else ",".join(map(str, partitions))
        got = self._call("fetch", topic, count, parts, -1 if offset is None else offset, reset,
                         int(timeout * 1000), timeout=timeout + 30)
        return [_rec(d) for d in got]

    def offset_for(self, topic, partition, spec):
        return self._call("offset", topic, partition, spec)

    def member(self, group, topic):
        return JsonLinesMember(java_command("member", self.bootstrap, group, topic)).start()

    def consume_in_group(self, group, topic, n):
        return [_rec(d) for d in self._call("consume_in_group", group, topic, n, timeout=FETCH_TIMEOUT + 30)]

    def create_topic(self, name, partitions, configs=None):
        self._call("create", name, partitions, *(f"{k}={v}" for k, v in (configs or {}).items()))

    def describe_topic(self, name):
        parts, values = self._call("describe", name)
        return parts, values

    def delete_topic(self, name):
        self._call("delete", name)

    def list_topics(self):
        return set(self._call("list"))
