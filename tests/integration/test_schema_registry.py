"""The built-in Schema Registry (schema.registry.listeners) through confluent-kafka's
SchemaRegistryClient and its Avro, JSON and Protobuf serializers, and through plain HTTP as
curl sends it: one broker process, records produced and consumed over real sockets."""
from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request
import uuid

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.message_factory import GetMessageClass

from tests.support.broker import BrokerProcess, free_port, wait_port

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


@pytest.fixture(scope="module")
def registry_broker(tmp_path_factory):
    port = free_port()
    broker = BrokerProcess(tmp_path_factory.mktemp("registry"),
                           properties={"schema.registry.listeners": f"http://127.0.0.1:{port}"})
    broker.start()
    wait_port("127.0.0.1", port, timeout=30)
    broker.registry_url = f"http://127.0.0.1:{port}"
    yield broker
    broker.stop()


@pytest.fixture
def client(registry_broker):
    return SchemaRegistryClient({"url": registry_broker.registry_url})


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def http(url: str, method: str = "GET", body=None, raw: bytes | None = None) -> tuple[int, object]:
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": CONTENT_TYPE})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def round_trip(bootstrap: str, topic: str, serializer, deserializer, values: list) -> list:
    """Produce ``values`` through ``serializer``, read them back through ``deserializer``."""
    producer = Producer({"bootstrap.servers": bootstrap})
    for value in values:
        producer.produce(topic, serializer(value, SerializationContext(topic, MessageField.VALUE)))
    assert producer.flush(10) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("g"), "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    read = []
    try:
        for _ in range(100):
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                read.append(deserializer(msg.value(), SerializationContext(topic, MessageField.VALUE)))
            if len(read) == len(values):
                break
    finally:
        consumer.close()
    return read


def avro(name: str, *fields: dict) -> str:
    return json.dumps({"type": "record", "name": name, "namespace": "shop", "fields": list(fields)})


# -- AVRO ---------------------------------------------------------------------------------------
def test_avro_records_round_trip_and_evolve_as_the_compatibility_level_says(registry_broker, client):
    topic = unique("orders")
    v1 = avro("Order", {"name": "id", "type": "long"}, {"name": "item", "type": "string"})
    serializer = AvroSerializer(client, v1)
    deserializer = AvroDeserializer(client)
    values = [{"id": i, "item": f"book {i}"} for i in range(5)]
    assert round_trip(registry_broker.bootstrap, topic, serializer, deserializer, values) == values
    subject = f"{topic}-value"
    assert client.get_versions(subject) == [1]
    first = client.get_latest_version(subject)

    # BACKWARD (the default): a new field without a default cannot read the old records
    no_default = avro("Order", {"name": "id", "type": "long"}, {"name": "item", "type": "string"},
                      {"name": "qty", "type": "int"})
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema(subject, Schema(no_default, "AVRO"))
    assert refused.value.http_status_code == 409 and refused.value.error_code == 409
    assert not client.test_compatibility(subject, Schema(no_default, "AVRO"))

    with_default = avro("Order", {"name": "id", "type": "long"}, {"name": "item", "type": "string"},
                        {"name": "qty", "type": "int", "default": 1})
    assert client.test_compatibility(subject, Schema(with_default, "AVRO"))
    second_id = client.register_schema(subject, Schema(with_default, "AVRO"))
    assert second_id > first.schema_id and client.get_versions(subject) == [1, 2]
    # registering it again changes nothing; the id is global
    assert client.register_schema(subject, Schema(with_default, "AVRO")) == second_id
    assert client.register_schema(unique("other"), Schema(with_default, "AVRO")) == second_id

    # NONE lets anything through
    client.set_compatibility(subject, "NONE")
    assert client.get_compatibility(subject) == "NONE"
    client.register_schema(subject, Schema(avro("Order", {"name": "x", "type": "string"}), "AVRO"))
    assert client.get_versions(subject) == [1, 2, 3]

    # the records written with v1 still decode (the deserializer fetches the writer's schema by id)
    assert round_trip(registry_broker.bootstrap, topic, AvroSerializer(client, v1), deserializer,
                      values[:1]) == values[:1]


