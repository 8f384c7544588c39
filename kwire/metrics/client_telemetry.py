"""Clients' own metrics (KIP-714 pushes) as Prometheus gauges on /metrics.

A push carries an OpenTelemetry ``MetricsData`` (v1) protobuf.  Each data point becomes a
gauge named ``kwire_client_<name>``: the OTLP metric name with Kafka's ``org.apache.kafka.``
prefix dropped and every character outside ``[a-zA-Z0-9_]`` made ``_``
(``org.apache.kafka.consumer.fetch.manager.fetch.latency.avg`` is
``kwire_client_consumer_fetch_manager_fetch_latency_avg``).  Labels: ``client_id`` (the
request header's), ``client_instance_id``, ``principal``, then the data point's own attributes
(``node_id``, ``topic``, ``partition``, ...), at most MAX_ATTRIBUTES of them, values cut to
MAX_LABEL_CHARS.  Gauges and cumulative sums are the value pushed; delta sums (kwire asks for
deltas, as Kafka does) are added up, so a counter reads as its total since the client's first
push; histograms and summaries give ``_count`` and ``_sum``.

Bounds: at most ``max_clients`` client instances and ``max_series`` series in all (a push
that would pass it keeps the series it already had and drops the new ones, counted in
``kwire_client_telemetry_dropped_series_total``); a client's series go when it has not pushed
for 3 of its push intervals, when it ends with a terminating push, or when it matches no
subscription any more.
"""
from __future__ import annotations

import dataclasses
import re

from google.protobuf.message import DecodeError
from opentelemetry.proto.metrics.v1 import metrics_pb2
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from kwire.codecs.errors import ErrorCode, KafkaApiError

PREFIX = "kwire_client_"
KAFKA_PREFIX = "org.apache.kafka."
MAX_ATTRIBUTES = 6
MAX_LABEL_CHARS = 128
OWN_LABELS = ("client_id", "client_instance_id", "principal")
_UNSAFE = re.compile(r"[^a-zA-Z0-9_]")
DELTA = metrics_pb2.AGGREGATION_TEMPORALITY_DELTA


def prometheus_name(otlp_name: str) -> str:
    if otlp_name.startswith(KAFKA_PREFIX):
        otlp_name = otlp_name[len(KAFKA_PREFIX):]
    return PREFIX + _UNSAFE.sub("_", otlp_name)


def _label_name(key: str) -> str:
    name = _UNSAFE.sub("_", key)
    return "_" + name if name[:1].isdigit() else name


def _attribute_value(value) -> str:
    kind = value.WhichOneof("value")
    return "" if kind is None else str(getattr(value, kind))[:MAX_LABEL_CHARS]


def _attributes(point) -> tuple[tuple[str, str], ...]:
    out = {}
    for kv in point.attributes:
        name = _label_name(kv.key)
        if name and name not in OWN_LABELS and not name.startswith("__") and len(out) < MAX_ATTRIBUTES:
            out[name] = _attribute_value(kv.value)
    return tuple(sorted(out.items()))


@dataclasses.dataclass(frozen=True)
class Sample:
    name: str                                   # the Prometheus name
    attributes: tuple[tuple[str, str], ...]
    value: float
    delta: bool                                 # add to the last value rather than replace it
    doc: str = ""


def _number(point) -> float:
    return float(point.as_double if point.WhichOneof("value") == "as_double" else point.as_int)


def decode_metrics(payload: bytes) -> list[Sample]:
    """The samples of an OTLP MetricsData.  Raises KafkaApiError(INVALID_RECORD) when the bytes
    are not one."""
    data = metrics_pb2.MetricsData()
    try:
        data.ParseFromString(payload)
    except (DecodeError, ValueError, RuntimeError) as exc:
        raise KafkaApiError(ErrorCode.INVALID_RECORD, f"Telemetry payload is not OTLP MetricsData: {exc}") from None
    out = []
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                out.extend(_samples(metric))
    return out


