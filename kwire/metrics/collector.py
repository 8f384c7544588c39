"""The broker's state as Prometheus metric families, built when /metrics is scraped.

Names are those the Prometheus JMX exporter's Kafka configuration (example_configs/
kafka-2_0_0.yml: ``lowercaseOutputName``, ``kafka_$1_$2_$3`` for gauges,
``kafka_$1_$2_$3_total`` for ``...PerSec`` meters, the MBean's other keys as labels)
gives Kafka's own MBeans, so dashboards and alerts written for a Kafka broker work:

=======================================================  =============================================
kafka.server:type=BrokerTopicMetrics,name=XPerSec,topic  kafka_server_brokertopicmetrics_x_total{topic}
  (and without topic: every topic summed)                kafka_server_brokertopicmetrics_x_total
kafka.network:type=RequestMetrics,name=RequestsPerSec,   kafka_network_requestmetrics_requests_total
  request,version                                          {request,version}
kafka.network:type=RequestMetrics,name=TotalTimeMs,      kafka_network_requestmetrics_totaltimems
  request                                                  (a histogram: _bucket{le}, _sum, _count)
kafka.server:type=ReplicaManager,name=X                  kafka_server_replicamanager_x
kafka.log:type=Log,name=X,topic,partition                kafka_log_log_x{topic,partition}
kafka.server:type=socket-server-metrics,listener,        kafka_server_socketservermetrics_connection_count
  networkProcessor (connection-count)                      {listener,networkprocessor}
kafka.coordinator.group:type=GroupMetadataManager,       kafka_coordinator_group_groupmetadatamanager_x
  name=NumGroups...|NumOffsets
=======================================================  =============================================

The exporter renders TotalTimeMs's Yammer percentiles as gauges with a ``quantile``
label plus ``_count``; one name cannot be both a gauge and a histogram, so kwire keeps
the name and ``_count`` and exports buckets instead: ``histogram_quantile(0.99,
rate(kafka_network_requestmetrics_totaltimems_bucket[5m]))`` replaces
``kafka_network_requestmetrics_totaltimems{quantile="0.99"}``.

Consumer-group offsets are named as kafka_exporter names them
(``kafka_consumergroup_current_offset``, ``kafka_consumergroup_lag`` = high watermark
- committed offset, -1 for a partition of a consumed topic with no commit, the
``_sum`` per topic and ``kafka_consumergroup_members``), from the group coordinator's
committed offsets and the local logs' high watermarks.

Share-partitions (KIP-932) have no MBean Kafka's exporter configuration names, so kwire names
its own, reported by the share-partition leader (the partition's leader) for every
share-partition it holds: ``kwire_share_partition_records{group,topic,partition,state}``
counts the records between the start offset (SPSO) and the end offset (SPEO) in each state
(``available``, ``acquired``, ``acknowledged``: the in-flight records; ``archived``), with
``kwire_share_partition_start_offset`` and ``kwire_share_partition_end_offset`` beside them.
Kafka's admin API does not report these counts; the web console reads them from here.

Clients' own metrics, pushed with KIP-714 telemetry, are ``kwire_client_<metric>{client_id,
client_instance_id,principal,...}`` (``kwire.metrics.client_telemetry``).
"""
from __future__ import annotations

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector, CollectorRegistry
from prometheus_client.utils import floatToGoString

from kwire.codecs import messages

from kwire.metrics.counters import (
    ALL_TOPICS, BYTES_IN, BYTES_OUT, FAILED_FETCH, FAILED_PRODUCE, FETCH_CONSUMER, FETCH_FOLLOWER, MESSAGES_IN,
    TIME_BUCKETS_MS, TOTAL_FETCH, TOTAL_PRODUCE,
)

_REQUEST_NAMES = {FETCH_CONSUMER: "FetchConsumer", FETCH_FOLLOWER: "FetchFollower"}
_LE = [floatToGoString(ms) for ms in TIME_BUCKETS_MS] + ["+Inf"]

