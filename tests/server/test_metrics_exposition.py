"""The Prometheus side in-process: counters (kwire.metrics.counters), the exposition of a broker's state
(kwire.metrics.collector) read back with prometheus_client's own parser, and the /metrics
endpoint's HTTP handling (kwire.metrics.http), sans-I/O.  A broker on the mock clock, served
through memory streams as in test_connection_inprocess."""
from __future__ import annotations

import pytest
import trio
import trio.testing
from kafka.protocol.consumer import FetchRequest
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from kwire.admin.broker_config import ConfigError, broker_config_from_text
from kwire.codecs.errors import ErrorCode as E
from kwire.metrics.counters import TIME_BUCKETS_MS, BrokerMetrics
from kwire.metrics.collector import registry_for
from kwire.metrics.http import (
    MAX_CONNECTIONS, MAX_HEAD_BYTES, REQUEST_TIMEOUT_S, HeadReader, HttpError, MetricsEndpoint, parse_request_line,
    respond,
)
from tests.log.logkit import build_batch
from tests.server.test_connection_inprocess import (
    connected, create_topic, fetch_fields, produce_frame, real_time, run,
)

ON = {"prometheus.listener": "127.0.0.1:0"}


def scrape(broker) -> dict:
    """{family name: {(sample name, frozenset of labels): value}} of the broker's exposition."""
    text = generate_latest(registry_for(broker)).decode()
    families = {}
    for family in text_string_to_metric_families(text):
        families[family.name] = (family.type, {(s.name, frozenset(s.labels.items())): s.value
                                               for s in family.samples})
    return families


def value(families, family: str, sample: str | None = None, **labels) -> float:
    return families[family][1][(sample or family, frozenset(labels.items()))]


def test_the_endpoint_key_is_off_by_default_and_checked():
    assert broker_config_from_text("").value_of("prometheus.listener") is None
    assert broker_config_from_text("prometheus.listener=[::1]:9404").value_of("prometheus.listener") == "[::1]:9404"
    for bad in ("9404", "host", "host:port", "h:70000", "a b:1"):
        with pytest.raises(ConfigError, match="prometheus.listener"):
            broker_config_from_text(f"prometheus.listener={bad}")


def test_a_broker_without_the_endpoint_counts_nothing(tmp_path):
    async def scenario():
        async with connected(tmp_path) as (broker, client):
            assert broker.metrics is None
            await create_topic(client, "t")
            r = await client.call(FetchRequest, 12, **fetch_fields("t", 0))
            assert r.responses[0].partitions[0].error_code == E.NONE
    run(scenario)


def test_produce_and_fetch_become_kafkas_families(tmp_path):
    async def scenario():
        async with connected(tmp_path, **ON) as (broker, client):
            await create_topic(client, "t", partitions=2)
            batches = [build_batch([b"v" * 100] * 3, timestamp=broker.clock.now_ms()) for _ in range(2)]
            for batch in batches:
                await client.send(produce_frame(client, "t", batch))
                assert (await client.response()).responses[0].partition_responses[0].error_code == E.NONE
            await client.call(FetchRequest, 12, **fetch_fields("t", 0))
            with real_time():
                families = scrape(broker)
            assert families["kafka_server_brokertopicmetrics_messagesin"][0] == "counter"
            for labels in ({"topic": "t"}, {}):               # the topic's and every topic's
                assert value(families, "kafka_server_brokertopicmetrics_messagesin",
                             "kafka_server_brokertopicmetrics_messagesin_total", **labels) == 6
                assert value(families, "kafka_server_brokertopicmetrics_bytesin",
                             "kafka_server_brokertopicmetrics_bytesin_total", **labels) == sum(map(len, batches))
                assert value(families, "kafka_server_brokertopicmetrics_bytesout",
                             "kafka_server_brokertopicmetrics_bytesout_total", **labels) == sum(map(len, batches))
            assert value(families, "kafka_network_requestmetrics_requests",
                         "kafka_network_requestmetrics_requests_total", request="Produce", version="9") == 2
            for request in ("Fetch", "FetchConsumer"):
                assert value(families, "kafka_network_requestmetrics_requests",
                             "kafka_network_requestmetrics_requests_total", request=request, version="12") == 1
            assert value(families, "kafka_log_log_size", partition="0", topic="t") == sum(map(len, batches))
            assert value(families, "kafka_log_log_logendoffset", partition="0", topic="t") == 6
            assert value(families, "kafka_log_log_logendoffset", partition="1", topic="t") == 0
            assert value(families, "kafka_server_replicamanager_partitioncount") == 2
            assert value(families, "kafka_server_replicamanager_leadercount") == 2
            assert value(families, "kafka_server_replicamanager_underreplicatedpartitions") == 0
            # the in-memory test stream comes through handle_connection's default listener
            assert value(families, "kafka_server_socketservermetrics_connection_count",
                         listener="PLAINTEXT", networkprocessor="0") == 1
    run(scenario)


