"""Client telemetry (KIP-714): the client-metrics subscriptions and the clients' pushes.

Subscriptions are CLIENT_METRICS config resources (type 16), set with IncrementalAlterConfigs
or AlterConfigs (``kwire configs --entity-type client-metrics``, kafka-client-metrics.sh),
described with DescribeConfigs and listed with ListConfigResources.  Their rules are
``kwire.admin.client_metrics``.  Where they are kept is a ``ClientMetricsConfigStore``
chosen when the broker is built, like the group configs: on a single node
``FileClientMetricsConfigStore``, ``<first log dir>/client-metrics-configs.json`` ({name:
{key: value}}), replaced whole off the Trio thread; in a cluster
``kwire.cluster.client_metrics.ZkClientMetricsConfigStore``, ``/config/client-metrics/<name>``
as ZooKeeper-era Kafka kept them, applied by every broker from each snapshot (``apply_all``).

The pushes' metrics go to ``kwire.metrics.client_telemetry`` and are served on /metrics; the
telemetry APIs are advertised only when ``prometheus.listener`` is set (Kafka advertises them
only when a telemetry receiver is configured).
"""
from __future__ import annotations

import uuid
from typing import Protocol, runtime_checkable

from kwire.admin.client_metrics import CONFIGS, ClientMetricsManager, subscription
from kwire.codecs.errors import ErrorCode, KafkaApiError
from kwire.services.group_configs import FileGroupConfigStore

FILE_NAME = "client-metrics-configs.json"
CLIENT_METRICS_CONFIG_SOURCE, DEFAULT_CONFIG_SOURCE = 7, 5    # DYNAMIC_CLIENT_METRICS_CONFIG, DEFAULT_CONFIG
STRING_TYPE, INT_TYPE, LIST_TYPE = 2, 3, 7


@runtime_checkable
class ClientMetricsConfigStore(Protocol):
    def load(self) -> dict[str, dict[str, str]]:
        """Every subscription's configs at start-up.  Blocking (before serving)."""

    async def save(self, name: str, configs: dict[str, str], every: dict[str, dict[str, str]]) -> None:
        """Make ``configs`` those of subscription ``name`` (empty: it goes); ``every``: all of
        them with it.  Raises what the store raises."""


class FileClientMetricsConfigStore(FileGroupConfigStore):
    """One node: ``<log dir>/client-metrics-configs.json``, replaced whole (as the group configs'
    file; ``save(name, configs, every)`` writes ``every``)."""

    def __init__(self, log_dir: str):
        super().__init__(log_dir, FILE_NAME)


def client_attributes(client_id: str | None, software: tuple[str, str] | None, peer: str) -> dict:
    """The match selectors' values for a connection (client_instance_id is added per instance)."""
    host, _, port = peer.rpartition(":") if ":" in peer else (peer, "", "")
    return {"client_id": client_id or "", "client_software_name": software[0] if software else None,
            "client_software_version": software[1] if software else None,
            "client_source_address": host.strip("[]") or None, "client_source_port": port or None}


