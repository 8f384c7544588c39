"""Client quotas (KIP-13 byte rates, KIP-124 request percentage, KIP-257 quota resolution,
KIP-546 the admin APIs, KIP-599 controller mutations): the model, sans I/O.  Time is passed in
(``now_ms``); nothing here reads a clock.

Entities.  A quota entity is a user, a client id, or a user and a client id, each name either a
real name or the default (``None`` here, ``<default>`` in ZooKeeper, a null ``entity_name`` on
the wire).  ``Entity`` is a tuple of ``(entity_type, name)`` pairs sorted by type::

    (("user", "alice"),)                            /config/users/alice
    (("client-id", None), ("user", "alice"))       /config/users/alice/clients/<default>
    (("client-id", "app"),)                         /config/clients/app

Resolution (Kafka's DefaultQuotaCallback, per quota key): the first of these that holds the key
gives the quota of a connection of ``user`` with ``client-id``, and the *metric tags* that say
which connections share one rate (user and/or client id, "" for a tag not shared)::

    1 /config/users/<user>/clients/<client-id>        (user, client-id)
    2 /config/users/<user>/clients/<default>          (user, client-id)
    3 /config/users/<user>                            (user, "")
    4 /config/users/<default>/clients/<client-id>     (user, client-id)
    5 /config/users/<default>/clients/<default>       (user, client-id)
    6 /config/users/<default>                         (user, "")
    7 /config/clients/<client-id>                     ("", client-id)
    8 /config/clients/<default>                       ("", client-id)

Rates.  ``SampledRate`` is Kafka's ``Rate`` over ``quota.window.num`` samples of
``quota.window.size.seconds``: the sum of the live samples divided by the time they cover,
taken to be at least ``num - 1`` whole windows (so a new client does not measure a huge
rate).  A recorded value that takes the rate above the bound is throttled for
``(rate - bound) / bound * window`` ms (Kafka's QuotaUtils.throttleTime); request-percentage
throttles are capped at one window (ClientRequestQuotaManager).  ``TokenBucket`` is KIP-599's
controller-mutation quota: ``num * window_s * rate`` tokens of burst, refilled at the rate;
below zero tokens a request is throttled for ``-tokens / rate`` seconds.

IP entities (``connection_creation_rate``) are not implemented: they are refused with
INVALID_REQUEST, as unknown entity types are.
"""
from __future__ import annotations

import math
import urllib.parse
from typing import Iterable, Iterator, Mapping, NamedTuple, Sequence

from kwire.codecs.errors import ErrorCode

USER, CLIENT_ID, IP = "user", "client-id", "ip"
PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
# Kafka's QuotaConfig.userAndClientQuotaConfigs: key -> whether the value is a whole number (LONG)
QUOTA_KEYS: dict[str, bool] = {PRODUCER_BYTE_RATE: True, CONSUMER_BYTE_RATE: True,
                               REQUEST_PERCENTAGE: False, CONTROLLER_MUTATION_RATE: False}
DEFAULT_NAME = "<default>"            # Kafka's ConfigEntityName.Default in ZooKeeper paths
MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY = 0, 1, 2
DEFAULT_WINDOW_NUM = 11               # quota.window.num
DEFAULT_WINDOW_SIZE_S = 1             # quota.window.size.seconds
SENSOR_EXPIRY_MS = 3_600_000          # Kafka's quota sensors' inactive-sensor expiry
SWEEP_INTERVAL_MS = 60_000

Entity = tuple[tuple[str, "str | None"], ...]


