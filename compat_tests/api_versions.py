"""What a broker advertises in ApiVersions, beside what Apache Kafka 4.2 advertises.

``probe(bootstrap)`` asks the broker with kafka-python's ApiVersions classes (v3, which also
carries the supported and finalized features; v0 when the broker refuses v3) and
``api_rows(probe_result)`` lines every API key up against ``KAFKA_4_2``.
"""
from __future__ import annotations

import socket
import struct

# Apache Kafka 4.2's broker listener, api_key: (name, min version, max version): the stable
# versions of clients/src/main/resources/common/message/*Request.json ("validVersions", minus
# a "latestVersionUnstable" top version) at Kafka's 4.2 release, as a 4.2 broker advertises them
# in ApiVersions.  Taken from kafka-python 3.0.12's captured table of a 4.2 broker
# (kafka/protocol/broker_version_data.py, BROKER_API_VERSIONS[(4, 2)]) and checked against the
# JSON specs it ships: they agree except where trunk moved on after 4.2 (DescribeLogDirs v5,
# unstable InitProducerId v6).  Produce still advertises v0-v2 although its spec says 3-13: Kafka
# 4.0 kept them for old librdkafka clients (KAFKA-18659).
KAFKA_4_2 = {
    0: ("Produce", 0, 13), 1: ("Fetch", 4, 18), 2: ("ListOffsets", 1, 11),
    3: ("Metadata", 0, 13), 8: ("OffsetCommit", 2, 10), 9: ("OffsetFetch", 1, 10),
    10: ("FindCoordinator", 0, 6), 11: ("JoinGroup", 0, 9), 12: ("Heartbeat", 0, 4),
    13: ("LeaveGroup", 0, 5), 14: ("SyncGroup", 0, 5), 15: ("DescribeGroups", 0, 6),
    16: ("ListGroups", 0, 5), 17: ("SaslHandshake", 0, 1), 18: ("ApiVersions", 0, 4),
    19: ("CreateTopics", 2, 7), 20: ("DeleteTopics", 1, 6), 21: ("DeleteRecords", 0, 2),
    22: ("InitProducerId", 0, 5), 23: ("OffsetForLeaderEpoch", 2, 4), 24: ("AddPartitionsToTxn", 0, 5),
    25: ("AddOffsetsToTxn", 0, 4), 26: ("EndTxn", 0, 5), 27: ("WriteTxnMarkers", 1, 2),
    28: ("TxnOffsetCommit", 0, 5), 29: ("DescribeAcls", 1, 3), 30: ("CreateAcls", 1, 3),
    31: ("DeleteAcls", 1, 3), 32: ("DescribeConfigs", 1, 4), 33: ("AlterConfigs", 0, 2),
    34: ("AlterReplicaLogDirs", 1, 2), 35: ("DescribeLogDirs", 1, 4), 36: ("SaslAuthenticate", 0, 2),
    37: ("CreatePartitions", 0, 3), 38: ("CreateDelegationToken", 1, 3), 39: ("RenewDelegationToken", 1, 2),
    40: ("ExpireDelegationToken", 1, 2), 41: ("DescribeDelegationToken", 1, 3), 42: ("DeleteGroups", 0, 2),
    43: ("ElectLeaders", 0, 2), 44: ("IncrementalAlterConfigs", 0, 1), 45: ("AlterPartitionReassignments", 0, 1),
    46: ("ListPartitionReassignments", 0, 0), 47: ("OffsetDelete", 0, 0), 48: ("DescribeClientQuotas", 0, 1),
    49: ("AlterClientQuotas", 0, 1), 50: ("DescribeUserScramCredentials", 0, 0), 51: ("AlterUserScramCredentials", 0, 0),
    55: ("DescribeQuorum", 0, 2), 57: ("UpdateFeatures", 0, 2), 60: ("DescribeCluster", 0, 2),
    61: ("DescribeProducers", 0, 0), 64: ("UnregisterBroker", 0, 0), 65: ("DescribeTransactions", 0, 0),
    66: ("ListTransactions", 0, 2), 68: ("ConsumerGroupHeartbeat", 0, 1), 69: ("ConsumerGroupDescribe", 0, 1),
    # 71/72: advertised by a 4.2 broker only when a client telemetry receiver is configured
    # (KIP-714; kafka-python's captured broker had none)
    71: ("GetTelemetrySubscriptions", 0, 0), 72: ("PushTelemetry", 0, 0),
    74: ("ListConfigResources", 0, 1), 75: ("DescribeTopicPartitions", 0, 0), 76: ("ShareGroupHeartbeat", 1, 1),
    77: ("ShareGroupDescribe", 1, 1), 78: ("ShareFetch", 1, 2), 79: ("ShareAcknowledge", 1, 2),
    80: ("AddRaftVoter", 0, 1), 81: ("RemoveRaftVoter", 0, 0), 83: ("InitializeShareGroupState", 0, 0),
    84: ("ReadShareGroupState", 0, 0), 85: ("WriteShareGroupState", 0, 1), 86: ("DeleteShareGroupState", 0, 0),
    87: ("ReadShareGroupStateSummary", 0, 1), 88: ("StreamsGroupHeartbeat", 0, 0), 89: ("StreamsGroupDescribe", 0, 0),
    90: ("DescribeShareGroupOffsets", 0, 1), 91: ("AlterShareGroupOffsets", 0, 0), 92: ("DeleteShareGroupOffsets", 0, 0),
}
KAFKA_4_2_NAME = "Apache Kafka 4.2"
_I32 = struct.Struct(">i")