def test_request_times_are_a_cumulative_histogram_in_ms(tmp_path):
    async def scenario():
        async with connected(tmp_path, **ON) as (broker, client):
            await create_topic(client, "t")
            await client.call(FetchRequest, 12, **fetch_fields("t", 0))
            with real_time():
                families = scrape(broker)
            kind, samples = families["kafka_network_requestmetrics_totaltimems"]
            assert kind == "histogram"
            name = "kafka_network_requestmetrics_totaltimems"
            buckets = [samples[(name + "_bucket", frozenset({"request": "Fetch", "le": le}.items()))]
                       for le in [*(str(float(b)) for b in TIME_BUCKETS_MS), "+Inf"]]
            assert buckets == sorted(buckets) and buckets[-1] == 1
            assert samples[(name + "_count", frozenset({"request": "Fetch"}.items()))] == 1
            assert 0 < samples[(name + "_sum", frozenset({"request": "Fetch"}.items()))] < 1000
    run(scenario)


def test_failed_produce_counts_as_kafka_counts_it():
    metrics = BrokerMetrics()
    metrics.produce_failed("t", E.MESSAGE_TOO_LARGE)      # a client's mistake: answered, not "failed"
    metrics.produce_failed("t", E.NOT_LEADER_OR_FOLLOWER)
    metrics.produce_failed("t", E.INVALID_RECORD)         # the validator refused a record: failed
    metrics.produce_failed("t", E.OUT_OF_ORDER_SEQUENCE_NUMBER)
    metrics.produced("t", 5, 500)
    from kwire.metrics.counters import FAILED_PRODUCE, MESSAGES_IN, TOTAL_PRODUCE
    assert metrics.topics["t"][FAILED_PRODUCE] == 2
    assert metrics.topics["t"][TOTAL_PRODUCE] == 5
    assert metrics.topics["t"][MESSAGES_IN] == 5
    metrics.forget_topics({"other"})                      # deleted topics' counters go, the sums stay
    assert set(metrics.topics) == {""}
    assert metrics.topics[""][FAILED_PRODUCE] == 2


def test_a_deleted_topic_leaves_the_exposition(tmp_path):
    async def scenario():
        async with connected(tmp_path, **ON) as (broker, client):
            await create_topic(client, "gone")
            await client.send(produce_frame(client, "gone", build_batch([b"x"], timestamp=broker.clock.now_ms())))
            await client.response()
            with real_time():
                assert ("kafka_server_brokertopicmetrics_messagesin_total", frozenset({("topic", "gone")})) in \
                    scrape(broker)["kafka_server_brokertopicmetrics_messagesin"][1]
                broker.logs.topics.pop("gone")            # what DeleteTopics leaves behind
                families = scrape(broker)
            samples = families["kafka_server_brokertopicmetrics_messagesin"][1]
            assert list(samples) == [("kafka_server_brokertopicmetrics_messagesin_total", frozenset())]
            assert not any(dict(labels).get("topic") == "gone" for _, labels in families["kafka_log_log_size"][1])
    run(scenario)