# (name after kafka_server_brokertopicmetrics_, counter index, Kafka's MBean name)
_TOPIC_FAMILIES = (
    ("messagesin", MESSAGES_IN, "MessagesInPerSec: records appended"),
    ("bytesin", BYTES_IN, "BytesInPerSec: record batch bytes appended from clients"),
    ("bytesout", BYTES_OUT, "BytesOutPerSec: record bytes sent to consumers"),
    ("totalproducerequests", TOTAL_PRODUCE, "TotalProduceRequestsPerSec: partition appends asked"),
    ("failedproducerequests", FAILED_PRODUCE,
     "FailedProduceRequestsPerSec: partition appends that failed other than by a known client error"),
    ("totalfetchrequests", TOTAL_FETCH, "TotalFetchRequestsPerSec: partitions read for consumers"),
    ("failedfetchrequests", FAILED_FETCH,
     "FailedFetchRequestsPerSec: partition reads that failed other than by a known client error"),
)
# kafka.coordinator.group GroupMetadataManager gauges by group state
_GROUP_STATES = (("Empty", "numgroupsempty"), ("PreparingRebalance", "numgroupspreparingrebalance"),
                 ("CompletingRebalance", "numgroupscompletingrebalance"), ("Stable", "numgroupsstable"),
                 ("Dead", "numgroupsdead"))
_GROUPS = "kafka_coordinator_group_groupmetadatamanager_"


class BrokerCollector(Collector):
    """Yields the broker's metric families; runs on the Trio thread (from the /metrics handler)."""

    def __init__(self, broker):
        self.broker = broker

    def collect(self):
        broker = self.broker
        if broker.metrics is not None:
            broker.metrics.forget_topics(broker.logs.topics)
            yield from topic_families(broker.metrics)
            yield from request_families(broker.metrics)
            yield connection_family(broker.metrics)
        yield from replica_manager_families(broker)
        yield from log_families(broker)
        yield from group_families(broker)
        yield from consumer_group_families(broker)
        shares = getattr(broker, "shares", None)
        if shares is not None:
            yield from share_partition_families(broker.logs, shares.coordinator.partitions)
        quotas = getattr(broker, "quotas", None)
        if quotas is not None:
            yield from quota_families(quotas.enforcer, broker.clock.now_ms())
        client_metrics = getattr(broker, "client_metrics", None)      # KIP-714 pushes
        if client_metrics is not None and client_metrics.telemetry is not None:
            yield from client_metrics.telemetry.families(broker.clock.now_ms())


def topic_families(metrics):
    for name, index, doc in _TOPIC_FAMILIES:
        family = CounterMetricFamily(f"kafka_server_brokertopicmetrics_{name}", doc, labels=["topic"])
        for topic, counters in sorted(metrics.topics.items()):
            family.add_metric([] if topic == ALL_TOPICS else [topic], counters[index])
        yield family


def request_families(metrics):
    requests = CounterMetricFamily("kafka_network_requestmetrics_requests",
                                   "RequestsPerSec: requests handled, by request type and version",
                                   labels=["request", "version"])
    times = HistogramMetricFamily("kafka_network_requestmetrics_totaltimems",
                                  "TotalTimeMs: ms from a request's decoding to its encoded response",
                                  labels=["request"])
    for key, stats in sorted(metrics.requests.items(), key=lambda kv: request_name(kv[0])):
        name = request_name(key)
        for version, count in enumerate(stats.versions):
            if count:
                requests.add_metric([name, str(version)], count)
        cumulative, buckets = 0, []
        for le, count in zip(_LE, stats.buckets):
            cumulative += count
            buckets.append((le, cumulative))
        times.add_metric([name], buckets, stats.seconds * 1000)
    yield requests
    yield times


def request_name(key: int) -> str:
    """Kafka's RequestMetrics name: the API's name, or FetchConsumer / FetchFollower."""
    return _REQUEST_NAMES.get(key) or messages.api_name(key)


def connection_family(metrics):
    family = GaugeMetricFamily("kafka_server_socketservermetrics_connection_count",
                               "connection-count: open client connections, by listener",
                               labels=["listener", "networkprocessor"])
    for listener, count in sorted(metrics.listener_connections.items()):
        family.add_metric([listener, "0"], count)     # kwire has one "network processor", Trio's loop
    return family


def hosted_partitions(broker):
    """(topic, partition, log) of every partition this broker holds a replica of, by topic name:
    of its own assignment (ZooKeeper's, as last applied), as in Kafka, once its log exists."""
    hosts = broker.partitions.hosts       # kwire.services.partitions
    for name, topic in sorted(broker.logs.topics.items()):
        for index, plog in enumerate(topic.partitions):
            if not plog.absent and hosts(name, index):
                yield name, index, plog


