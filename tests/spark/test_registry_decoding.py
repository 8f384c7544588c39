"""format("kwire-kafka") with ``schema.registry.url``: records written by confluent-kafka's Avro,
JSON Schema and Protobuf serializers against the broker's built-in Schema Registry come back
as ``value_decoded`` structs next to Spark's Kafka columns; a record that is not
Confluent-framed, or names a schema the registry does not have, has a null decode and a
reason.  The type mappings themselves are checked first, without Spark or a registry."""
import datetime as dt
import decimal
import json
import time
import uuid

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, timestamp_pb2
from google.protobuf.message_factory import GetMessageClass

from kwire.spark.conform import DecodeFailure, conform
from kwire.spark.decoding import message_indexes, message_to_python, split_frame
from kwire.spark.kafka_io import subscription_strategy
from kwire.spark.registry import resolve_specs, wanted
from kwire.spark.schema_types import avro_to_spark, json_schema_to_spark, protobuf_to_spark
from kwire.spark.source import NAME
from tests.support.broker import BrokerProcess, free_port, wait_port

from .helpers import create_topic, produce

KAFKA_COLUMNS = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
F = descriptor_pb2.FieldDescriptorProto
UNKNOWN_ID = b"\x00\x00\x0f\x42\x3f" + b"payload"     # framed, schema id 999999

ORDER = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "string"},
    {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
    {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID"]}},
    {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "lines", "type": {"type": "array", "items": {"type": "record", "name": "Line", "fields": [
        {"name": "sku", "type": "string"}, {"name": "qty", "type": "int"}]}}},
    {"name": "attrs", "type": {"type": "map", "values": "long"}},
    {"name": "note", "type": ["null", "string"], "default": None},
]}
ORDER_SPARK = ("struct<id:string,amount:decimal(10,2),status:string,ts:timestamp,day:date,"
               "lines:array<struct<sku:string,qty:int>>,attrs:map<string,bigint>,note:string>")
PERSON = {"type": "object", "properties": {
    "name": {"type": "string"}, "age": {"type": "integer"}, "score": {"type": "number"},
    "vip": {"type": "boolean"}, "tags": {"type": "array", "items": {"type": "string"}},
    "address": {"type": "object", "properties": {"city": {"type": "string"}}}}, "required": ["name"]}