def test_share_partitions_are_counted_by_state_between_their_start_and_end_offsets(tmp_path):
    from kwire.groups.share_partition import AckType, PartitionLimits, SharePartition

    async def scenario():
        async with connected(tmp_path, **ON) as (broker, client):
            await create_topic(client, "queue")
            sp = SharePartition(PartitionLimits(1000, 3, 100), 0)
            sp.acquire("m1", [(0, 9)], 500, 0)
            sp.acknowledge("m1", 1, 3, [AckType.ACCEPT, AckType.REJECT, AckType.RELEASE])
            broker.shares.coordinator.partitions[("g1", broker.logs.get("queue").topic_id, 0)] = sp
            broker.shares.coordinator.partitions[("g1", "a deleted topic's id", 0)] = sp
            with real_time():
                families = scrape(broker)
            key = {"group": "g1", "topic": "queue", "partition": "0"}
            kind, samples = families["kwire_share_partition_records"]
            assert kind == "gauge"
            assert {dict(labels)["state"]: v for (_, labels), v in samples.items()} == \
                {"available": 1, "acquired": 7, "acknowledged": 1, "archived": 1}
            assert all({k: v for k, v in labels if k != "state"} == key for _, labels in samples)
            assert value(families, "kwire_share_partition_start_offset", **key) == 0
            assert value(families, "kwire_share_partition_end_offset", **key) == 10
    run(scenario)


# -- HTTP, sans-I/O ---------------------------------------------------------------------------

GET = b"GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: */*"


def status(raw: bytes) -> int:
    return int(raw.split(b" ", 2)[1])


def test_a_request_head_is_read_whole_or_byte_by_byte():
    assert HeadReader().feed(GET + b"\r\n\r\nbody ignored") == GET
    reader = HeadReader()
    wire = GET + b"\r\n\r\n"
    assert [reader.feed(wire[i:i + 1]) for i in range(len(wire))][-1] == GET
    assert all(r is None for r in [HeadReader().feed(wire[:i]) for i in range(len(wire) - 1)])
    assert HeadReader().feed(b"GET /metrics HTTP/1.0\n\n") == b"GET /metrics HTTP/1.0"


def test_a_head_past_the_limit_is_refused_before_it_is_buffered_further():
    reader = HeadReader()
    assert reader.feed(b"GET /metrics HTTP/1.1\r\nX: " + b"a" * (MAX_HEAD_BYTES - 30)) is None
    with pytest.raises(HttpError) as caught:
        reader.feed(b"a" * 100)
    assert caught.value.status == 431


@pytest.mark.parametrize("line", [b"", b"GET", b"GET /metrics", b"GET /metrics HTTP/2", b"\x16\x03\x01\x02\x00",
                                  b"G\xc3\xa9T /metrics HTTP/1.1", b"GET metrics HTTP/1.1",
                                  b"GET /m\xff HTTP/1.1", b"GET  /metrics HTTP/1.1"])
def test_garbage_is_a_400(line):
    with pytest.raises(HttpError) as caught:
        parse_request_line(line)
    assert caught.value.status == 400
    assert status(respond(line, lambda: b"never")) == 400


def test_only_get_or_head_of_metrics_is_answered():
    rendered = []

    def render():
        rendered.append(1)
        return b"kafka_x 1.0\n"
    ok = respond(GET, render)
    assert status(ok) == 200 and ok.endswith(b"\r\n\r\nkafka_x 1.0\n") and b"Content-Length: 12\r\n" in ok
    assert f"Content-Type: {CONTENT_TYPE_LATEST}\r\n".encode() in ok      # the text format, not OpenMetrics
    assert respond(b"GET /metrics?x=1 HTTP/1.0", render).endswith(b"kafka_x 1.0\n")
    head = respond(b"HEAD /metrics HTTP/1.1", render)
    assert status(head) == 200 and head.endswith(b"\r\n\r\n") and b"Content-Length: 12" in head
    assert len(rendered) == 3
    assert status(respond(b"GET / HTTP/1.1", render)) == 404
    assert status(respond(b"GET /metrics/x HTTP/1.1", render)) == 404
    refused = respond(b"POST /metrics HTTP/1.1", render)
    assert status(refused) == 405 and b"Allow: GET, HEAD\r\n" in refused
    assert len(rendered) == 3


