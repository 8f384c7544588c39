"""Client adapters for the Python clients: kafka-python, confluent-kafka, aiokafka.

Each adapter exposes the same small set of operations (produce, fetch,
offset lookups, group members, commit/resume, admin) so a scenario is written
once and run through every client.  Operations that a client cannot express
raise ``Skip`` with the reason.  Every wait is bounded.
"""
from __future__ import annotations

import asyncio
import sys
import time

from .model import FETCH_TIMEOUT, Client, ClientError, Member, Rec, missing_module

# ----------------------------------------------------------------------------- kafka-python
class KafkaPython(Client):
    name = "kafka-python"

    @classmethod
    def library_version(cls):
        import kafka
        return f"kafka-python {kafka.__version__}"

    def _errors(self, exc) -> ClientError:
        code = getattr(exc, "errno", None)
        return ClientError(code, f"{type(exc).__name__}", local=code is None)

    def produce(self, topic, recs, compression=None, idempotent=None):
        from kafka import KafkaProducer
        from kafka.errors import KafkaError

        opts = {} if idempotent is None else {"enable_idempotence": idempotent}
        if idempotent:
            opts["acks"] = "all"
        p = KafkaProducer(bootstrap_servers=self.bootstrap, compression_type=compression, linger_ms=5,
                          max_block_ms=10000, request_timeout_ms=10000, retries=3, **opts)
        try:
            futures = [p.send(topic, key=r.key, value=r.value, partition=r.partition,
                              headers=r.headers or None, timestamp_ms=r.timestamp) for r in recs]
            p.flush(20)
            return [(m.partition, m.offset) for m in (f.get(timeout=10) for f in futures)]
        except KafkaError as exc:
            raise self._errors(exc) from exc
        finally:
            p.close(5)

    def _consumer(self, **kw):
        from kafka import KafkaConsumer

        kw.setdefault("enable_auto_commit", False)
        return KafkaConsumer(bootstrap_servers=self.bootstrap, request_timeout_ms=10000, **kw)

    def fetch(self, topic, count, partitions=None, offset=None, reset="earliest", timeout=FETCH_TIMEOUT):
        from kafka import TopicPartition
        from kafka.errors import KafkaError

        c = self._consumer(auto_offset_reset=reset)
        try:
            parts = partitions if partitions is not None else sorted(c.partitions_for_topic(topic) or [0])
            tps = [TopicPartition(topic, p) for p in parts]
            c.assign(tps)
            for tp in tps:
                c.seek(tp, offset) if offset is not None else c.seek_to_beginning(tp)
            out: list[Rec] = []
            deadline = time.monotonic() + timeout
            while len(out) < count and time.monotonic() < deadline:
                for tp, msgs in c.poll(200).items():
                    out += [Rec(m.value, m.key, [(k, v) for k, v in (m.headers or [])], m.timestamp,
                                m.partition, m.offset) for m in msgs]
            return out
        except KafkaError as exc:
            raise self._errors(exc) from exc
        finally:
            c.close()

    def offset_for(self, topic, partition, spec):
        from kafka import TopicPartition

        c = self._consumer()
        tp = TopicPartition(topic, partition)
        try:
            if spec == "earliest":
                return c.beginning_offsets([tp])[tp]
            if spec == "latest":
                return c.end_offsets([tp])[tp]
            found = c.offsets_for_times({tp: spec})[tp]
            return -1 if found is None else found.offset
        finally:
            c.close()

    def member(self, group, topic):
        from .external import JsonLinesMember   # a process per member: see member_proc.py

        return JsonLinesMember([sys.executable, "-m", "kwire.compat_tests.member_proc",
                                self.bootstrap, group, topic]).start()

    def consume_in_group(self, group, topic, n):
        from kafka import TopicPartition
        from kafka.structs import OffsetAndMetadata

        c = self._consumer(group_id=group, auto_offset_reset="earliest", session_timeout_ms=10000)
        c.subscribe([topic])
        out: list[Rec] = []
        try:
            deadline = time.monotonic() + FETCH_TIMEOUT
            while len(out) < n and time.monotonic() < deadline:
                for tp, msgs in c.poll(200).items():
                    out += [Rec(m.value, m.key, partition=m.partition, offset=m.offset) for m in msgs]
            out = out[:n]
            if out:
                c.commit({TopicPartition(topic, 0): OffsetAndMetadata(out[-1].offset + 1, "", -1)})
            return out
        finally:
            c.close()

    def _admin(self):
        from kafka.admin import KafkaAdminClient

        return KafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=10000)

    def create_topic(self, name, partitions, configs=None):
        from kafka.admin import NewTopic
        from kafka.errors import KafkaError

        a = self._admin()
        try:
            a.create_topics([NewTopic(name, partitions, 1, topic_configs=configs or {})])
        except KafkaError as exc:
            raise self._errors(exc) from exc
        finally:
            a.close()

    def describe_topic(self, name):
        from kafka.admin import ConfigResource, ConfigResourceType

        a = self._admin()
        try:
            parts = len(a.describe_topics([name])[0]["partitions"])
            cfg = a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, name)])
            values = {k: v["value"] for k, v in cfg["topic"][name].items()}
            return parts, values
        finally:
            a.close()

    def delete_topic(self, name):
        from kafka.errors import KafkaError

        a = self._admin()
        try:
            a.delete_topics([name])
        except KafkaError as exc:
            raise self._errors(exc) from exc
        finally:
            a.close()

    def list_topics(self):
        a = self._admin()
        try:
            return set(a.list_topics())
        finally:
            a.close()