def _samples(metric) -> list[Sample]:
    name, kind, doc = prometheus_name(metric.name), metric.WhichOneof("data"), metric.description[:200]
    if kind == "gauge":
        return [Sample(name, _attributes(p), _number(p), False, doc) for p in metric.gauge.data_points]
    if kind == "sum":
        delta = metric.sum.aggregation_temporality == DELTA and metric.sum.is_monotonic
        return [Sample(name, _attributes(p), _number(p), delta, doc) for p in metric.sum.data_points]
    if kind in ("histogram", "summary"):
        points = getattr(metric, kind).data_points
        delta = kind == "histogram" and metric.histogram.aggregation_temporality == DELTA
        return [s for p in points for s in (Sample(name + "_count", _attributes(p), float(p.count), delta, doc),
                                             Sample(name + "_sum", _attributes(p), float(p.sum), delta, doc))]
    return []          # exponential histograms: not rendered


@dataclasses.dataclass
class ClientSeries:
    labels: tuple[str, str, str]               # client_id, client_instance_id, principal
    interval_ms: int
    pushed_ms: int
    values: dict[tuple[str, tuple], float] = dataclasses.field(default_factory=dict)


class ClientTelemetryStore:
    """The latest values every client pushed, bounded (module docstring).  Runs on the Trio thread."""

    def __init__(self, max_clients: int, max_series: int):
        self.max_clients, self.max_series = max_clients, max_series
        self.clients: dict[object, ClientSeries] = {}
        self.docs: dict[str, str] = {}
        self.series = 0
        self.dropped = 0
        self.pushes = 0

    def record(self, instance_id, client_id: str, principal: str, interval_ms: int, samples: list[Sample],
               now_ms: int) -> None:
        self.expire(now_ms)
        client = self.clients.get(instance_id)
        if client is None:
            if len(self.clients) >= self.max_clients:
                self.forget(min(self.clients, key=lambda i: self.clients[i].pushed_ms))
            client = self.clients[instance_id] = ClientSeries((client_id, str(instance_id), principal),
                                                              interval_ms, now_ms)
        client.interval_ms, client.pushed_ms = interval_ms, now_ms
        self.pushes += 1
        for s in samples:
            key = (s.name, s.attributes)
            if key not in client.values:
                if self.series >= self.max_series:
                    self.dropped += 1
                    continue
                self.series += 1
                client.values[key] = 0.0
            client.values[key] = client.values[key] + s.value if s.delta else s.value
            if s.doc and s.name not in self.docs and len(self.docs) < self.max_series:
                self.docs[s.name] = s.doc

    def forget(self, instance_id) -> None:
        client = self.clients.pop(instance_id, None)
        if client is not None:
            self.series -= len(client.values)

    def expire(self, now_ms: int) -> None:
        for instance_id in [i for i, c in self.clients.items() if now_ms - c.pushed_ms > 3 * c.interval_ms]:
            self.forget(instance_id)

    def families(self, now_ms: int):
        """The gauges of every client's series, then the store's own counts."""
        self.expire(now_ms)
        by_name: dict[str, list] = {}
        for client in self.clients.values():
            for (name, attributes), value in client.values.items():
                by_name.setdefault(name, []).append((client.labels, attributes, value))
        for name in sorted(by_name):
            rows = by_name[name]
            extra = sorted({k for _, attributes, _ in rows for k, _ in attributes})
            family = GaugeMetricFamily(name, self.docs.get(name) or "a client's own metric (KIP-714 push)",
                                       labels=[*OWN_LABELS, *extra])
            for own, attributes, value in rows:
                found = dict(attributes)
                family.add_metric([*own, *(found.get(k, "") for k in extra)], value)
            yield family
        yield GaugeMetricFamily("kwire_client_telemetry_clients", "client instances whose pushed metrics are kept",
                                value=len(self.clients))
        yield GaugeMetricFamily("kwire_client_telemetry_series", "client metric series kept", value=self.series)
        yield CounterMetricFamily("kwire_client_telemetry_dropped_series",
                                  "pushed series dropped over kwire.client.telemetry.max.series", value=self.dropped)
        yield CounterMetricFamily("kwire_client_telemetry_pushes", "PushTelemetry requests taken", value=self.pushes)