def order_proto(package: str) -> descriptor_pb2.FileDescriptorProto:
    """message Order { string id; int64 qty; repeated string tags; Item item; Status status;
    map<string, int32> attrs; google.protobuf.Timestamp created; Order parent (recursive) }"""
    fdp = descriptor_pb2.FileDescriptorProto(name=f"{package}/order.proto", package=package, syntax="proto3",
                                             dependency=["google/protobuf/timestamp.proto"])
    order = fdp.message_type.add(name="Order")
    item = order.nested_type.add(name="Item")
    item.field.add(name="sku", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    entry = order.nested_type.add(name="AttrsEntry", options=descriptor_pb2.MessageOptions(map_entry=True))
    entry.field.add(name="key", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=F.TYPE_INT32, label=F.LABEL_OPTIONAL)
    status = order.enum_type.add(name="Status")
    status.value.add(name="NEW", number=0)
    status.value.add(name="PAID", number=1)
    for name, number, kind, label, type_name in (
            ("id", 1, F.TYPE_STRING, F.LABEL_OPTIONAL, None), ("qty", 2, F.TYPE_INT64, F.LABEL_OPTIONAL, None),
            ("tags", 3, F.TYPE_STRING, F.LABEL_REPEATED, None),
            ("item", 4, F.TYPE_MESSAGE, F.LABEL_OPTIONAL, f".{package}.Order.Item"),
            ("status", 5, F.TYPE_ENUM, F.LABEL_OPTIONAL, f".{package}.Order.Status"),
            ("attrs", 6, F.TYPE_MESSAGE, F.LABEL_REPEATED, f".{package}.Order.AttrsEntry"),
            ("created", 7, F.TYPE_MESSAGE, F.LABEL_OPTIONAL, ".google.protobuf.Timestamp"),
            ("parent", 8, F.TYPE_MESSAGE, F.LABEL_OPTIONAL, f".{package}.Order")):
        order.field.add(name=name, number=number, type=kind, label=label, type_name=type_name)
    return fdp


def order_class(package: str):
    pool = descriptor_pool.DescriptorPool()
    pool.Add(descriptor_pb2.FileDescriptorProto.FromString(timestamp_pb2.DESCRIPTOR.serialized_pb))
    pool.Add(order_proto(package))
    return GetMessageClass(pool.FindMessageTypeByName(f"{package}.Order"))


# -- the mappings, without Spark or a registry ------------------------------------------------

def test_schema_type_mappings_and_conform():
    t = avro_to_spark(ORDER)
    assert t.simpleString() == ORDER_SPARK
    assert [f.nullable for f in t.fields] == [False] * 7 + [True]
    mixed = avro_to_spark({"type": "record", "name": "U", "fields": [
        {"name": "f", "type": {"type": "fixed", "name": "Two", "size": 2}},
        {"name": "n", "type": ["int", "long"]}, {"name": "x", "type": ["null", "string", "Two"]},
        {"name": "t", "type": {"type": "long", "logicalType": "local-timestamp-micros"}}]})
    assert mixed.simpleString() == ("struct<f:binary,n:bigint,x:struct<member0:string,member1:binary>,"
                                    "t:timestamp_ntz>")
    assert conform({"x": b"ab", "n": 3}, mixed) == {"f": None, "n": 3, "x": {"member0": None, "member1": b"ab"},
                                                    "t": None}
    with pytest.raises(ValueError, match="recursive"):
        avro_to_spark({"type": "record", "name": "Node", "fields": [{"name": "next", "type": ["null", "Node"]}]})
    with pytest.raises(ValueError, match="not defined"):
        avro_to_spark({"type": "record", "name": "A", "fields": [{"name": "b", "type": "shop.B"}]})
    assert avro_to_spark({"type": "record", "name": "A", "fields": [{"name": "b", "type": "shop.B"}]},
                         [{"type": "record", "name": "B", "namespace": "shop", "fields": []}]
                         ).simpleString() == "struct<b:struct<>>"

    person = json_schema_to_spark({**PERSON, "properties": {
        **PERSON["properties"], "ref": {"$ref": "#/$defs/Ref"}, "maybe": {"type": ["integer", "null"]},
        "either": {"anyOf": [{"type": "null"}, {"type": "boolean"}]}, "any": {}},
        "$defs": {"Ref": {"type": "object", "additionalProperties": {"type": "number"}}}})
    assert person.simpleString() == (
        "struct<name:string,age:bigint,score:double,vip:boolean,tags:array<string>,"
        "address:struct<city:string>,ref:map<string,double>,maybe:bigint,either:boolean,any:string>")
    assert [f.name for f in person.fields if not f.nullable] == ["name"]
    assert conform({"name": "ada", "age": 3, "score": 1, "any": {"a": [1]}, "ref": {"k": 2}}, person) == {
        "name": "ada", "age": 3, "score": 1.0, "vip": None, "tags": None, "address": None,
        "ref": [("k", 2.0)], "maybe": None, "either": None, "any": '{"a":[1]}'}
    with pytest.raises(DecodeFailure, match=r"field address\.city: expected string"):
        conform({"address": {"city": b"x"}}, person)
    with pytest.raises(DecodeFailure, match="does not fit"):
        conform({"amount": decimal.Decimal("123456789.5")}, t)

    package = f"unit_{uuid.uuid4().hex[:8]}"
    Order = order_class(package)
    assert protobuf_to_spark(Order.DESCRIPTOR).simpleString() == (
        "struct<id:string,qty:bigint,tags:array<string>,item:struct<sku:string>,status:string,"
        "attrs:map<string,int>,created:timestamp>")      # the recursive `parent` is left out
    msg = Order(id="o1", qty=2, tags=["a"], status=1, attrs={"k": 5})
    msg.created.FromSeconds(1_700_000_000)
    assert message_to_python(msg) == {
        "id": "o1", "qty": 2, "tags": ["a"], "item": None, "status": "PAID", "attrs": {"k": 5},
        "created": dt.datetime(2023, 11, 14, 22, 13, 20, tzinfo=dt.timezone.utc), "parent": None}

    assert split_frame(b"\x00\x00\x00\x00\x07abc")[0] == 7
    with pytest.raises(DecodeFailure, match="wire format"):
        split_frame(b"{}")
    assert message_indexes(memoryview(b"\x00rest"))[0] == [0]
    indexes, rest = message_indexes(memoryview(b"\x04\x02\x06rest"))
    assert indexes == [1, 3] and bytes(rest) == b"rest"


# -- against a broker with a registry ---------------------------------------------------------

@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    port = free_port()
    broker = BrokerProcess(tmp_path_factory.mktemp("registry"),
                           properties={"schema.registry.listeners": f"http://127.0.0.1:{port}"})
    broker.start()
    wait_port("127.0.0.1", port, timeout=30)
    broker.registry_url = f"http://127.0.0.1:{port}"
    broker.client = SchemaRegistryClient({"url": broker.registry_url})
    yield broker
    broker.stop()


def write(registry, topic, serializer, values, extra=()):
    """Serialize ``values`` and produce them, then the raw ``extra`` records, to a new topic
    (every record keyed, so that a None in ``extra`` is a tombstone)."""
    create_topic(registry.bootstrap, topic)
    ctx = SerializationContext(topic, MessageField.VALUE)
    records = [serializer(v, ctx) for v in values] + list(extra)
    produce(registry.bootstrap, topic, records, keys=[b"k"] * len(records))


def read(spark, registry, **options):
    r = (spark.read.format(NAME).option("kafka.bootstrap.servers", registry.bootstrap)
         .option("schema.registry.url", registry.registry_url))
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def decoded(df):
    rows = df.orderBy("offset").collect()
    return ([r.value_decoded.asDict(recursive=True) if r.value_decoded else None for r in rows],
            [r.value_decode_error for r in rows])


def local(ts: dt.datetime) -> dt.datetime:
    """How PySpark's collect() shows a timestamp: naive, in the driver's local time zone."""
    return ts.astimezone().replace(tzinfo=None)


def test_avro_records_decoded(spark, registry):
    topic = f"avro-{uuid.uuid4().hex[:8]}"
    ts = dt.datetime(2024, 5, 1, 12, 30, tzinfo=dt.timezone.utc)
    orders = [{"id": "o1", "amount": decimal.Decimal("12.50"), "status": "PAID", "ts": ts,
               "day": dt.date(2024, 5, 1), "lines": [{"sku": "pen", "qty": 2}], "attrs": {"w": 3},
               "note": "gift"},
              {"id": "o2", "amount": decimal.Decimal("0.99"), "status": "NEW", "ts": ts,
               "day": dt.date(2024, 5, 2), "lines": [], "attrs": {}, "note": None}]
    write(registry, topic, AvroSerializer(registry.client, json.dumps(ORDER)), orders,
          [b"not framed", UNKNOWN_ID, None])
    df = read(spark, registry, subscribe=topic)
    assert df.columns == KAFKA_COLUMNS + ["value_decoded", "value_decode_error"]
    assert df.schema["value_decoded"].dataType.simpleString() == ORDER_SPARK
    rows, errors = decoded(df)
    assert rows[:2] == [{**o, "ts": local(ts)} for o in orders]
    assert rows[2:] == [None, None, None]
    assert errors[:2] == [None, None] and errors[4] is None       # a null value is no error
    assert "wire format" in errors[2] and "schema id 999999" in errors[3]


def test_json_records_decoded(spark, registry):
    topic = f"json-{uuid.uuid4().hex[:8]}"
    people = [{"name": "ada", "age": 36, "score": 9.5, "vip": True, "tags": ["x"], "address": {"city": "London"}},
              {"name": "alan"}]
    write(registry, topic, JSONSerializer(json.dumps(PERSON), registry.client), people, [b"{}"])
    rows, errors = decoded(read(spark, registry, subscribe=topic, valueFormat="json"))
    assert rows == [people[0], {"name": "alan", "age": None, "score": None, "vip": None, "tags": None,
                                "address": None}, None]
    assert errors[:2] == [None, None] and "wire format" in errors[2]


def test_protobuf_records_decoded(spark, registry):
    topic = f"proto-{uuid.uuid4().hex[:8]}"
    Order = order_class(f"spark_{uuid.uuid4().hex[:8]}")
    first = Order(id="o1", qty=3, tags=["a", "b"], item=Order.Item(sku="pen"), status=1, attrs={"k": 7})
    first.created.FromSeconds(1_700_000_000)
    write(registry, topic, ProtobufSerializer(Order, registry.client, {"use.deprecated.format": False}),
          [first, Order(id="o2")], [b"\x00"])
    df = read(spark, registry, subscribe=topic, valueFormat="protobuf")
    assert df.schema["value_decoded"].dataType.simpleString() == (
        "struct<id:string,qty:bigint,tags:array<string>,item:struct<sku:string>,status:string,"
        "attrs:map<string,int>,created:timestamp>")
    rows, errors = decoded(df)
    created = local(dt.datetime(2023, 11, 14, 22, 13, 20, tzinfo=dt.timezone.utc))
    assert rows == [{"id": "o1", "qty": 3, "tags": ["a", "b"], "item": {"sku": "pen"}, "status": "PAID",
                     "attrs": {"k": 7}, "created": created},
                    {"id": "o2", "qty": 0, "tags": [], "item": None, "status": "NEW", "attrs": {},
                     "created": None},
                    None]
    assert errors[:2] == [None, None] and "wire format" in errors[2]


def test_evolved_avro_schema_read_with_the_latest(spark, registry):
    """v1 and v2 records read with v2: v1's get v2's defaults (Avro resolution); the options
    that cannot work are refused before the query runs."""
    topic = f"evolve-{uuid.uuid4().hex[:8]}"
    v1 = {"type": "record", "name": "Sale", "namespace": "shop", "fields": [
        {"name": "id", "type": "string"}, {"name": "amount", "type": "double"}]}
    v2 = {**v1, "fields": v1["fields"] + [{"name": "currency", "type": "string", "default": "EUR"},
                                          {"name": "note", "type": ["null", "string"], "default": None}]}
    write(registry, topic, AvroSerializer(registry.client, json.dumps(v1)),
          [{"id": "s1", "amount": 1.5}, {"id": "s2", "amount": 2.0}])
    ctx = SerializationContext(topic, MessageField.VALUE)
    serialize_v2 = AvroSerializer(registry.client, json.dumps(v2))
    produce(registry.bootstrap, topic, [serialize_v2({"id": "s3", "amount": 3.0, "currency": "USD",
                                                      "note": "late"}, ctx), b"raw"])
    assert registry.client.get_versions(f"{topic}-value") == [1, 2]
    rows, errors = decoded(read(spark, registry, subscribe=topic))
    assert rows == [{"id": "s1", "amount": 1.5, "currency": "EUR", "note": None},
                    {"id": "s2", "amount": 2.0, "currency": "EUR", "note": None},
                    {"id": "s3", "amount": 3.0, "currency": "USD", "note": "late"}, None]
    assert errors[:3] == [None] * 3 and "wire format" in errors[3]

    # refused when the query is planned: through Spark once, then the same check directly
    with pytest.raises(Exception, match="is AVRO"):
        read(spark, registry, subscribe=topic, valueFormat="json")
    for options, message in (({"subscribePattern": f"{topic}.*"}, "valueSubject"),
                             ({"subscribe": topic, "valueSubject": "no-such-subject"}, "no-such-subject"),
                             ({"subscribe": topic, "valueFormat": "xml"}, "avro, protobuf, json or auto"),
                             ({"subscribe": topic, "keyFormat": "avro"}, f"{topic}-key")):
        opts = {"schema.registry.url": registry.registry_url, **{k.lower(): v for k, v in options.items()}}
        with pytest.raises(ValueError, match=message):
            resolve_specs(opts, subscription_strategy(opts))
    with pytest.raises(ValueError, match="need \"schema.registry.url\""):
        wanted({"valueformat": "avro"}, ("subscribe", [topic]))


def test_fail_on_decode_error(spark, registry):
    topic = f"strict-{uuid.uuid4().hex[:8]}"
    write(registry, topic, AvroSerializer(registry.client, json.dumps(ORDER)), [], [b"raw"])
    registry.client.register_schema(f"{topic}-value", Schema(json.dumps(ORDER), "AVRO"))
    with pytest.raises(Exception, match=f"cannot decode the value of {topic}-0 at offset 0"):
        read(spark, registry, subscribe=topic, failOnDecodeError="true").collect()


def test_streaming_avro_decoded_once_across_micro_batches(spark, registry):
    """readStream with the registry options: a first set of Avro records, then, once the query
    has taken them, a second set partly written with a compatible v2 (a field with a default)
    registered meanwhile.  The struct stays the one fixed at query start (v1's), v2's records
    are read into it, and every record reaches the sink exactly once, over two or more batches."""
    topic = f"stream-avro-{uuid.uuid4().hex[:8]}"
    v1 = {"type": "record", "name": "Tick", "namespace": "shop", "fields": [
        {"name": "id", "type": "string"}, {"name": "n", "type": "long"}]}
    v2 = {**v1, "fields": v1["fields"] + [{"name": "unit", "type": "string", "default": "pcs"}]}
    first = [{"id": f"a{i}", "n": i} for i in range(5)]
    write(registry, topic, AvroSerializer(registry.client, json.dumps(v1)), first)
    df = (spark.readStream.format(NAME).option("kafka.bootstrap.servers", registry.bootstrap)
          .option("schema.registry.url", registry.registry_url).option("subscribe", topic)
          .option("startingOffsets", "earliest").load())
    assert df.schema["value_decoded"].dataType.simpleString() == "struct<id:string,n:bigint>"

    seen = []   # (batch id, offset, value_decoded as a dict or None, value_decode_error)

    def collect(batch, batch_id):   # runs in this process, on py4j's callback thread
        for r in batch.select("offset", "value_decoded", "value_decode_error").collect():
            seen.append((batch_id, r.offset, r.value_decoded.asDict() if r.value_decoded else None,
                         r.value_decode_error))

    deadline = time.monotonic() + 120   # one budget for every wait below

    def wait_until(done, what):
        while not done():
            assert q.exception() is None, q.exception()
            assert time.monotonic() < deadline, \
                f"timed out waiting for {what}: {seen}, {q.status}, {q.lastProgress}"
            time.sleep(0.2)

    def end_offset():
        return json.loads(q.lastProgress.sources[0].endOffset) if q.lastProgress else None

    q = df.writeStream.foreachBatch(collect).trigger(processingTime="500 milliseconds").start()
    try:
        wait_until(lambda: len(seen) >= len(first), "the first set")
        ctx = SerializationContext(topic, MessageField.VALUE)
        to_v1 = AvroSerializer(registry.client, json.dumps(v1))
        to_v2 = AvroSerializer(registry.client, json.dumps(v2))
        second = [to_v2({"id": "b0", "n": 10, "unit": "kg"}, ctx), to_v1({"id": "b1", "n": 11}, ctx),
                  to_v2({"id": "b2", "n": 12, "unit": "l"}, ctx), b"raw"]
        produce(registry.bootstrap, topic, second)
        assert registry.client.get_versions(f"{topic}-value") == [1, 2]
        total = len(first) + len(second)
        wait_until(lambda: len(seen) >= total, "the second set")
        # committed up to the end of the topic: no later batch has anything to bring
        wait_until(lambda: end_offset() == {topic: {"0": total}}, "the last batch's commit")
    finally:
        q.stop()
    assert sorted(o for _, o, _, _ in seen) == list(range(total))     # every offset, once
    by_offset = {o: (b, row, error) for b, o, row, error in seen}
    assert [by_offset[o][1] for o in range(total)] == first + [
        {"id": "b0", "n": 10}, {"id": "b1", "n": 11}, {"id": "b2", "n": 12}, None]
    assert [by_offset[o][2] for o in range(total - 1)] == [None] * (total - 1)
    assert "wire format" in by_offset[total - 1][2]
    first_batches = {by_offset[o][0] for o in range(len(first))}
    second_batches = {by_offset[o][0] for o in range(len(first), total)}
    assert max(first_batches) < min(second_batches)                   # two micro-batches at least
