"""The readable report (``--report``): rendering, JSON, the API table, the recording proxy's parsing.

Fast lane: no broker (the end-to-end run is in test_harness.py).
"""
import json
import struct

import pytest

from kwire.compat_tests import api_versions, cli, proxy, report_html
from kwire.compat_tests.runner import summarize_requests

RESULTS = [
    {"client": "kafka-python", "scenario": "round_trip", "status": "pass", "reason": None, "seconds": 1.2,
     "apis": {"Produce": [9], "Fetch": [12], "Metadata": [0, 13]}},
    {"client": "kafka-python", "scenario": "admin", "status": "fail",
     "reason": "<script>alert(1)</script> & more", "seconds": 0.4, "apis": {"CreateTopics": [7]}},
    {"client": "kcat", "scenario": "round_trip", "status": "skip", "reason": "kcat not installed", "seconds": 0.0},
]
PROBE = {"request_version": 3, "apis": {"0": [0, 11], "1": [4, 18], "3": [0, 14], "9999": [0, 1]},
         "supported_features": {"kraft.version": [0, 1]}, "finalized_features": {}, "finalized_features_epoch": 3}


def doc():
    return report_html.document(
        RESULTS, broker="Broker <x>", bootstrap="127.0.0.1:9092", started="2026-01-01T00:00:00+00:00",
        duration_s=3.5, clients=["kafka-python", "kcat"], scenarios=["round_trip", "admin"],
        client_versions={"kafka-python": "kafka-python 3.0.12", "kcat": None}, probe=PROBE,
        command="kwire compat --against 127.0.0.1:9092 --report out.html")


def test_api_rows_compare_with_kafka_4_2():
    rows = {r["name"]: r for r in api_versions.api_rows(PROBE["apis"])}
    assert rows["Produce"]["status"] == "behind" and rows["Produce"]["kafka"] == [0, 13]
    assert rows["Fetch"]["status"] == "same"
    assert rows["Metadata"]["status"] == "ahead"
    assert rows["ApiVersions"]["status"] == "missing" and rows["ApiVersions"]["broker"] is None
    assert rows["api 9999"]["status"] == "extra" and rows["api 9999"]["kafka"] is None
    keys = [r["api_key"] for r in api_versions.api_rows(PROBE["apis"])]
    assert keys == sorted(keys) and set(api_versions.KAFKA_4_2) <= set(keys)


def test_json_document_round_trips_and_counts():
    d = doc()
    again = json.loads(json.dumps(d))
    assert again == d
    assert d["summary"] == {"pass": 1, "fail": 1, "skip": 1}
    assert d["api_versions"]["reference"] == "Apache Kafka 4.2"
    assert report_html.render(again) == report_html.render(d)


def test_html_is_escaped_accessible_and_shows_everything():
    page = report_html.render(doc())
    assert page.startswith("<!DOCTYPE html>") and '<html lang="en">' in page
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt; &amp; more" in page
    assert "Broker &lt;x&gt;" in page
    # status as text and symbol, not colour alone; headers and captions for both tables
    assert "\u2713 pass" in page and "\u2717 fail" in page and "\u2013 skip" in page
    assert page.count("<caption>") >= 3 and 'scope="col"' in page and 'scope="row"' in page
    # versions negotiated per cell, and the API table beside Kafka 4.2
    assert "Produce v9" in page and "Metadata v0,13" in page
    assert "Apache Kafka 4.2" in page and "\u2193 behind Kafka" in page and "\u2717 missing" in page
    assert "kraft.version" in page
    assert "kafka-python 3.0.12" in page and "version unknown" in page
    assert "3 cells" in page


def test_html_without_api_probe_or_proxy():
    d = report_html.document(RESULTS[2:], broker="b", bootstrap="h:1", started="s", duration_s=1,
                             clients=["kcat"], scenarios=["round_trip"])
    page = report_html.render(d)
    assert "ApiVersions was not asked" in page and "kcat not installed" in page


def test_request_header_parsing_and_summary():
    frame = struct.pack(">hhih", 1, 12, 77, 6) + b"client" + b"rest"
    assert proxy.parse_request_header(frame) == (1, 12, 77, "client")
    assert proxy.parse_request_header(struct.pack(">hhih", 18, 3, 1, -1)) == (18, 3, 1, None)
    assert proxy.parse_request_header(b"\x00\x01") is None
    seen = [(3, 0, "a"), (1, 12, "a"), (3, 12, "a"), (0, 9, "compat-setup")]
    assert summarize_requests(seen) == {"Fetch": [12], "Metadata": [0, 12]}


@pytest.mark.parametrize("version", [1, 9, 12])
def test_metadata_addresses_are_rewritten_to_the_proxy(version):
    from kafka.protocol.metadata import MetadataResponse

    Broker = MetadataResponse.MetadataResponseBroker
    body = MetadataResponse(version=version, throttle_time_ms=0, controller_id=1, cluster_id="c", topics=[],
                            brokers=[Broker(node_id=1, host="kafka-1.example", port=9092, rack=None)]).encode(
        version=version)
    header = struct.pack(">i", 42) + (b"\x00" if version >= 9 else b"")   # flexible: empty tagged fields
    out = proxy.rewrite_addresses(3, version, header + bytes(body), lambda a: ("127.0.0.1", 4000 + a[1] % 10))
    assert out[:len(header)] == header
    broker = MetadataResponse.decode(out[len(header):], version=version).brokers[0]
    assert (broker.node_id, broker.host, broker.port) == (1, "127.0.0.1", 4002)


def test_against_accepts_host_port(capsys):
    assert cli.parse_args(["--against", "127.0.0.1:9092"]).against == "127.0.0.1:9092"
    assert cli.parse_args(["--against", "tansu"]).against == "tansu"
    with pytest.raises(SystemExit):
        cli.parse_args(["--against", "nonsense"])