def test_avro_references_resolve_through_other_subjects(registry_broker, client):
    address = json.dumps({"type": "record", "name": "Address", "namespace": "shop",
                          "fields": [{"name": "city", "type": "string"}]})
    address_subject = unique("address")
    client.register_schema(address_subject, Schema(address, "AVRO"))
    customer = avro("Customer", {"name": "name", "type": "string"}, {"name": "home", "type": "shop.Address"})
    refs = [SchemaReference("shop.Address", address_subject, 1)]
    topic = unique("customers")
    customer_id = client.register_schema(f"{topic}-value", Schema(customer, "AVRO", refs))
    fetched = client.get_schema(customer_id)
    assert [(r.name, r.subject, r.version) for r in fetched.references] == [("shop.Address", address_subject, 1)]

    # a producer using the latest registered version, a consumer resolving the reference
    serializer = AvroSerializer(client, None, conf={"auto.register.schemas": False, "use.latest.version": True})
    values = [{"name": "ada", "home": {"city": "London"}}]
    assert round_trip(registry_broker.bootstrap, topic, serializer, AvroDeserializer(client), values) == values

    # a referenced version cannot be deleted while the referrer lives
    status, answer = http(f"{registry_broker.registry_url}/subjects/{address_subject}/versions/1", "DELETE")
    assert (status, answer["error_code"]) == (422, 42206)
    status, answer = http(f"{registry_broker.registry_url}/subjects/{address_subject}/versions/1/referencedby")
    assert (status, answer) == (200, [customer_id])
    # a reference to something never registered is an invalid schema
    with pytest.raises(SchemaRegistryError) as bad:
        client.register_schema(unique("x"), Schema(customer, "AVRO", [SchemaReference("shop.Address", "nope", 1)]))
    assert bad.value.error_code == 42201


# -- JSON ---------------------------------------------------------------------------------------
PERSON = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "Person", "type": "object",
          "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
          "required": ["name"], "additionalProperties": False}


def test_json_schema_records_round_trip_and_evolve(registry_broker, client):
    topic = unique("people")
    serializer = JSONSerializer(json.dumps(PERSON), client)
    deserializer = JSONDeserializer(json.dumps(PERSON), schema_registry_client=client)
    values = [{"name": "ada", "age": 36}, {"name": "alan"}]
    assert round_trip(registry_broker.bootstrap, topic, serializer, deserializer, values) == values
    subject = f"{topic}-value"

    # a closed model that drops a property refuses what the old schema wrote
    narrower = dict(PERSON, properties={"name": {"type": "string"}})
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema(subject, Schema(json.dumps(narrower), "JSON"))
    assert refused.value.error_code == 409
    # an optional property added to it is fine
    wider = dict(PERSON, properties={**PERSON["properties"], "email": {"type": "string"}})
    client.register_schema(subject, Schema(json.dumps(wider), "JSON"))
    assert client.get_versions(subject) == [1, 2]
    assert client.get_latest_version(subject).schema.schema_type == "JSON"


