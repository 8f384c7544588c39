"""Client adapters that drive other programs: kcat (librdkafka 2.0.2 from Debian) and KafkaJS (node).

Every child process gets a timeout; a member process is ended by closing its
stdin (KafkaJS) or by SIGTERM to its own PID (kcat), then SIGKILL.
"""
from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import threading
from pathlib import Path

from .model import FETCH_TIMEOUT, Client, ClientError, Member, Rec, Skip, code_for_name

KAFKAJS_VERSION = "2.2.4"
KAFKAJS_SNAPPY_VERSION = "1.1.0"
RUNNER = Path(__file__).with_name("kafkajs_runner.js")


def cache_dir() -> Path:
    return Path(os.environ.get("KWIRE_COMPAT_CACHE", Path.home() / ".cache" / "kwire-compat"))


def _run(args, timeout, input_text=None) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(args, input=input_text, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise ClientError(None, f"{args[0]} timed out after {timeout:.0f}s", local=True) from exc


def call_json_tool(name: str, op: str, command: list[str], stdin: str, timeout: float, *,
                   reply_prefix: str = "{", env=None) -> dict:
    """Run one operation of an external client program that prints its outcome as the last
    JSON line starting with ``reply_prefix``; that reply.  Raises ClientError (local) when it
    times out or prints no reply."""
    try:
        res = subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired as exc:
        raise ClientError(None, f"{name} {op} timed out after {timeout}s", local=True) from exc
    lines = [line for line in res.stdout.splitlines() if line.startswith(reply_prefix)]
    if not lines:
        raise ClientError(None, f"{name} {op}: no result ({res.stderr.strip()[-200:]})", local=True)
    return json.loads(lines[-1])


def end_process(proc: subprocess.Popen, timeout: float = 10) -> int:
    """Terminate ``proc`` (then kill it) if it still runs; return its exit code."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
    return proc.returncode


class _PipeMember(Member):
    """A member in a child process; lines on its stdout/stderr update state."""

    def __init__(self, args, stdin_text=None, env=None):
        super().__init__()
        self.args, self.stdin_text, self.env = args, stdin_text, env
        self.proc: subprocess.Popen | None = None

    def run(self):
        self.proc = subprocess.Popen(self.args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, bufsize=1, env=self.env)
        if self.stdin_text:
            self.proc.stdin.write(self.stdin_text)
            self.proc.stdin.flush()
        err_reader = threading.Thread(target=self._read, args=(self.proc.stderr, self.on_stderr), daemon=True)
        err_reader.start()
        self._read(self.proc.stdout, self.on_stdout)

    @staticmethod
    def _read(stream, fn):
        for line in stream:
            fn(line.rstrip("\n"))

    def on_stdout(self, line):  # pragma: no cover - overridden
        pass

    def on_stderr(self, line):
        pass

    stop_by_stdin = True   # else SIGTERM (kcat ignores stdin while consuming)

    def stop(self, timeout: float = 15.0) -> None:
        self._stop.set()
        if self.proc is not None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
            if not self.stop_by_stdin:
                self.proc.terminate()
            try:
                self.proc.wait(timeout / 2)
            except subprocess.TimeoutExpired:
                end_process(self.proc)
        self._thread.join(timeout / 2)


class JsonLinesMember(_PipeMember):
    """A member process printing {"assigned": [...]} and {"record": {...}} lines (base64 values)."""

    def on_stdout(self, line):
        if not line.startswith("{"):
            return
        d = json.loads(line)
        if "assigned" in d:
            self.assigned = set(d["assigned"])
        elif "record" in d:
            r = d["record"]
            self.records.append(Rec(_unb64(r.get("value")), _unb64(r.get("key")),
                                    [(k, _unb64(v)) for k, v in r.get("headers", [])],
                                    r.get("timestamp"), r["partition"], r["offset"]))


# ----------------------------------------------------------------------------- kcat
class Kcat(Client):
    name = "kcat"
    per_record_headers = False   # -H applies to every message of one kcat run
    sets_timestamps = False      # kcat -P has no per-message timestamp
    has_admin = False

    @classmethod
    def library_version(cls):
        if shutil.which("kcat") is None:
            return None
        try:
            out = subprocess.run(["kcat", "-V"], capture_output=True, text=True, timeout=10).stdout
        except (OSError, subprocess.TimeoutExpired):
            return None
        m = re.search(r"Version (\S+) \(.*?librdkafka (\S+)", out)
        return f"kcat {m.group(1)} (librdkafka {m.group(2)})" if m else None

    def unavailable(self):
        if shutil.which("kcat") is None:
            return "kcat not installed (apt-get install kcat)"
        return None

    def _base(self):
        return ["kcat", "-b", self.bootstrap, "-X", "socket.timeout.ms=10000"]

    def produce(self, topic, recs, compression=None, idempotent=None):
        if any(r.timestamp is not None for r in recs):
            raise Skip("kcat cannot set record timestamps")
        groups: dict = {}
        for r in recs:   # one kcat run per (partition, headers) group, in order
            groups.setdefault((r.partition, tuple(r.headers)), []).append(r)
        for (partition, headers), rs in groups.items():
            args = self._base() + ["-P", "-t", topic, "-K", "\t", "-X", "message.timeout.ms=15000"]
            if partition is not None:
                args += ["-p", str(partition)]
            if compression:
                args += ["-z", compression]
            if idempotent:
                args += ["-X", "enable.idempotence=true"]
            for k, v in headers:
                args += ["-H", f"{k}={v.decode()}"]
            lines = "".join(f"{(r.key or b'').decode()}\t{r.value.decode()}\n" for r in rs)
            res = _run(args, 30, lines)
            if res.returncode != 0 or "ERROR" in res.stderr or "failed" in res.stderr.lower():
                raise ClientError(self._code(res.stderr), res.stderr.strip()[-200:])
        return None   # kcat does not report the offsets it was given

    @staticmethod
    def _code(stderr: str):
        for name in ("MSG_SIZE_TOO_LARGE", "TOPIC_EXCEPTION", "UNKNOWN_TOPIC_OR_PART", "OFFSET_OUT_OF_RANGE"):
            if name.lower().replace("_", " ") in stderr.lower().replace("_", " "):
                return code_for_name(name)
        low = stderr.lower()
        if "too large" in low:
            return 10
        if "out of range" in low:
            return 1
        if "invalid topic" in low or ("topic name" in low and "illegal" in low):
            return 17
        return None

    @staticmethod
    def _rec(d) -> Rec:
        h = d.get("headers") or []
        return Rec(None if d.get("payload") is None else d["payload"].encode(),
                   None if d.get("key") in (None, "") else d["key"].encode(),
                   [(h[i], h[i + 1].encode()) for i in range(0, len(h), 2)], d.get("ts"),
                   d.get("partition"), d.get("offset"))

    def fetch(self, topic, count, partitions=None, offset=None, reset="earliest", timeout=FETCH_TIMEOUT):
        out = []
        for p in partitions if partitions is not None else [None]:
            args = self._base() + ["-C", "-t", topic, "-J", "-e", "-o",
                                   "beginning" if offset is None else str(offset), "-c", str(count)]
            if reset == "none":
                args += ["-X", "topic.auto.offset.reset=error"]
            if p is not None:
                args += ["-p", str(p)]
            res = _run(args, timeout + 10)
            if res.returncode != 0:
                raise ClientError(self._code(res.stderr), res.stderr.strip()[-200:])
            out += [self._rec(json.loads(line)) for line in res.stdout.splitlines() if line.startswith("{")]
        return out

    def offset_for(self, topic, partition, spec):
        ts = {"earliest": -2, "latest": -1}.get(spec, spec)
        res = _run(self._base() + ["-Q", "-J", "-t", f"{topic}:{partition}:{ts}"], 20)
        if res.returncode != 0:
            raise ClientError(None, res.stderr.strip()[-200:])
        return json.loads(res.stdout)[topic][str(partition)]["offset"]

    def member(self, group, topic):
        client = self

        class M(_PipeMember):
            stop_by_stdin = False

            def on_stdout(self, line):
                if line.startswith("{"):
                    self.records.append(client._rec(json.loads(line)))

            def on_stderr(self, line):
                # "% Group g rebalanced (memberid ...): assigned: t [0], t [1]" / "revoked: ..."
                if "rebalanced" in line and "assigned:" in line:
                    part = line.split("assigned:", 1)[1]
                    self.assigned = {int(x.split("]")[0]) for x in part.split("[")[1:]}
                elif "rebalanced" in line and "revoked" in line:
                    self.assigned = set()

        # not "-o beginning": with -G that seeks every assignment to the start, ignoring commits
        args = self._base() + ["-G", group, "-J", "-u", "-X", "auto.offset.reset=earliest",
                               "-X", "heartbeat.interval.ms=300", "-X", "session.timeout.ms=10000", topic]
        return M(args).start()

    def consume_in_group(self, group, topic, n):
        args = self._base() + ["-G", group, "-J", "-X", "auto.offset.reset=earliest", "-c", str(n), topic]
        res = _run(args, FETCH_TIMEOUT + 10)
        if res.returncode != 0:
            raise ClientError(None, res.stderr.strip()[-200:])
        return [self._rec(json.loads(line)) for line in res.stdout.splitlines() if line.startswith("{")]


# ----------------------------------------------------------------------------- KafkaJS
def ensure_kafkajs(timeout: float = 180) -> tuple[Path | None, str | None]:
    """(node_modules dir, None) or (None, why not); installs kafkajs into the cache once."""
    if shutil.which("node") is None:
        return None, "node not installed"
    target = cache_dir() / "kafkajs"
    modules = target / "node_modules"
    if (modules / "kafkajs" / "package.json").exists():
        return modules, None
    if shutil.which("npm") is None:
        return None, "npm not installed (needed once to fetch kafkajs)"
    target.mkdir(parents=True, exist_ok=True)
    try:
        res = subprocess.run(["npm", "install", "--silent", "--no-audit", "--no-fund", "--prefix", str(target),
                              f"kafkajs@{KAFKAJS_VERSION}", f"kafkajs-snappy@{KAFKAJS_SNAPPY_VERSION}"],
                             capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"npm install kafkajs timed out after {timeout:.0f}s"
    if res.returncode != 0 or not (modules / "kafkajs").exists():
        return None, f"npm install kafkajs failed: {res.stderr.strip()[-150:]}"
    return modules, None


def _b64(b):
    return None if b is None else base64.b64encode(b).decode()


def _unb64(s):
    return None if s is None else base64.b64decode(s)


class KafkaJS(Client):
    name = "kafkajs"
    codecs = ("gzip", "snappy")   # lz4/zstd need native codec packages KafkaJS does not ship

    def __init__(self, bootstrap):
        super().__init__(bootstrap)
        self.modules, self.why = ensure_kafkajs()

    @classmethod
    def library_version(cls):
        package = cache_dir() / "kafkajs" / "node_modules" / "kafkajs" / "package.json"
        try:
            version = json.loads(package.read_text())["version"]
        except (OSError, ValueError, KeyError):
            return None
        node = shutil.which("node") and subprocess.run(["node", "--version"], capture_output=True,
                                                       text=True, timeout=10).stdout.strip()
        return f"KafkaJS {version}" + (f" (node {node})" if node else "")

    def unavailable(self):
        return self.why

    def _env(self):
        return {**os.environ, "NODE_PATH": str(self.modules)}

    def _call(self, op, timeout=40, **cmd):
        cmd.update(op=op, bootstrap=self.bootstrap)
        reply = call_json_tool("kafkajs", op, ["node", str(RUNNER)], json.dumps(cmd) + "\n", timeout,
                               env=self._env())
        if not reply["ok"]:
            err = reply["error"]
            code = err.get("code") or code_for_name(err.get("type"))
            raise ClientError(code, f"{err.get('type')}: {err.get('message')}", local=code is None)
        return reply["result"]

    @staticmethod
    def _enc(r: Rec) -> dict:
        return {"key": _b64(r.key), "value": _b64(r.value), "timestamp": r.timestamp, "partition": r.partition,
                "headers": [[k, _b64(v)] for k, v in r.headers]}

    @staticmethod
    def _dec(d) -> Rec:
        return Rec(_unb64(d["value"]), _unb64(d["key"]), [(k, _unb64(v)) for k, v in d["headers"]],
                   d["timestamp"], d["partition"], d["offset"])

    def produce(self, topic, recs, compression=None, idempotent=None):
        if compression and compression not in self.codecs:
            raise Skip(f"KafkaJS has no built-in {compression} codec")
        bases = self._call("produce", topic=topic, records=[self._enc(r) for r in recs],
                           compression=compression, idempotent=bool(idempotent))
        # one send() = one batch per partition, messages in order: offsets follow the base offset
        base = {p: off for p, off in bases}
        seen: dict[int, int] = {}
        out = []
        if all(r.partition is not None for r in recs):
            for r in recs:
                out.append((r.partition, base[r.partition] + seen.get(r.partition, 0)))
                seen[r.partition] = seen.get(r.partition, 0) + 1
            return out
        return None

    def fetch(self, topic, count, partitions=None, offset=None, reset="earliest", timeout=FETCH_TIMEOUT):
        if offset is not None or reset != "earliest":
            raise Skip("KafkaJS consumers always run in a group and reset offsets themselves")
        return [self._dec(d) for d in self._call("fetch", topic=topic, count=count, partitions=partitions,
                                                timeoutMs=int(timeout * 1000))]

    def offset_for(self, topic, partition, spec):
        return self._call("offsets", topic=topic, partition=partition, spec=spec)

    def member(self, group, topic):
        cmd = json.dumps({"op": "member", "bootstrap": self.bootstrap, "group": group, "topic": topic})
        return JsonLinesMember(["node", str(RUNNER)], stdin_text=cmd + "\n", env=self._env()).start()

    def consume_in_group(self, group, topic, n):
        return [self._dec(d) for d in self._call("consume_in_group", group=group, topic=topic, count=n,
                                                timeoutMs=int(FETCH_TIMEOUT * 1000))]

    def create_topic(self, name, partitions, configs=None):
        self._call("create", topic=name, partitions=partitions, configs=configs or {})

    def describe_topic(self, name):
        parts, values = self._call("describe", topic=name)
        return parts, values

    def delete_topic(self, name):
        self._call("delete", topic=name)

    def list_topics(self):
        return set(self._call("list"))