def replica_manager_families(broker):
    partitions = leaders = under = offline = 0
    leadership = broker.partitions.leadership
    for name, index, plog in hosted_partitions(broker):
        partitions += 1
        offline += plog.offline
        leads, under_replicated = leadership(name, index)
        leaders += leads
        under += under_replicated
    for name, value, doc in (
            ("partitioncount", partitions, "PartitionCount: partitions on this broker"),
            ("leadercount", leaders, "LeaderCount: partitions this broker leads"),
            ("underreplicatedpartitions", under,
             "UnderReplicatedPartitions: led partitions whose ISR is smaller than their replicas"),
            ("offlinereplicacount", offline, "OfflineReplicaCount: partitions taken offline by a storage failure")):
        yield GaugeMetricFamily(f"kafka_server_replicamanager_{name}", doc, value=value)


def log_families(broker):
    labels = ["topic", "partition"]
    size = GaugeMetricFamily("kafka_log_log_size", "Size: bytes of the partition's segment files", labels=labels)
    start = GaugeMetricFamily("kafka_log_log_logstartoffset", "LogStartOffset", labels=labels)
    end = GaugeMetricFamily("kafka_log_log_logendoffset", "LogEndOffset", labels=labels)
    segments = GaugeMetricFamily("kafka_log_log_numlogsegments", "NumLogSegments", labels=labels)
    for name, index, plog in hosted_partitions(broker):
        key = [name, str(index)]
        size.add_metric(key, plog.size_bytes())
        start.add_metric(key, plog.log_start_offset)
        end.add_metric(key, plog.log_end_offset)
        segments.add_metric(key, len(plog.segments))
    return size, start, end, segments


def group_families(broker):
    coordinator = broker.groups.coordinator
    groups = coordinator.list_groups(None)
    by_state = {state: 0 for state, _ in _GROUP_STATES}
    for _group_id, _protocol_type, state in groups:
        by_state[state] = by_state.get(state, 0) + 1
    yield GaugeMetricFamily(_GROUPS + "numgroups", "NumGroups: groups this coordinator holds", value=len(groups))
    for state, name in _GROUP_STATES:
        yield GaugeMetricFamily(_GROUPS + name, f"NumGroups{state}: groups in state {state}",
                                value=by_state[state])
    offsets = sum(len(coordinator.fetch_offsets(group_id, None)) for group_id, _, _ in groups)
    yield GaugeMetricFamily(_GROUPS + "numoffsets", "NumOffsets: committed offsets held", value=offsets)


def consumer_group_families(broker):
    """kafka_exporter's per-group families: each topic a group committed to, every partition of
    it that is on this broker (lag -1 where the group has no commit), as kafka_exporter's
    default --offset.show-all reports them.  In a cluster the lag of a partition is reported
    by the group's coordinator when it holds a replica (a follower's high watermark trails
    the leader's by a fetch)."""
    labels = ["consumergroup", "topic", "partition"]
    current = GaugeMetricFamily("kafka_consumergroup_current_offset",
                                "Current Offset of a ConsumerGroup at Topic/Partition", labels=labels)
    lag = GaugeMetricFamily("kafka_consumergroup_lag",
                            "Current Approximate Lag of a ConsumerGroup at Topic/Partition", labels=labels)
    current_sum = GaugeMetricFamily("kafka_consumergroup_current_offset_sum",
                                    "Current Offset of a ConsumerGroup at Topic for all partitions",
                                    labels=["consumergroup", "topic"])
    lag_sum = GaugeMetricFamily("kafka_consumergroup_lag_sum",
                                "Current Approximate Lag of a ConsumerGroup at Topic for all partitions",
                                labels=["consumergroup", "topic"])
    members = GaugeMetricFamily("kafka_consumergroup_members", "Amount of members in a consumer group",
                                labels=["consumergroup"])
    coordinator = broker.groups.coordinator
    hosted: dict[str, list] = {}
    for name, index, plog in hosted_partitions(broker):
        hosted.setdefault(name, []).append((index, plog))
    member_counts = {group_id: len(coordinator.describe_group(group_id).members)
                     for group_id, _protocol_type, _state in coordinator.list_groups(None)}
    for group_id, _state in coordinator.list_consumer_groups(None):      # KIP-848 groups
        member_counts[group_id] = len(coordinator.consumer_group_describe(group_id).members)
    for group_id, count in sorted(member_counts.items()):
        members.add_metric([group_id], count)
        committed: dict[str, dict[int, int]] = {}
        for topic, partition, offset, *_rest in coordinator.fetch_offsets(group_id, None):
            committed.setdefault(topic, {})[partition] = offset
        for topic_name, offsets in sorted(committed.items()):
            if topic_name not in hosted:
                continue
            offset_total = lag_total = 0
            for index, plog in hosted[topic_name]:
                offset = offsets.get(index, -1)
                behind = -1 if offset < 0 else plog.high_watermark - offset
                current.add_metric([group_id, topic_name, str(index)], offset)
                lag.add_metric([group_id, topic_name, str(index)], behind)
                offset_total += offset
                lag_total += behind if offset >= 0 else 0
            current_sum.add_metric([group_id, topic_name], offset_total)
            lag_sum.add_metric([group_id, topic_name], lag_total)
    return current, lag, current_sum, lag_sum, members