def test_a_failing_render_is_a_500_not_an_exception():
    def render():
        raise RuntimeError("collector bug")
    assert status(respond(GET, render)) == 500


# -- the endpoint's connections, in-process on the mock clock ----------------------------------

async def exchange(endpoint, nursery, data: bytes, *, byte_by_byte: bool = False) -> bytes:
    """Serve one memory-stream connection: send ``data`` (a byte every 0.1 s if asked), then
    EOF, and read until the endpoint closes."""
    client, server = trio.testing.memory_stream_pair()
    nursery.start_soon(endpoint.handle, server)
    try:
        for piece in ([bytes([b]) for b in data] if byte_by_byte else [data]):
            await client.send_all(piece)
            if byte_by_byte:
                await trio.sleep(0.1)
        await client.send_eof()
    except trio.BrokenResourceError:          # the endpoint closed first: what it sent is below
        pass
    received = b""
    while chunk := await client.receive_some(65536):
        received += chunk
    return received


def with_endpoint(tmp_path, body) -> None:
    """Run ``await body(endpoint, nursery)`` against a broker's /metrics endpoint; every
    connection it opened must be over by the end."""
    async def scenario():
        async with connected(tmp_path, **ON) as (broker, _client):
            endpoint = MetricsEndpoint(broker)
            async with trio.open_nursery() as nursery:
                await body(endpoint, nursery)
            assert endpoint.open == 0
    run(scenario)


def test_a_scrape_arriving_byte_by_byte_is_answered(tmp_path):
    async def body(endpoint, nursery):
        received = await exchange(endpoint, nursery, GET + b"\r\n\r\n", byte_by_byte=True)
        assert status(received) == 200 and b"kafka_server_replicamanager_partitioncount" in received
    with_endpoint(tmp_path, body)


def test_a_silent_client_is_dropped_at_the_request_timeout(tmp_path):
    async def body(endpoint, nursery):
        started = trio.current_time()
        client_end, server_end = trio.testing.memory_stream_pair()
        nursery.start_soon(endpoint.handle, server_end)
        assert await client_end.receive_some(10) == b""
        assert trio.current_time() - started == pytest.approx(REQUEST_TIMEOUT_S, abs=0.1)
    with_endpoint(tmp_path, body)


def test_silent_clients_at_the_cap_do_not_hold_off_a_scrape(tmp_path):
    async def body(endpoint, nursery):
        started = trio.current_time()
        silent = [trio.testing.memory_stream_pair() for _ in range(MAX_CONNECTIONS)]
        for _client_end, server_end in silent:
            nursery.start_soon(endpoint.handle, server_end)
            await trio.sleep(0.01)
        await trio.sleep(0.5)
        assert endpoint.open == MAX_CONNECTIONS
        # the scrape closes the oldest silent connection and is answered at once
        assert status(await exchange(endpoint, nursery, GET + b"\r\n\r\n")) == 200
        assert trio.current_time() - started < 2
        assert await silent[0][0].receive_some(10) == b""
        assert endpoint.open == MAX_CONNECTIONS - 1
        for client_end, _server_end in silent[1:]:     # the others are dropped at the request timeout
            assert await client_end.receive_some(10) == b""
    with_endpoint(tmp_path, body)


def test_over_the_cap_with_every_connection_answered_a_newcomer_is_closed(tmp_path):
    async def body(endpoint, nursery):
        endpoint.open = MAX_CONNECTIONS           # as if that many scrapes were being answered
        assert await exchange(endpoint, nursery, GET + b"\r\n\r\n") == b""
        endpoint.open = 0
        assert status(await exchange(endpoint, nursery, GET + b"\r\n\r\n")) == 200
    with_endpoint(tmp_path, body)


def test_a_connection_closed_mid_head_gets_nothing_and_harms_nothing(tmp_path):
    async def body(endpoint, nursery):
        assert await exchange(endpoint, nursery, b"GET /met") == b""
        assert status(await exchange(endpoint, nursery, b"x" * (MAX_HEAD_BYTES + 1))) == 431
        assert status(await exchange(endpoint, nursery, GET + b"\r\n\r\n")) == 200
    with_endpoint(tmp_path, body)