class ClientMetricsService:
    """The subscriptions (``configs``, persisted by ``store``), the client instances
    (``manager``) and, with prometheus.listener, the pushed metrics (``telemetry``)."""

    def __init__(self, config, store: ClientMetricsConfigStore, clock):
        self.store, self.clock = store, clock
        self.configs: dict[str, dict[str, str]] = {}
        self.telemetry = None
        if config.value_of("prometheus.listener"):
            from kwire.metrics.client_telemetry import ClientTelemetryStore
            self.telemetry = ClientTelemetryStore(config.value_of("kwire.client.telemetry.max.clients"),
                                                  config.value_of("kwire.client.telemetry.max.series"))
        self.manager = ClientMetricsManager(config.value_of("telemetry.max.bytes"),
                                            config.value_of("kwire.client.telemetry.max.clients"), self._dropped)

    def _dropped(self, instance_id) -> None:
        if self.telemetry is not None:
            self.telemetry.forget(instance_id)

    def load(self) -> None:
        self.apply_all(self.store.load())

    def apply_all(self, configs: dict[str, dict[str, str]] | None) -> None:
        """Make ``configs`` (every subscription's: the file's, or a ZooKeeper snapshot's) current."""
        if configs is None:
            return
        self.configs = {name: dict(values) for name, values in configs.items() if values}
        self.manager.set_subscriptions(self.configs)

    def names(self) -> list[str]:
        return sorted(self.configs)

    # -- DescribeConfigs / AlterConfigs ------------------------------------------------------
    def describe(self, name: str, keys) -> list[dict]:
        """DescribeConfigs entries of subscription ``name`` (``keys`` None: all).  A name with
        no subscription describes the defaults, as Kafka does."""
        current = self.configs.get(name, {})
        out = []
        for key, (default, doc) in CONFIGS.items():
            if keys and key not in keys:
                continue
            set_ = key in current
            out.append({"name": key, "value": current.get(key, default), "read_only": False,
                        "is_default": not set_,
                        "config_source": CLIENT_METRICS_CONFIG_SOURCE if set_ else DEFAULT_CONFIG_SOURCE,
                        "is_sensitive": False, "synonyms": [], "documentation": doc,
                        "config_type": INT_TYPE if key == "interval.ms" else LIST_TYPE})
        return out

    async def alter(self, name: str, ops, incremental: bool, validate_only: bool) -> None:
        """``ops``: (name, operation, value) triples (IncrementalAlterConfigs: SET 0, DELETE 1,
        APPEND 2, SUBTRACT 3 on the list keys) or (name, value) pairs (AlterConfigs: replaces
        all).  Raises KafkaApiError(INVALID_REQUEST | INVALID_CONFIG)."""
        new = dict(self.configs.get(name, {})) if incremental else {}
        for key, *rest in ops:
            op, value = rest if incremental else (0, rest[0])
            new = _apply(new, key, op, value)
        subscription(name, new)                 # raises when invalid
        if validate_only:
            return
        configs = dict(self.configs)
        if new:
            configs[name] = new
        else:
            configs.pop(name, None)
        await self.store.save(name, new, configs)
        self.apply_all(configs)

    # -- the telemetry APIs -------------------------------------------------------------------
    def get_subscriptions(self, requested_id, attributes: dict) -> dict:
        """GetTelemetrySubscriptions' fields; raises KafkaApiError as the manager does."""
        return self.manager.get_subscriptions(requested_id, attributes, self.clock.now_ms(), uuid.uuid4())

    def push(self, request, attributes: dict, principal: str) -> None:
        """Take a PushTelemetry; raises KafkaApiError with Kafka's code."""
        now = self.clock.now_ms()
        inst, payload = self.manager.push(request.client_instance_id, request.subscription_id,
                                          request.terminating, request.compression_type, request.metrics,
                                          attributes, now)
        if self.telemetry is not None and payload:
            from kwire.metrics.client_telemetry import decode_metrics
            samples = decode_metrics(payload)            # INVALID_RECORD when not OTLP
            self.telemetry.record(inst.instance_id, attributes.get("client_id") or "", principal,
                                  inst.interval_ms, samples, now)
        if request.terminating:
            self.manager.drop(inst.instance_id)


def _apply(configs: dict[str, str], key: str, op: int, value) -> dict[str, str]:
    if op == 1:                                            # DELETE
        configs.pop(key, None)
    elif op == 0:                                          # SET
        if value is None:
            raise KafkaApiError(ErrorCode.INVALID_CONFIG, f"Null value not supported for: {key}")
        configs[key] = value
    elif op in (2, 3) and key in ("metrics", "match"):       # APPEND / SUBTRACT on a list
        items = [i for i in (configs.get(key) or "").split(",") if i.strip()]
        given = [i for i in (value or "").split(",") if i.strip()]
        items = items + [i for i in given if i not in items] if op == 2 else [i for i in items if i not in given]
        configs[key] = ",".join(items)
    else:
        raise KafkaApiError(ErrorCode.INVALID_CONFIG, f"Operation {op} is not supported for {key}")
    return configs