def api_name(api_key: int) -> str:
    if api_key in KAFKA_4_2:
        return KAFKA_4_2[api_key][0]
    try:
        from kafka.protocol.api_key import ApiKey
        return ApiKey(api_key).name
    except ValueError:
        return f"api {api_key}"


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError("the broker closed the connection during ApiVersions")
        out += chunk
    return bytes(out)


def _ask(bootstrap: str, version: int, timeout: float):
    from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

    host, _, port = bootstrap.rpartition(":")
    kw = {"client_software_name": "kwire-compat", "client_software_version": "1"} if version >= 3 else {}
    request = ApiVersionsRequest(version=version, **kw)
    request.with_header(correlation_id=1, client_id="kwire-compat")
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        sock.sendall(request.encode(header=True, framed=True))
        size = _I32.unpack(_recv_exactly(sock, 4))[0]
        frame = _recv_exactly(sock, size)
    return ApiVersionsResponse.decode(frame[4:], version=version)   # v0 response header: correlation_id


def probe(bootstrap: str, timeout: float = 10) -> dict:
    """The broker's ApiVersions answer as plain data (the ``apis`` part of the report's JSON)."""
    response, asked = None, None
    for version in (3, 0):
        try:
            response, asked = _ask(bootstrap, version, timeout), version
        except (OSError, ConnectionError, ValueError) as exc:
            error = f"{type(exc).__name__}: {exc}"
            continue
        if response.error_code == 0:
            break
        error = f"error code {response.error_code}"
    if response is None or response.error_code != 0:
        return {"error": f"ApiVersions failed: {error}", "apis": {}}

    def features(name):
        items = getattr(response, name, None) or []
        return {f.name: [f.min_version if hasattr(f, "min_version") else f.min_version_level,
                         f.max_version if hasattr(f, "max_version") else f.max_version_level]
                for f in items}

    out = {"request_version": asked,
           "apis": {str(a.api_key): [a.min_version, a.max_version] for a in response.api_keys}}
    if asked >= 3:
        out["supported_features"] = features("supported_features")
        out["finalized_features"] = features("finalized_features")
        out["finalized_features_epoch"] = getattr(response, "finalized_features_epoch", -1)
    return out


def api_rows(apis: dict) -> list[dict]:
    """One row per API key the broker or Kafka 4.2 has, in api_key order.  ``status``: "same"
    (the broker's max is Kafka 4.2's), "behind" (lower max), "ahead" (higher max), "missing"
    (Kafka 4.2 has it, the broker does not), "extra" (the broker has it, Kafka 4.2 does not)."""
    broker = {int(k): tuple(v) for k, v in apis.items()}
    rows = []
    for key in sorted(set(broker) | set(KAFKA_4_2)):
        b, k = broker.get(key), KAFKA_4_2.get(key)
        if b is None:
            status = "missing"
        elif k is None:
            status = "extra"
        else:
            status = "same" if b[1] == k[2] else "behind" if b[1] < k[2] else "ahead"
        rows.append({"api_key": key, "name": api_name(key),
                     "broker": list(b) if b else None, "kafka": [k[1], k[2]] if k else None,
                     "status": status})
    return rows