# -- PROTOBUF -----------------------------------------------------------------------------------
def order_message(package: str, *fields: tuple[str, int, int]):
    """A protobuf message class built at run time, as generated code would define it."""
    fdp = descriptor_pb2.FileDescriptorProto(name=f"{package}/order.proto", package=package, syntax="proto3")
    message = fdp.message_type.add(name="Order")
    for name, number, kind in fields:
        message.field.add(name=name, number=number, type=kind, label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return GetMessageClass(pool.FindMessageTypeByName(f"{package}.Order"))


F = descriptor_pb2.FieldDescriptorProto


def test_protobuf_records_round_trip_and_evolve(registry_broker, client):
    package = unique("shop").replace("-", "_")
    Order = order_message(package, ("id", 1, F.TYPE_INT64), ("item", 2, F.TYPE_STRING))
    topic = unique("proto-orders")
    conf = {"use.deprecated.format": False}
    serializer = ProtobufSerializer(Order, client, conf)
    deserializer = ProtobufDeserializer(Order, {"use.deprecated.format": False})
    values = [Order(id=i, item=f"pen {i}") for i in range(3)]
    assert round_trip(registry_broker.bootstrap, topic, serializer, deserializer, values) == values
    subject = f"{topic}-value"
    registered = client.get_latest_version(subject)
    assert registered.schema.schema_type == "PROTOBUF"

    # changing a field's type is refused; adding one is accepted
    Retyped = order_message(package, ("id", 1, F.TYPE_STRING), ("item", 2, F.TYPE_STRING))
    with pytest.raises(SchemaRegistryError) as refused:
        ProtobufSerializer(Retyped, client, conf)(Retyped(id="x"), SerializationContext(topic, MessageField.VALUE))
    assert refused.value.error_code == 409
    Added = order_message(package, ("id", 1, F.TYPE_INT64), ("item", 2, F.TYPE_STRING), ("qty", 3, F.TYPE_INT32))
    ProtobufSerializer(Added, client, conf)(Added(id=1, qty=2), SerializationContext(topic, MessageField.VALUE))
    assert client.get_versions(subject) == [1, 2]


# -- deletes, modes, ids --------------------------------------------------------------------------
def test_soft_then_hard_delete_and_ids_are_never_reused(registry_broker, client):
    subject = unique("deleting")
    one = client.register_schema(subject, Schema(avro("D", {"name": "a", "type": "int"}), "AVRO"))
    two = client.register_schema(subject, Schema(avro("D", {"name": "a", "type": "int"},
                                                       {"name": "b", "type": "int", "default": 0}), "AVRO"))
    assert client.delete_version(subject, 2) == 2
    assert client.get_versions(subject) == [1]
    status, answer = http(f"{registry_broker.registry_url}/subjects/{subject}/versions?deleted=true")
    assert (status, answer) == (200, [1, 2])
    # a hard delete needs the soft one first
    status, answer = http(f"{registry_broker.registry_url}/subjects/{subject}/versions/1?permanent=true", "DELETE")
    assert (status, answer["error_code"]) == (404, 40407)
    assert client.delete_subject(subject) == [1]
    assert subject not in client.get_subjects()
    with pytest.raises(SchemaRegistryError) as gone:
        client.get_latest_version(subject)
    assert gone.value.error_code == 40401
    assert client.get_schema(one) is not None            # soft-deleted schemas still resolve by id
    assert sorted(client.delete_subject(subject, permanent=True)) == [1, 2]
    status, answer = http(f"{registry_broker.registry_url}/schemas/ids/{two}")
    assert (status, answer["error_code"]) == (404, 40403)
    # a new schema gets a new id, above every id ever given
    fresh = client.register_schema(subject, Schema(avro("D", {"name": "z", "type": "long"}), "AVRO"))
    assert fresh > two and client.get_versions(subject) == [1]


def test_read_only_mode_refuses_writes_and_serves_reads(registry_broker, client):
    subject = unique("frozen")
    schema_id = client.register_schema(subject, Schema('"string"', "AVRO"))
    assert client.update_mode(subject, "READONLY") == "READONLY"
    try:
        assert client.get_mode(subject) == "READONLY"
        with pytest.raises(SchemaRegistryError) as refused:
            client.register_schema(subject, Schema('"bytes"', "AVRO"))
        assert refused.value.error_code == 42205
        with pytest.raises(SchemaRegistryError):
            client.delete_subject(subject)
        assert client.get_latest_version(subject).schema_id == schema_id
    finally:
        assert client.delete_mode(subject) == "READONLY"      # back to the global mode
    assert client.get_global_mode() == "READWRITE"
    client.register_schema(subject, Schema('"bytes"', "AVRO"))


# -- the REST API as curl sees it ----------------------------------------------------------------
def test_bad_requests_get_confluent_error_codes_never_a_500(registry_broker):
    url = registry_broker.registry_url
    subject = unique("curl")
    cases = [
        ("POST", f"/subjects/{subject}/versions", {"schema": "{not json"}, 422, 42201),
        ("POST", f"/subjects/{subject}/versions", {"schema": '"string"', "schemaType": "XML"}, 422, 42201),
        ("POST", f"/subjects/{subject}/versions", {"nothing": 1}, 422, 42201),
        ("GET", f"/subjects/{subject}/versions", None, 404, 40401),
        ("GET", f"/subjects/{subject}/versions/zero", None, 422, 42202),
        ("GET", "/schemas/ids/999999", None, 404, 40403),
        ("PUT", "/config", {"compatibility": "SIDEWAYS"}, 422, 42203),
        ("PUT", "/mode", {"mode": "SLEEPY"}, 422, 42204),
        ("GET", f"/config/{subject}", None, 404, 40408),
    ]
    for method, path, body, status, code in cases:
        got_status, answer = http(url + path, method, body)
        assert (got_status, answer.get("error_code")) == (status, code), (method, path, answer)
        assert isinstance(answer.get("message"), str) and answer["message"]
    status, answer = http(url + f"/subjects/{subject}/versions", "POST", raw=b"\xff\x00 not json")
    assert status == 400 and answer["error_code"] == 400
    # a body over the limit is refused from its Content-Length, before it is read
    port = int(url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(f"POST /subjects/{subject}/versions HTTP/1.1\r\nHost: x\r\nContent-Type: {CONTENT_TYPE}\r\n"
                     f"Content-Length: {17 * 1024 * 1024}\r\n\r\n".encode())
        answer = b""
        while b'"error_code":413' not in answer and (chunk := sock.recv(65536)):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 413") and b'"error_code":413' in answer
    assert http(url + "/no/such/path")[0] == 404 and http(url + "/schemas/types", "DELETE")[0] == 405
    assert http(url + "/schemas/types") == (200, ["AVRO", "JSON", "PROTOBUF"])


def test_schemas_and_ids_survive_a_restart(registry_broker, client):
    subject = unique("durable")
    schema_id = client.register_schema(subject, Schema(avro("K", {"name": "k", "type": "string"}), "AVRO"))
    before = http(f"{registry_broker.registry_url}/subjects")[1]
    registry_broker.stop()
    registry_broker.start()
    wait_port("127.0.0.1", int(registry_broker.registry_url.rsplit(":", 1)[1]), timeout=30)
    status, answer = http(f"{registry_broker.registry_url}/schemas/ids/{schema_id}")
    assert status == 200 and json.loads(answer["schema"])["name"] == "K"
    assert http(f"{registry_broker.registry_url}/subjects")[1] == before
    # and the next id continues above the old ones
    fresh = SchemaRegistryClient({"url": registry_broker.registry_url})
    assert fresh.register_schema(unique("after"), Schema('"int"', "AVRO")) > schema_id


# -- references in JSON and Protobuf -------------------------------------------------------------
def test_json_schema_references_resolve_through_other_subjects(registry_broker, client):
    address = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
               "properties": {"city": {"type": "string"}}, "required": ["city"]}
    address_subject = unique("json-address")
    client.register_schema(address_subject, Schema(json.dumps(address), "JSON"))
    person = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "Resident", "type": "object",
              "properties": {"name": {"type": "string"}, "home": {"$ref": "address.json"}}, "required": ["name"]}
    schema = Schema(json.dumps(person), "JSON", [SchemaReference("address.json", address_subject, 1)])
    topic = unique("residents")
    schema_id = client.register_schema(f"{topic}-value", schema)
    assert [r.subject for r in client.get_schema(schema_id).references] == [address_subject]
    serializer = JSONSerializer(schema, client, conf={"auto.register.schemas": False, "use.latest.version": True})
    values = [{"name": "ada", "home": {"city": "London"}}]
    assert round_trip(registry_broker.bootstrap, topic, serializer,
                      JSONDeserializer(None, schema_registry_client=client), values) == values


