"""The messages pages in chromium: browse, filter, decode, live tail and produce, against the
session's three brokers, and against one broker with a Schema Registry for the decoding.

Records are written and read back with stock clients (confluent-kafka).  The browse tests
share one topic (``orders``) whose records and timestamps are fixed; the produce and tail
tests write to topics of their own.  The Schema Registry test and the read-only test share one
extra broker and one read-only console on it, started in the background with the module.
"""
from __future__ import annotations

import datetime as dt
import json
import re
import threading
import urllib.error
import urllib.parse
import urllib.request
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from playwright.sync_api import expect

from tests.support.broker import BrokerProcess, free_port, wait_port
from tests.support.console import ConsoleProcess

BASE_TS = 1_700_000_000_000            # 2023-11-14T22:13:20Z: the orders' timestamps are BASE_TS + i s
ORDERS = 10                            # gzip, JSON values, keys order-0/1/2, two headers
PLAIN = 5                              # lz4, text values, offsets 10-14


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap: str, name: str, partitions: int = 1) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(15)
    return name


def produce(bootstrap: str, topic: str, records: list[dict], **config) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, **config})
    for r in records:
        producer.produce(topic, partition=0, **r)
    assert producer.flush(15) == 0


def offsets_shown(page) -> list[int]:
    return [int(t) for t in page.locator("#records-body th[scope=row]").all_inner_texts()]


def goto(page, console_url: str, **params) -> None:
    page.goto(f"{console_url}/messages?" + urllib.parse.urlencode(params))


@pytest.fixture(scope="module")
def orders(console_cluster, registry_console_starting):
    """A topic of 15 records: 10 JSON orders in one gzip batch, then 5 texts in one lz4 batch.
    (The registry broker and its console start meanwhile, for the tests at the end.)"""
    topic = create_topic(console_cluster.bootstrap, unique("orders"))
    produce(console_cluster.bootstrap, topic, [
        {"key": f"order-{i % 3}", "timestamp": BASE_TS + i * 1000,
         "value": json.dumps({"customer": {"id": i}, "status": "shipped" if i % 2 else "new", "note": "n" * 120}),
         "headers": [("trace-id", f"t{i}".encode()), ("raw", b"\x00\xff")]} for i in range(ORDERS)],
        **{"compression.type": "gzip"})
    produce(console_cluster.bootstrap, topic, [
        {"key": "plain", "timestamp": BASE_TS + (ORDERS + i) * 1000, "value": f"plain text {i} " + "lz4 " * 40,
         "headers": [("source", b"lz4-test")]} for i in range(PLAIN)], **{"compression.type": "lz4"})
    return topic


def test_browse_from_an_offset_and_page_forward(console, orders, page):
    goto(page, console.url, topic=orders, partition=0, start="offset", offset=5, limit=3)
    expect(page.locator("#records-body th[scope=row]")).to_have_count(3)
    assert offsets_shown(page) == [5, 6, 7]
    page.get_by_role("link", name="Newer →").click()
    expect(page.locator("#records-body th[scope=row]").first).to_have_text("8")
    assert offsets_shown(page) == [8, 9, 10]
    page.get_by_role("link", name="← Older").click()
    expect(page.locator("#records-body th[scope=row]").first).to_have_text("5")


def test_browse_from_a_time_with_the_form(console, orders, page):
    goto(page, console.url, topic=orders, partition=0)
    page.get_by_label("Start at").select_option("timestamp")
    page.get_by_label("Time (ISO 8601 or epoch ms)").fill(
        dt.datetime.fromtimestamp((BASE_TS + 7000) / 1000, dt.timezone.utc).isoformat().replace("+00:00", "Z"))
    page.get_by_label("Records (max 500)").fill("2")
    page.get_by_label("Records (max 500)").press("Enter")           # the form works from the keyboard
    expect(page.locator("#records-body th[scope=row]").first).to_have_text("7")
    assert offsets_shown(page) == [7, 8]
    goto(page, console.url, topic=orders, partition=0, start="timestamp", timestamp=BASE_TS + 12000, limit=50)
    assert offsets_shown(page) == [12, 13, 14]


def test_browse_the_end_shows_the_newest_records(console, orders, page):
    goto(page, console.url, topic=orders, partition=0, limit=4)        # start defaults to the end
    expect(page.locator("#records-body th[scope=row]")).to_have_count(4)
    assert offsets_shown(page) == [11, 12, 13, 14]
    expect(page.locator("#records-summary")).to_contain_text("0 – 15")


def test_filter_by_key_and_by_json_path(console, orders, page):
    goto(page, console.url, topic=orders, partition=0, start="beginning", key="order-1")
    expect(page.locator("#records-body th[scope=row]")).to_have_count(3)
    assert offsets_shown(page) == [1, 4, 7]
    expect(page.locator("#records-summary")).to_contain_text("examined 15 records")

    goto(page, console.url, topic=orders, partition=0, start="beginning", path="$.customer.id >= 8")
    expect(page.locator("#records-body th[scope=row]")).to_have_count(2)
    assert offsets_shown(page) == [8, 9]
    goto(page, console.url, topic=orders, partition=0, path='$.status == "shipped"', limit=2)   # the last 2
    expect(page.locator("#records-body th[scope=row]")).to_have_count(2)
    assert offsets_shown(page) == [7, 9]
    goto(page, console.url, topic=orders, partition=0, path="$.customer.id ==")
    expect(page.get_by_role("alert")).to_contain_text("JSON path: '==' needs a value")