def share_partition_families(logs, partitions):
    """kwire's share-partition families from ``partitions`` ({(group, topic id, partition):
    SharePartition}, the share coordinator's: those this broker leads)."""
    labels = ["group", "topic", "partition"]
    records = GaugeMetricFamily("kwire_share_partition_records",
                                "Records between the share-partition start and end offsets, by delivery state "
                                "(available + acquired + acknowledged: in flight)", labels=labels + ["state"])
    start = GaugeMetricFamily("kwire_share_partition_start_offset",
                              "The share-partition start offset (SPSO): every record below it is delivered "
                              "and acknowledged or archived", labels=labels)
    end = GaugeMetricFamily("kwire_share_partition_end_offset",
                            "The share-partition end offset (SPEO): the next offset never yet acquired",
                            labels=labels)
    rows = []
    for (group_id, topic_id, index), sp in list(partitions.items()):
        topic = logs.topics_by_id.get(topic_id)
        if topic is not None:
            rows.append((group_id, topic.name, index, sp))
    for group_id, topic_name, index, sp in sorted(rows, key=lambda r: r[:3]):
        key = [group_id, topic_name, str(index)]
        for state, count in sp.record_counts().items():
            records.add_metric(key + [state.name.lower()], count)
        start.add_metric(key, sp.spso)
        end.add_metric(key, sp.speo)
    return records, start, end


# Kafka's quota sensors (kafka.server:type=Produce|Fetch|Request|ControllerMutation,user,client-id),
# by quota key: (family prefix, name of the rate)
_QUOTA_FAMILIES = {"producer_byte_rate": ("kafka_server_produce_", "byte_rate"),
                   "consumer_byte_rate": ("kafka_server_fetch_", "byte_rate"),
                   "request_percentage": ("kafka_server_request_", "request_time"),
                   "controller_mutation_rate": ("kafka_server_controllermutation_", "mutation_rate")}


def quota_families(enforcer, now_ms: int):
    """Per client (the quota's user and client-id tags) and quota type: the measured rate, the
    throttle time served (ms, a counter) and the throttled responses."""
    for key, sensors in enforcer.sensors.items():
        if not sensors:
            continue
        prefix, rate_name = _QUOTA_FAMILIES[key]
        labels = ["user", "client_id"]
        rate = GaugeMetricFamily(prefix + rate_name, f"{key}: the rate measured over the quota window", labels=labels)
        throttle = CounterMetricFamily(prefix + "throttle_time_ms", f"{key}: throttle time served, in ms", labels=labels)
        throttled = CounterMetricFamily(prefix + "throttled", f"{key}: responses throttled", labels=labels)
        for (user, client_id), sensor in list(sensors.items()):
            rate.add_metric([user, client_id], sensor.rate.measure(now_ms))
            throttle.add_metric([user, client_id], sensor.throttle_ms_total)
            throttled.add_metric([user, client_id], sensor.throttled)
        yield rate
        yield throttle
        yield throttled


def registry_for(broker) -> CollectorRegistry:
    """A registry of the broker's families and the process's own (CPU, memory, descriptors)."""
    from prometheus_client import ProcessCollector

    registry = CollectorRegistry(auto_describe=False)
    registry.register(BrokerCollector(broker))
    ProcessCollector(registry=registry)
    return registry