def test_protobuf_imports_register_as_references(registry_broker, client):
    package = unique("refs").replace("-", "_")
    common = descriptor_pb2.FileDescriptorProto(name=f"{package}/money.proto", package=package, syntax="proto3")
    money = common.message_type.add(name="Money")
    money.field.add(name="cents", number=1, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    order = descriptor_pb2.FileDescriptorProto(name=f"{package}/order.proto", package=package, syntax="proto3",
                                               dependency=[common.name])
    message = order.message_type.add(name="Order")
    message.field.add(name="id", number=1, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    message.field.add(name="total", number=2, type=F.TYPE_MESSAGE, type_name=f".{package}.Money",
                      label=F.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(common)
    pool.Add(order)
    Order = GetMessageClass(pool.FindMessageTypeByName(f"{package}.Order"))
    topic = unique("proto-refs")
    conf = {"use.deprecated.format": False}
    values = [Order(id=7, total={"cents": 1999})]
    assert round_trip(registry_broker.bootstrap, topic, ProtobufSerializer(Order, client, conf),
                      ProtobufDeserializer(Order, conf), values) == values
    latest = client.get_latest_version(f"{topic}-value")
    assert [(r.name, r.subject) for r in latest.schema.references] == [(common.name, common.name)]
    assert client.get_versions(common.name) == [1]