# ----------------------------------------------------------------------------- confluent-kafka
class Confluent(Client):
    name = "confluent-kafka"
    requires = "confluent_kafka"

    @classmethod
    def library_version(cls):
        if missing_module(cls.requires):
            return None
        import confluent_kafka
        return f"confluent-kafka {confluent_kafka.__version__} (librdkafka {confluent_kafka.libversion()[0]})"

    def _error(self, err) -> ClientError:
        code = err.code()
        return ClientError(code if code > 0 else None, f"{err.name()}: {err.str()}", local=code <= 0)

    def produce(self, topic, recs, compression=None, idempotent=None):
        from confluent_kafka import Producer

        conf = {"bootstrap.servers": self.bootstrap, "linger.ms": 5, "message.timeout.ms": 15000,
                "compression.type": compression or "none"}
        if idempotent is not None:
            conf["enable.idempotence"] = idempotent
        p = Producer(conf)
        results: list = [None] * len(recs)

        def done(i):
            def cb(err, msg):
                results[i] = err if err is not None else (msg.partition(), msg.offset())
            return cb
        for i, r in enumerate(recs):
            kw = {"partition": r.partition} if r.partition is not None else {}
            if r.timestamp is not None:
                kw["timestamp"] = r.timestamp
            p.produce(topic, r.value, r.key, headers=r.headers or None, on_delivery=done(i), **kw)
        left = p.flush(20)
        if left:
            raise ClientError(None, f"{left} messages not delivered in 20 s")
        for res in results:
            if not isinstance(res, tuple):
                raise self._error(res)
        return results

    def _consumer(self, **extra):
        from confluent_kafka import Consumer

        conf = {"bootstrap.servers": self.bootstrap, "group.id": extra.pop("group", "compat-assign"),
                "enable.auto.commit": False, "auto.offset.reset": "earliest",
                "enable.partition.eof": False, "isolation.level": "read_uncommitted"}
        conf.update(extra)
        return Consumer(conf)

    def fetch(self, topic, count, partitions=None, offset=None, reset="earliest", timeout=FETCH_TIMEOUT):
        from confluent_kafka import OFFSET_BEGINNING, TopicPartition

        c = self._consumer(**{"auto.offset.reset": "error" if reset == "none" else reset})
        try:
            if partitions is None:
                md = c.list_topics(topic, timeout=10)
                partitions = sorted(md.topics[topic].partitions)
            c.assign([TopicPartition(topic, p, OFFSET_BEGINNING if offset is None else offset)
                      for p in partitions])
            out: list[Rec] = []
            deadline = time.monotonic() + timeout
            while len(out) < count and time.monotonic() < deadline:
                m = c.poll(0.2)
                if m is None:
                    continue
                if m.error():
                    raise self._broker_or_local(m.error())
                out.append(Rec(m.value(), m.key(), [(k, v) for k, v in (m.headers() or [])],
                               m.timestamp()[1], m.partition(), m.offset()))
            return out
        finally:
            c.close()

    def _broker_or_local(self, err):
        # librdkafka reports an offset reset failure as _AUTO_OFFSET_RESET with the broker's reason
        if err.name() == "_AUTO_OFFSET_RESET" and "out of range" in err.str().lower():
            return ClientError(1, f"{err.name()}: {err.str()}")
        return self._error(err)

    def offset_for(self, topic, partition, spec):
        from confluent_kafka import TopicPartition

        c = self._consumer()
        try:
            if spec in ("earliest", "latest"):
                low, high = c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
                return low if spec == "earliest" else high
            return c.offsets_for_times([TopicPartition(topic, partition, spec)], timeout=10)[0].offset
        finally:
            c.close()

    def member(self, group, topic):
        client = self

        class M(Member):
            def run(self):
                def on_assign(c, parts):
                    self.assigned = {p.partition for p in parts}

                def on_revoke(c, parts):
                    self.assigned = set()
                c = client._consumer(group=group, **{"enable.auto.commit": True,
                                                     "heartbeat.interval.ms": 300,
                                                     "session.timeout.ms": 10000})
                c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
                try:
                    while not self.stopping():
                        m = c.poll(0.1)
                        if m is not None and not m.error():
                            self.records.append(Rec(m.value(), m.key(), partition=m.partition(),
                                                    offset=m.offset()))
                finally:
                    c.close()
        return M().start()

    def consume_in_group(self, group, topic, n):
        from confluent_kafka import TopicPartition

        c = self._consumer(group=group, **{"session.timeout.ms": 10000})
        c.subscribe([topic])
        out: list[Rec] = []
        try:
            deadline = time.monotonic() + FETCH_TIMEOUT
            while len(out) < n and time.monotonic() < deadline:
                m = c.poll(0.2)
                if m is not None and not m.error():
                    out.append(Rec(m.value(), m.key(), partition=m.partition(), offset=m.offset()))
            if out:
                c.commit(offsets=[TopicPartition(topic, 0, out[-1].offset + 1)], asynchronous=False)
            return out
        finally:
            c.close()

    def _admin(self):
        from confluent_kafka.admin import AdminClient

        return AdminClient({"bootstrap.servers": self.bootstrap})

    def _wait(self, admin, futures):
        from confluent_kafka import KafkaException

        for f in futures.values():
            try:
                f.result(timeout=15)
            except KafkaException as exc:
                raise self._error(exc.args[0]) from exc

    def create_topic(self, name, partitions, configs=None):
        from confluent_kafka.admin import NewTopic

        try:
            topic = NewTopic(name, num_partitions=partitions, replication_factor=1, config=configs or {})
        except (ValueError, TypeError) as exc:
            raise ClientError(None, f"rejected locally: {exc}", local=True) from exc
        a = self._admin()
        self._wait(a, a.create_topics([topic], request_timeout=15))

    def describe_topic(self, name):
        from confluent_kafka.admin import ConfigResource

        a = self._admin()   # keep the handle alive until its futures resolve
        md = a.list_topics(name, timeout=10)
        res = ConfigResource(ConfigResource.Type.TOPIC, name)
        cfg = a.describe_configs([res], request_timeout=15)[res].result(timeout=15)
        return len(md.topics[name].partitions), {k: v.value for k, v in cfg.items()}

    def delete_topic(self, name):
        a = self._admin()
        self._wait(a, a.delete_topics([name], request_timeout=15))

    def list_topics(self):
        return set(self._admin().list_topics(timeout=10).topics)