class QuotaError(Exception):
    """A request (or one entity of it) refused: ``code`` and Kafka's message."""

    def __init__(self, code: ErrorCode, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


# -- entities and ZooKeeper paths ------------------------------------------------------------
def entity(user: str | None | bool = False, client_id: str | None | bool = False) -> Entity:
    """An Entity; ``False`` leaves a type out, ``None`` is its default."""
    parts = []
    if client_id is not False:
        parts.append((CLIENT_ID, client_id))
    if user is not False:
        parts.append((USER, user))
    return tuple(parts)


def sanitize(name: str) -> str:
    """Kafka's ``Sanitizer.sanitize`` (URL-encoding as java.net.URLEncoder, ``*`` encoded,
    a space as ``%20``): a name as a ZooKeeper node name."""
    return urllib.parse.quote(name, safe="", encoding="utf-8").replace("~", "%7E")


def desanitize(node: str) -> str:
    return urllib.parse.unquote_plus(node, encoding="utf-8", errors="replace")


def _node(name: str | None) -> str:
    return DEFAULT_NAME if name is None else sanitize(name)


def _name(node: str) -> str | None:
    return None if node == DEFAULT_NAME else desanitize(node)


def entity_path(e: Entity) -> str:
    """The entity's path under /config: ``users/alice``, ``users/<default>/clients/app``,
    ``clients/<default>``."""
    d = dict(e)
    if USER in d and CLIENT_ID in d:
        return f"users/{_node(d[USER])}/clients/{_node(d[CLIENT_ID])}"
    if USER in d:
        return f"users/{_node(d[USER])}"
    return f"clients/{_node(d[CLIENT_ID])}"


def entity_of_path(path: str) -> Entity | None:
    """The Entity of a /config-relative path (a change notification's ``entity_path``); None
    for a path that is no quota entity (a topic, a broker, ...)."""
    parts = path.split("/")
    if len(parts) == 2 and parts[0] == "users" and parts[1]:
        return entity(user=_name(parts[1]))
    if len(parts) == 2 and parts[0] == "clients" and parts[1]:
        return entity(client_id=_name(parts[1]))
    if len(parts) == 4 and parts[0] == "users" and parts[2] == "clients" and parts[1] and parts[3]:
        return entity(user=_name(parts[1]), client_id=_name(parts[3]))
    return None


def principal_user(principal: str) -> str:
    """The user quotas name for a principal (``User:alice`` -> ``alice``)."""
    kind, sep, name = principal.partition(":")
    return name if sep else principal


def describe_entity(e: Entity) -> str:
    return ", ".join(f"{t}={'<default>' if n is None else n}" for t, n in e)


# -- values ----------------------------------------------------------------------------------
def format_value(key: str, value: float) -> str:
    """A value as ZooKeeper-era Kafka stores it: a whole number for the byte rates (LONG), Java's
    Double.toString otherwise (``200.0``)."""
    if QUOTA_KEYS.get(key):
        return str(int(round(value)))
    return repr(float(value))


def parse_values(config: Mapping[str, str]) -> tuple[dict[str, float], list[str]]:
    """The quota values of a config znode (other keys, e.g. SCRAM credentials, ignored) and a
    message per quota key whose value is no positive number (left out)."""
    values, problems = {}, []
    for key, text in config.items():
        if key not in QUOTA_KEYS:
            continue
        try:
            value = float(text)
        except (TypeError, ValueError):
            problems.append(f"{key}={text!r} is not a number")
            continue
        if not value > 0 or math.isinf(value):
            problems.append(f"{key}={text!r} is not a positive number")
            continue
        values[key] = value
    return values, problems


# -- AlterClientQuotas validation (Kafka's ClientQuotaControlManager) -------------------------
def validate_entity(components: Sequence[tuple[str, str | None]]) -> Entity:
    """The Entity of a request's (entity_type, entity_name) list.  Raises QuotaError."""
    if not components:
        raise QuotaError(ErrorCode.INVALID_REQUEST, "Invalid empty client quota entity")
    seen: dict[str, str | None] = {}
    for entity_type, name in components:
        if entity_type in seen:
            raise QuotaError(ErrorCode.INVALID_REQUEST,
                             f"Invalid client quota entity, duplicate entity entry {entity_type}")
        if entity_type not in (USER, CLIENT_ID, IP):
            raise QuotaError(ErrorCode.INVALID_REQUEST, f"Unhandled client quota entity type: {entity_type}")
        if name is not None and name == "":
            raise QuotaError(ErrorCode.INVALID_REQUEST, f"Empty {entity_type} not supported")
        seen[entity_type] = name
    if IP in seen:
        if USER in seen or CLIENT_ID in seen:
            raise QuotaError(ErrorCode.INVALID_REQUEST, "Invalid quota entity combination, IP entity should "
                                                        "not be combined with User or ClientId")
        raise QuotaError(ErrorCode.INVALID_REQUEST, "IP quotas (connection_creation_rate) are not supported by kwire")
    return tuple(sorted(seen.items()))


def validate_value(key: str, value: float) -> None:
    """Raises QuotaError unless ``key`` is a user/client quota and ``value`` valid for it."""
    whole = QUOTA_KEYS.get(key)
    if whole is None:
        raise QuotaError(ErrorCode.INVALID_REQUEST, f"Invalid configuration key {key}")
    if not value > 0.0:          # NaN too
        raise QuotaError(ErrorCode.INVALID_REQUEST, f"Quota {key} must be greater than 0")
    if whole:
        if value > 2 ** 63 - 1:
            raise QuotaError(ErrorCode.INVALID_REQUEST, f"Proposed value for {key} is too large for a LONG.")
        if abs(value % 1.0) > 1e-6:
            raise QuotaError(ErrorCode.INVALID_REQUEST, f"{key} cannot be a fractional value.")
    elif math.isinf(value):
        raise QuotaError(ErrorCode.INVALID_REQUEST, f"Quota {key} must be a finite number")


class Op(NamedTuple):
    key: str
    value: float
    remove: bool


def apply_ops(current: Mapping[str, float], ops: Iterable[Op]) -> dict[str, float]:
    """The entity's values after ``ops`` (later ops of a key win, as Kafka's map does; removing
    an absent key is no error).  Raises QuotaError for an invalid set."""
    wanted: dict[str, float | None] = {}
    for op in ops:
        wanted[op.key] = None if op.remove else op.value
    out = dict(current)
    for key, value in wanted.items():
        if value is None:
            out.pop(key, None)
        else:
            validate_value(key, value)
            out[key] = float(value)
    return out


# -- DescribeClientQuotas filter (Kafka's ClientQuotasImage.describe) -----------------------
class QuotaFilter(NamedTuple):
    exact: dict          # entity type -> name (None: the default)
    specified: frozenset  # entity types that must be present, any name
    strict: bool

    def matches(self, e: Entity) -> bool:
        d = dict(e)
        if self.strict and len(d) != len(self.exact) + len(self.specified):
            return False
        for t, name in self.exact.items():
            if t not in d or d[t] != name:
                return False
        return all(t in d for t in self.specified)


def parse_filter(components: Sequence[tuple[str, int, str | None]], strict: bool) -> QuotaFilter:
    """A DescribeClientQuotas filter from (entity_type, match_type, match).  Raises QuotaError."""
    exact: dict[str, str | None] = {}
    specified: set[str] = set()
    for entity_type, match_type, match in components:
        if not entity_type:
            raise QuotaError(ErrorCode.INVALID_REQUEST, "Invalid empty entity type.")
        if entity_type in exact or entity_type in specified:
            raise QuotaError(ErrorCode.INVALID_REQUEST,
                             f"Entity type {entity_type} cannot appear more than once in the filter.")
        if entity_type not in (USER, CLIENT_ID, IP):
            raise QuotaError(ErrorCode.UNSUPPORTED_VERSION, f"Unsupported entity type {entity_type}")
        if match_type == MATCH_EXACT:
            if match is None:
                raise QuotaError(ErrorCode.INVALID_REQUEST,
                                 "Request specified MATCH_TYPE_EXACT, but set match string to null.")
            exact[entity_type] = match
        elif match_type == MATCH_DEFAULT:
            if match is not None:
                raise QuotaError(ErrorCode.INVALID_REQUEST,
                                 "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.")
            exact[entity_type] = None
        elif match_type == MATCH_ANY:
            if match is not None:
                raise QuotaError(ErrorCode.INVALID_REQUEST,
                                 "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.")
            specified.add(entity_type)
        else:
            raise QuotaError(ErrorCode.INVALID_REQUEST, f"Unknown match type {match_type}")
    if (IP in exact or IP in specified) and ({USER, CLIENT_ID} & (set(exact) | specified)):
        raise QuotaError(ErrorCode.INVALID_REQUEST, "Invalid entity filter component combination. IP filter "
                                                    "component should not be used with user or clientId filter component.")
    return QuotaFilter(exact, frozenset(specified), strict)


# -- the configured quotas and their resolution -----------------------------------------------
Tags = tuple[str, str]      # (user tag, client-id tag) of Kafka's quota metrics


class QuotaConfigs:
    """Every configured quota entity and its values; answers which quota applies to a
    connection.  Resolutions are cached per (key, user, client id) until the next change."""

    def __init__(self):
        self.entities: dict[Entity, dict[str, float]] = {}
        self._key_counts: dict[str, int] = {}
        self._cache: dict[tuple[str, str, str], tuple[float, Tags] | None] = {}
        self.version = 0            # bumped by every change

    def __len__(self) -> int:
        return len(self.entities)

    def enabled(self, key: str) -> bool:
        """Whether any entity has a quota of ``key`` (Kafka's quotasEnabled per quota type)."""
        return self._key_counts.get(key, 0) > 0

    def any_enabled(self) -> bool:
        return bool(self.entities)

    def get(self, e: Entity) -> dict[str, float]:
        return dict(self.entities.get(e, {}))

    def set(self, e: Entity, values: Mapping[str, float]) -> None:
        """Replace the values of ``e`` (none: the entity is dropped)."""
        for key in self.entities.pop(e, {}):
            self._key_counts[key] -= 1
        if values:
            self.entities[e] = dict(values)
            for key in values:
                self._key_counts[key] = self._key_counts.get(key, 0) + 1
        self._cache.clear()
        self.version += 1

    def replace_all(self, entities: Mapping[Entity, Mapping[str, float]]) -> None:
        for e in list(self.entities):
            self.set(e, {})
        for e, values in entities.items():
            self.set(e, values)

    def resolve(self, key: str, user: str, client_id: str) -> tuple[float, Tags] | None:
        """(quota, metric tags) of ``key`` for a connection, by Kafka's 8-level order; None
        when no level holds ``key`` (unlimited)."""
        cache_key = (key, user, client_id)
        try:
            return self._cache[cache_key]
        except KeyError:
            pass
        found = None
        for e, tags in _levels(user, client_id):
            values = self.entities.get(e)
            if values is not None and key in values:
                found = (values[key], tags)
                break
        if len(self._cache) > 100_000:
            self._cache.clear()
        self._cache[cache_key] = found
        return found

    def describe(self, flt: QuotaFilter) -> list[tuple[Entity, dict[str, float]]]:
        return [(e, dict(v)) for e, v in sorted(self.entities.items(), key=_sort_key) if flt.matches(e)]


def _sort_key(item) -> tuple:
    return tuple((t, "" if n is None else "\x00" + n) for t, n in item[0])


def _levels(user: str, client_id: str) -> Iterator[tuple[Entity, Tags]]:
    yield entity(user=user, client_id=client_id), (user, client_id)
    yield entity(user=user, client_id=None), (user, client_id)
    yield entity(user=user), (user, "")
    yield entity(user=None, client_id=client_id), (user, client_id)
    yield entity(user=None, client_id=None), (user, client_id)
    yield entity(user=None), (user, "")
    yield entity(client_id=client_id), ("", client_id)
    yield entity(client_id=None), ("", client_id)


# -- rates ------------------------------------------------------------------------------------
class SampledRate:
    """Kafka's ``Rate`` over a ``SampledStat`` of ``num`` samples of ``window_ms`` (one more kept
    for the sample overlapping the window's start, as Kafka keeps it).  A sample starts at the
    first value recorded after the previous one completed; it is dropped once its last value is
    ``num`` windows old."""
    __slots__ = ("num", "window_ms", "samples")

    def __init__(self, num: int = DEFAULT_WINDOW_NUM, window_ms: int = DEFAULT_WINDOW_SIZE_S * 1000):
        self.num = max(1, num)
        self.window_ms = max(1, window_ms)
        self.samples: list[list] = []         # [start_ms, value, last_event_ms], oldest first

    def record(self, value: float, now_ms: int) -> None:
        samples = self.samples
        if not samples or now_ms - samples[-1][0] >= self.window_ms:
            samples.append([now_ms, 0.0, now_ms])
            if len(samples) > self.num + 1:
                del samples[0]
        sample = samples[-1]
        sample[1] += value
        sample[2] = now_ms

    def _purge(self, now_ms: int) -> None:
        expire = self.num * self.window_ms
        self.samples = [s for s in self.samples if now_ms - s[2] < expire]

    def window_size_ms(self, now_ms: int) -> int:
        """The time the rate is measured over (Kafka's Rate.windowSize)."""
        self._purge(now_ms)
        oldest = min((s[0] for s in self.samples), default=now_ms)
        elapsed = now_ms - oldest
        full = elapsed // self.window_ms
        if full < self.num - 1:
            elapsed += (self.num - 1 - full) * self.window_ms
        return max(elapsed, 1)

    def measure(self, now_ms: int) -> float:
        """Units per second."""
        size = self.window_size_ms(now_ms)
        return sum(s[1] for s in self.samples) * 1000.0 / size

    def throttle_ms(self, bound: float, now_ms: int) -> int:
        """Kafka's QuotaUtils.throttleTime: 0 while the rate is within ``bound``."""
        size = self.window_size_ms(now_ms)
        rate = sum(s[1] for s in self.samples) * 1000.0 / size
        if rate <= bound:
            return 0
        return int(round((rate - bound) / bound * size))


class TokenBucket:
    """KIP-599's token bucket: ``num * window_s * rate`` tokens of burst, starts full."""
    __slots__ = ("burst_windows_s", "tokens", "last_ms")

    def __init__(self, num: int = DEFAULT_WINDOW_NUM, window_s: float = DEFAULT_WINDOW_SIZE_S):
        self.burst_windows_s = num * window_s
        self.tokens: float | None = None
        self.last_ms = 0

    def _refill(self, rate: float, now_ms: int) -> None:
        burst = self.burst_windows_s * rate
        if self.tokens is None:
            self.tokens = burst
        else:
            self.tokens = min(burst, self.tokens + rate * max(0, now_ms - self.last_ms) / 1000.0)
        self.last_ms = now_ms

    def measure(self, rate: float, now_ms: int) -> float:
        self._refill(rate, now_ms)
        return self.tokens

    def record(self, value: float, rate: float, now_ms: int) -> None:
        self._refill(rate, now_ms)
        self.tokens = min(self.burst_windows_s * rate, self.tokens - value)

    def throttle_ms(self, rate: float, now_ms: int) -> int:
        """``-tokens / rate`` s while the bucket is below zero, else 0."""
        tokens = self.measure(rate, now_ms)
        return int(round(-tokens / rate * 1000)) if tokens < 0 else 0


# -- enforcement (Kafka's ClientQuotaManager and friends, per quota key) -------------------------
class ClientSensor:
    """One shared rate (one set of metric tags of one quota key) and what it cost its clients."""
    __slots__ = ("rate", "bucket", "throttle_ms_total", "throttled", "recorded_total", "last_ms")

    def __init__(self, num: int, window_ms: int, bucket: bool = False):
        self.last_ms = 0                      # when it was last used (idle ones are dropped)
        self.rate = SampledRate(num, window_ms)
        self.bucket = TokenBucket(num, window_ms / 1000) if bucket else None
        self.throttle_ms_total = 0
        self.throttled = 0
        self.recorded_total = 0.0


class QuotaEnforcer:
    """The sensors of every quota key, by metric tags; what the request path calls.  With no
    quota of a key configured, its calls return 0 at the cost of one dict lookup."""

    def __init__(self, configs: QuotaConfigs, window_num: int = DEFAULT_WINDOW_NUM,
                 window_size_s: int = DEFAULT_WINDOW_SIZE_S):
        self.configs = configs
        self.window_num = max(1, window_num)
        self.window_ms = max(1, window_size_s) * 1000
        self.sensors: dict[str, dict[Tags, ClientSensor]] = {key: {} for key in QUOTA_KEYS}
        self._swept_ms = 0

    def _sensor(self, key: str, user: str, client_id: str, now_ms: int | None = None
                ) -> tuple[float, ClientSensor] | None:
        found = self.configs.resolve(key, user, client_id)
        if found is None:
            return None
        bound, tags = found
        by_tags = self.sensors[key]
        sensor = by_tags.get(tags)
        if sensor is None:
            if now_ms is not None and now_ms - self._swept_ms >= SWEEP_INTERVAL_MS:
                self.expire(now_ms)
            sensor = by_tags[tags] = ClientSensor(self.window_num, self.window_ms,
                                                  bucket=key == CONTROLLER_MUTATION_RATE)
        if now_ms is not None:
            sensor.last_ms = now_ms
        return bound, sensor

    def expire(self, now_ms: int) -> None:
        """Drop the sensors idle for an hour (Kafka's quota sensors expire after one hour
        without use), so one-off client ids do not accumulate."""
        self._swept_ms = now_ms
        for by_tags in self.sensors.values():
            for tags in [t for t, s in by_tags.items() if now_ms - s.last_ms > SENSOR_EXPIRY_MS]:
                del by_tags[tags]

    def record(self, key: str, user: str, client_id: str, value: float, now_ms: int) -> int:
        """Record ``value`` (bytes, or percent of a thread) and return the throttle time in ms
        (Kafka's recordAndGetThrottleTimeMs); 0 with no quota of ``key`` for this client."""
        if not self.configs.enabled(key):
            return 0
        found = self._sensor(key, user, client_id, now_ms)
        if found is None:
            return 0
        bound, sensor = found
        sensor.rate.record(value, now_ms)
        sensor.recorded_total += value
        throttle = sensor.rate.throttle_ms(bound, now_ms)
        if key == REQUEST_PERCENTAGE:
            throttle = min(throttle, self.window_ms)      # ClientRequestQuotaManager's bound
        return throttle

    def unrecord(self, key: str, user: str, client_id: str, value: float, now_ms: int) -> None:
        """Take back a recorded value (a throttled fetch answers nothing: Kafka's unrecordQuotaSensor)."""
        found = self._sensor(key, user, client_id) if self.configs.enabled(key) else None
        if found is not None:
            found[1].rate.record(-value, now_ms)
            found[1].recorded_total -= value

    def max_value_in_window(self, key: str, user: str, client_id: str) -> float | None:
        """The most one response may carry without certain throttling (Kafka's
        getMaxValueInQuotaWindow: quota x (num - 1) x window); None: unlimited."""
        if not self.configs.enabled(key):
            return None
        found = self.configs.resolve(key, user, client_id)
        if found is None:
            return None
        return found[0] * (self.window_num - 1) * self.window_ms / 1000

    def throttled(self, key: str, user: str, client_id: str, throttle_ms: int) -> None:
        """Count a throttle the connection served (Kafka's throttle-time sensor)."""
        found = self._sensor(key, user, client_id) if self.configs.enabled(key) else None
        if found is not None and throttle_ms > 0:
            found[1].throttle_ms_total += throttle_ms
            found[1].throttled += 1

    # -- controller mutations (KIP-599) -------------------------------------------------------
    def mutation_quota(self, user: str, client_id: str, strict: bool, now_ms: int) -> "MutationQuota | None":
        """The quota a CreateTopics/CreatePartitions/DeleteTopics request draws on; None when
        unlimited.  ``strict`` (the versions that know THROTTLING_QUOTA_EXCEEDED) refuses a
        topic once the bucket is empty; otherwise the request is only throttled."""
        if not self.configs.enabled(CONTROLLER_MUTATION_RATE):
            return None
        found = self._sensor(CONTROLLER_MUTATION_RATE, user, client_id, now_ms)
        if found is None:
            return None
        return MutationQuota(found[0], found[1], strict, now_ms)


class MutationQuota:
    """One request's view of a controller-mutation sensor (Kafka's Strict/Permissive
    ControllerMutationQuota)."""

    def __init__(self, rate: float, sensor: ClientSensor, strict: bool, now_ms: int):
        self.rate, self.sensor, self.strict, self.now_ms = rate, sensor, strict, now_ms
        self.throttle_ms = 0

    def record(self, partitions: int) -> bool:
        """Draw ``partitions`` mutations; False (nothing drawn) when a strict quota is
        exhausted: the topic is then refused THROTTLING_QUOTA_EXCEEDED."""
        bucket, now = self.sensor.bucket, self.now_ms
        if self.strict:
            wait = bucket.throttle_ms(self.rate, now)
            if wait > 0:
                self.throttle_ms = wait
                return False
            bucket.record(partitions, self.rate, now)
        else:
            bucket.record(partitions, self.rate, now)
            self.throttle_ms = bucket.throttle_ms(self.rate, now)
        self.sensor.rate.record(partitions, now)
        self.sensor.recorded_total += partitions
        return True