def test_json_headers_timestamps_and_codecs_are_shown(console, orders, page):
    goto(page, console.url, topic=orders, partition=0, start="offset", offset=0, limit=11)
    first = page.locator("#offset-0")
    expect(first.locator("td.codec")).to_have_text("gzip")
    expect(first.locator("td.value .badge")).to_have_text("JSON")
    expect(first.locator("td.value pre").first).to_contain_text('"customer": {\n    "id": 0\n  }')
    expect(first.locator("td.headers")).to_contain_text("trace-id: t0")
    expect(first.locator("td.headers")).to_contain_text("raw: hex 00 ff")
    expect(first.locator("time")).to_have_text("2023-11-14 22:13:20.000 UTC")
    expect(first).to_contain_text("CreateTime")
    lz4 = page.locator("#offset-10")
    expect(lz4.locator("td.codec")).to_have_text("lz4")
    expect(lz4.locator("td.value .badge")).to_have_text("text")
    expect(lz4.locator("td.headers")).to_contain_text("source: lz4-test")


def test_a_record_produced_from_the_page_is_shown_and_read_by_a_stock_client(console, console_cluster, page):
    topic = create_topic(console_cluster.bootstrap, unique("produced"))
    goto(page, console.url, topic=topic, partition=0)
    expect(page.locator("#no-records")).to_be_visible()
    page.get_by_text("Produce a message").click()
    form = page.locator("#produce-form")
    expect(form.get_by_label("Topic")).to_have_value(topic)
    form.get_by_label("Key (empty: null)").fill("cust-42")
    form.get_by_label("Value", exact=True).fill('{"total": 99.5}')
    form.get_by_label("Headers").fill("origin: console\ntenant: acme")
    form.get_by_role("button", name="Produce").click()
    expect(page.locator("p.flash.ok")).to_have_text(f"Produced to {topic} partition 0 at offset 0.")
    row = page.locator("#offset-0")
    expect(row.locator("td.value pre").first).to_contain_text('"total": 99.5')
    expect(row.locator("td.headers")).to_contain_text("origin: console")

    consumer = Consumer({"bootstrap.servers": console_cluster.bootstrap, "group.id": unique("g"),
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    try:
        msg = next(m for m in iter(lambda: consumer.poll(0.5), "never") if m is not None and m.error() is None)
    finally:
        consumer.close()
    assert (msg.key(), json.loads(msg.value())) == (b"cust-42", {"total": 99.5})
    assert msg.headers() == [("origin", b"console"), ("tenant", b"acme")]

    # a refusal is the broker's error on the page, with the form kept
    page.get_by_text("Produce a message").click()
    form.get_by_label("Partition (empty: the producer's choice)").fill("7")
    form.get_by_label("Value", exact=True).fill("lost")
    form.get_by_role("button", name="Produce").click()
    expect(page.locator("#produce .flash.error")).to_contain_text("no partition 7")
    expect(page.locator("#produce-form").get_by_label("Value", exact=True)).to_have_value("lost")


def test_the_live_tail_shows_a_record_produced_after_the_page_opened(console, console_cluster, page):
    topic = create_topic(console_cluster.bootstrap, unique("tail"))
    produce(console_cluster.bootstrap, topic, [{"value": "before"}])
    goto(page, console.url, topic=topic, partition=0, tail=1)
    expect(page.locator("#offset-0")).to_contain_text("before")
    expect(page.locator("#tail")).to_contain_text("Live")
    produce(console_cluster.bootstrap, topic, [{"key": "k", "value": json.dumps({"late": True, "pad": "z" * 200})}],
            **{"compression.type": "gzip"})
    expect(page.locator("#offset-1 td.value")).to_contain_text('"late": true', timeout=10000)
    expect(page.locator("#offset-1 td.codec")).to_have_text("gzip")
    assert offsets_shown(page) == [0, 1]
    expect(page.locator("#tail")).to_contain_text("records from offset 2 on")


# -- a broker with a Schema Registry, and a read-only console on it -------------------------------

class RegistryConsole:
    """One broker with a Schema Registry and a read-only console with ``--schema-registry-url`` on
    it, started in a background thread (``start``) so they come up while the first tests run;
    ``wait()`` returns (broker, registry url, console) once both answer."""

    def __init__(self, tmp):
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.broker = BrokerProcess(tmp / "broker", properties={"schema.registry.listeners": self.url})
        self.console = ConsoleProcess(self.broker.bootstrap, str(tmp / "console.log"), "--read-only",
                                      "--schema-registry-url", self.url)
        self._port = port
        self._failed: list[BaseException] = []
        self._thread = threading.Thread(target=self._start, name="registry-console", daemon=True)

    def start(self) -> "RegistryConsole":
        self._thread.start()
        return self

    def _start(self) -> None:
        try:
            self.broker.start()
            wait_port("127.0.0.1", self._port, timeout=30)
            self.console.start(timeout=60)
        except BaseException as exc:        # noqa: BLE001 - raised by wait() in the test's thread
            self._failed.append(exc)

    def wait(self):
        self._thread.join(120)
        if self._failed or self._thread.is_alive():
            raise RuntimeError(f"the registry broker or its console did not start: {self._failed}")
        return self.broker, self.url, self.console

    def close(self) -> None:
        self._thread.join(120)
        self.console.close()
        self.broker.stop()


@pytest.fixture(scope="module")
def registry_console_starting(tmp_path_factory):
    """The RegistryConsole, starting (``orders`` asks for it so it starts with the module)."""
    starting = RegistryConsole(tmp_path_factory.mktemp("registry-console")).start()
    yield starting
    starting.close()


@pytest.fixture
def registry_console(registry_console_starting):
    return registry_console_starting.wait()


def protobuf_order_class():
    """A generated-at-runtime Protobuf message class ``shop.Order {int64 id; string item}``."""
    from google.protobuf import descriptor_pb2, descriptor_pool
    from google.protobuf.message_factory import GetMessageClass
    field = descriptor_pb2.FieldDescriptorProto
    file = descriptor_pb2.FileDescriptorProto(name="shop/order.proto", package="shop", syntax="proto3")
    message = file.message_type.add(name="Order")
    message.field.add(name="id", number=1, type=field.TYPE_INT32, label=field.LABEL_OPTIONAL)
    message.field.add(name="item", number=2, type=field.TYPE_STRING, label=field.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return GetMessageClass(pool.FindMessageTypeByName("shop.Order"))


def test_json_and_registry_framed_avro_and_protobuf_values_are_decoded(registry_console, page):
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext
    broker, url, console = registry_console
    topic = create_topic(broker.bootstrap, unique("decoded"))
    client = SchemaRegistryClient({"url": url})
    schema = json.dumps({"type": "record", "name": "Order", "namespace": "shop", "fields": [
        {"name": "id", "type": "long"}, {"name": "item", "type": "string"}]})
    avro = AvroSerializer(client, schema)
    framed = avro({"id": 7, "item": "widget"}, SerializationContext(topic, MessageField.VALUE))
    order = protobuf_order_class()
    proto = ProtobufSerializer(order, client, {"use.deprecated.format": False})(
        order(id=8, item="gadget"), SerializationContext(topic, MessageField.KEY))   # a key, for its own subject
    produce(broker.bootstrap, topic, [{"key": "json", "value": '{"a":1,"b":[true,null]}'},
                                      {"key": "avro", "value": framed},
                                      {"key": "broken", "value": framed[:5] + b"\xff"},
                                      {"key": proto, "value": "protobuf key"}])
    goto(page, console.url, topic=topic, partition=0, start="beginning")
    expect(page.locator("#records-body th[scope=row]")).to_have_count(4)
    expect(page.locator("#offset-0 td.value pre").first).to_have_text(
        '{\n  "a": 1,\n  "b": [\n    true,\n    null\n  ]\n}')
    decoded = page.locator("#offset-1 td.value")
    expect(decoded.locator(".badge")).to_have_text("Avro")
    schema_id = int.from_bytes(framed[1:5], "big")
    expect(decoded).to_contain_text(f"schema {schema_id} · {topic}-value")
    expect(decoded.locator("pre").first).to_have_text('{\n  "id": 7,\n  "item": "widget"\n}')
    # a payload that does not fit its schema: the raw bytes and the reason, not an error page
    broken = page.locator("#offset-2 td.value")
    expect(broken.locator(".decode-error")).to_contain_text(f"schema {schema_id}")
    expect(broken.locator("pre.hex")).to_have_text(framed[:5].hex(" ") + " ff")
    key = page.locator("#offset-3 td.key")
    expect(key.locator(".badge")).to_have_text("Protobuf")
    expect(key).to_contain_text(f"{topic}-key")
    expect(key.locator("pre").first).to_have_text('{\n  "id": 8,\n  "item": "gadget"\n}')


def test_a_read_only_console_shows_no_produce_form_and_refuses_a_produce(registry_console, page):
    broker, _, console = registry_console
    topic = create_topic(broker.bootstrap, unique("ro"))
    goto(page, console.url, topic=topic, partition=0)
    expect(page.locator("#records-summary")).to_be_visible()
    expect(page.locator("#produce-form")).to_have_count(0)
    expect(page.locator("header .badge")).to_have_text("read-only")
    body = urllib.parse.urlencode({"topic": topic, "value": "x", "csrf": "whatever"}).encode()
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(urllib.request.Request(console.url + "/messages/produce", data=body), timeout=10)
    assert refused.value.code == 403
    assert re.search(r"read-only", refused.value.read().decode())