# ----------------------------------------------------------------------------- aiokafka
class AioKafka(Client):
    name = "aiokafka"
    requires = "aiokafka"

    @classmethod
    def library_version(cls):
        if missing_module(cls.requires):
            return None
        import aiokafka
        return f"aiokafka {aiokafka.__version__}"

    def _run(self, coro, timeout=30):
        async def bounded():
            return await asyncio.wait_for(coro, timeout)
        return asyncio.run(bounded())

    def _errors(self, exc) -> ClientError:
        code = getattr(exc, "errno", None)
        return ClientError(code, type(exc).__name__, local=code is None)

    def produce(self, topic, recs, compression=None, idempotent=None):
        from aiokafka import AIOKafkaProducer
        from aiokafka.errors import KafkaError

        async def main():
            p = AIOKafkaProducer(bootstrap_servers=self.bootstrap, compression_type=compression,
                                 enable_idempotence=bool(idempotent), linger_ms=5,
                                 request_timeout_ms=10000)
            await p.start()
            try:
                futs = [await p.send(topic, r.value, key=r.key, partition=r.partition,
                                     timestamp_ms=r.timestamp, headers=r.headers or None) for r in recs]
                return [((m := await f).partition, m.offset) for f in futs]
            finally:
                await p.stop()
        try:
            return self._run(main())
        except KafkaError as exc:
            raise self._errors(exc) from exc

    def fetch(self, topic, count, partitions=None, offset=None, reset="earliest", timeout=FETCH_TIMEOUT):
        from aiokafka import AIOKafkaConsumer, TopicPartition
        from aiokafka.errors import KafkaError

        async def main():
            c = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, enable_auto_commit=False,
                                 auto_offset_reset=reset, request_timeout_ms=10000)
            await c.start()
            try:
                parts = partitions if partitions is not None else sorted(c.partitions_for_topic(topic) or ())
                if not parts:
                    await c._client.force_metadata_update()
                    parts = sorted(c.partitions_for_topic(topic) or [0])
                tps = [TopicPartition(topic, p) for p in parts]
                c.assign(tps)
                for tp in tps:
                    c.seek(tp, offset) if offset is not None else await c.seek_to_beginning(tp)
                out: list[Rec] = []
                deadline = time.monotonic() + timeout
                while len(out) < count and time.monotonic() < deadline:
                    batch = await c.getmany(timeout_ms=200)
                    for tp, msgs in batch.items():
                        out += [Rec(m.value, m.key, list(m.headers or ()), m.timestamp, m.partition, m.offset)
                                for m in msgs]
                return out
            finally:
                await c.stop()
        try:
            return self._run(main())
        except KafkaError as exc:
            raise self._errors(exc) from exc

    def offset_for(self, topic, partition, spec):
        from aiokafka import AIOKafkaConsumer, TopicPartition

        async def main():
            c = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, enable_auto_commit=False)
            await c.start()
            tp = TopicPartition(topic, partition)
            try:
                if spec == "earliest":
                    return (await c.beginning_offsets([tp]))[tp]
                if spec == "latest":
                    return (await c.end_offsets([tp]))[tp]
                found = (await c.offsets_for_times({tp: spec}))[tp]
                return -1 if found is None else found.offset
            finally:
                await c.stop()
        return self._run(main())

    def member(self, group, topic):
        from aiokafka import AIOKafkaConsumer
        from aiokafka.abc import ConsumerRebalanceListener

        client = self

        class M(Member):
            def run(self):
                member = self

                class Listener(ConsumerRebalanceListener):
                    async def on_partitions_revoked(self, revoked):
                        member.assigned = set()

                    async def on_partitions_assigned(self, assigned):
                        member.assigned = {tp.partition for tp in assigned}

                async def main():
                    c = AIOKafkaConsumer(bootstrap_servers=client.bootstrap, group_id=group,
                                         auto_offset_reset="earliest", heartbeat_interval_ms=300,
                                         session_timeout_ms=10000)
                    c.subscribe([topic], listener=Listener())
                    await c.start()
                    try:
                        while not self.stopping():
                            batch = await c.getmany(timeout_ms=100)
                            for tp, msgs in batch.items():
                                self.records += [Rec(m.value, m.key, partition=m.partition, offset=m.offset)
                                                 for m in msgs]
                    finally:
                        await c.stop()
                asyncio.run(main())
        return M().start()

    def consume_in_group(self, group, topic, n):
        from aiokafka import AIOKafkaConsumer, TopicPartition

        async def main():
            c = AIOKafkaConsumer(topic, bootstrap_servers=self.bootstrap, group_id=group,
                                 enable_auto_commit=False, auto_offset_reset="earliest")
            await c.start()
            out: list[Rec] = []
            try:
                deadline = time.monotonic() + FETCH_TIMEOUT
                while len(out) < n and time.monotonic() < deadline:
                    for tp, msgs in (await c.getmany(timeout_ms=200)).items():
                        out += [Rec(m.value, m.key, partition=m.partition, offset=m.offset) for m in msgs]
                out = out[:n]
                if out:
                    await c.commit({TopicPartition(topic, 0): out[-1].offset + 1})
                return out
            finally:
                await c.stop()
        return self._run(main())

    async def _with_admin(self, fn):
        from aiokafka.admin import AIOKafkaAdminClient

        a = AIOKafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=10000)
        await a.start()
        try:
            return await fn(a)
        finally:
            await a.close()

    @staticmethod
    def _raise_topic_errors(resp):
        from aiokafka.errors import for_code

        for entry in getattr(resp, "topic_errors", None) or getattr(resp, "topics", ()):
            code = entry[1]
            if code:
                raise ClientError(code, for_code(code).__name__)

    def create_topic(self, name, partitions, configs=None):
        from aiokafka.admin import NewTopic

        async def fn(a):
            return await a.create_topics([NewTopic(name, partitions, 1, topic_configs=configs or {})])
        self._raise_topic_errors(self._run(self._with_admin(fn)))

    def describe_topic(self, name):
        from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

        async def fn(a):
            topics = await a.describe_topics([name])
            cfg = await a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, name)])
            return topics, cfg
        topics, cfg = self._run(self._with_admin(fn))
        parts = len(topics[0]["partitions"])
        values = {}
        for resp in cfg:
            for res in resp.resources:
                for entry in res[4]:
                    values[entry[0]] = entry[1]
        return parts, values

    def delete_topic(self, name):
        async def fn(a):
            return await a.delete_topics([name])
        resp = self._run(self._with_admin(fn))
        for entry in getattr(resp, "topic_error_codes", ()):
            if entry[1]:
                from aiokafka.errors import for_code
                raise ClientError(entry[1], for_code(entry[1]).__name__)

    def list_topics(self):
        async def fn(a):
            return await a.list_topics()
        return set(self._run(self._with_admin(fn)))
