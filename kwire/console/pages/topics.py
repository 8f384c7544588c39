"""Topics: the list (from the sampler: partitions, replication, size, retention, cleanup
policy), a topic's page (asked fresh: every partition's leader, replicas, ISR, log start and end
offsets and size; its configs), and the writes: create, delete, add partitions, alter configs.
A refused write shows the broker's error with its Kafka name, as kafka-topics.sh would print it.
"""
from __future__ import annotations

import urllib.parse

from starlette.requests import Request
from starlette.responses import RedirectResponse
from starlette.routing import Route

from kwire.console.pages.overview import current_sample

NAV = [("Topics", "/topics")]
PAGE_SIZE = 100
CREATE_TIMEOUT_MS = 15000
SETTLE_S = 10.0            # how long a write waits for the background sample to show it


def parse_config_lines(text: str) -> dict[str, str]:
    """``key=value`` lines (blank lines and ``#`` comments skipped).  Raises ValueError naming
    the line."""
    configs: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"config line {number}: expected key=value, not {line!r}")
        configs[key.strip()] = value.strip()
    return configs


def topic_rows(sample, query: str, show_internal: bool) -> list[dict]:
    rows = []
    for name in sorted(sample.topics):
        internal = name in sample.internal or name.startswith("__")
        if (internal and not show_internal) or (query and query.lower() not in name.lower()):
            continue
        parts = sample.topics[name]
        configs = sample.configs.get(name, {})
        rows.append({"name": name, "internal": internal, "partitions": len(parts),
                     "replication": max((len(p.replicas) for p in parts.values()), default=0),
                     "under_replicated": sum(len(p.isr) < len(p.replicas) for p in parts.values()),
                     "offline": sum(p.leader < 0 for p in parts.values()),
                     "records": sum(p.end_offset or 0 for p in parts.values()),
                     "size": sample.sizes.get(name), "cleanup_policy": configs.get("cleanup.policy"),
                     "retention": _retention(configs)})
    return rows


def _retention(configs: dict[str, str]) -> str | None:
    ms = configs.get("retention.ms")
    if ms is None:
        return None
    value = int(ms)
    if value < 0:
        return "forever"
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1000)):
        if value >= size and value % size == 0:
            return f"{value // size} {unit}"
    return f"{value} ms"


class TopicPages:
    """The topics pages' handlers."""

    def __init__(self, console):
        self.console = console

    async def list_topics(self, request: Request):
        sample = await current_sample(self.console)
        query = request.query_params.get("q", "").strip()
        show_internal = request.query_params.get("internal") == "1"
        rows = topic_rows(sample, query, show_internal)
        page = max(1, _int(request.query_params.get("page"), 1))
        pages = max(1, -(-len(rows) // PAGE_SIZE))
        page = min(page, pages)
        shown = rows[(page - 1) * PAGE_SIZE: page * PAGE_SIZE]
        return self.console.render(request, "topics.html", rows=shown, total=len(rows), page=page, pages=pages,
                              q=query, show_internal=show_internal, sample=sample,
                              flash=request.query_params.get("flash"),
                              defaults={"partitions": 1, "replication": min(3, len(sample.brokers)) or 1})

    async def create_topic(self, request: Request):
        user, form = await self.console.write_form(request)
        name = str(form.get("name", "")).strip()
        try:
            partitions = int(form.get("partitions") or -1)
            replication = int(form.get("replication_factor") or -1)
            configs = parse_config_lines(str(form.get("configs", "")))
        except ValueError as exc:
            return await self._topics_with_error(request, f"Not created: {exc}")
        spec = {name: {"num_partitions": partitions, "replication_factor": replication, "configs": configs}}
        try:
            await self.console.access.admin_call(lambda a: a.create_topics(spec, timeout_ms=CREATE_TIMEOUT_MS,
                                                                       raise_errors=True))
        except Exception as exc:              # noqa: BLE001 - the broker's refusal, shown on the page
            self.console.audit(user, "create-topic", name, partitions=partitions, replication=replication,
                          configs=configs, outcome=self.console.error_text(exc))
            return await self._topics_with_error(request, f"Topic {name!r} not created: {self.console.error_text(exc)}")
        self.console.audit(user, "create-topic", name, partitions=partitions, replication=replication,
                      configs=configs, outcome="ok")
        await self.console.access.run(self.console.sampler.wait_until, lambda s: name in s.topics, SETTLE_S)
        return _redirect(f"/topics/{urllib.parse.quote(name)}", f"Topic {name} created.")

    async def _topics_with_error(self, request: Request, message: str):
        sample = await current_sample(self.console)
        rows = topic_rows(sample, "", False)
        return self.console.render(request, "topics.html", status_code=400, rows=rows[:PAGE_SIZE], total=len(rows),
                              page=1, pages=max(1, -(-len(rows) // PAGE_SIZE)), q="", show_internal=False,
                              sample=sample, flash=message, flash_kind="error", open_create=True,
                              defaults={"partitions": 1, "replication": min(3, len(sample.brokers)) or 1})

    async def topic_page(self, request: Request):
        name = request.path_params["name"]
        try:
            described = await self.console.access.admin_call(_describe_topic, name)
        except Exception as exc:              # noqa: BLE001 - unknown topic, broker down: a readable page
            return self.console.error_page(request, f"Topic {name!r}: {self.console.error_text(exc)}", 404)
        flash = request.query_params.get("flash")
        kind = request.query_params.get("kind", "ok")
        return self.console.render(request, "topic.html", topic=described, flash=flash, flash_kind=kind)

    async def delete_topic(self, request: Request):
        name = request.path_params["name"]
        user, form = await self.console.write_form(request)
        if str(form.get("confirm", "")).strip() != name:
            return _redirect(f"/topics/{urllib.parse.quote(name)}",
                             "Not deleted: type the topic's name to confirm.", "error")
        try:
            await self.console.access.admin_call(lambda a: a.delete_topics([name], timeout_ms=CREATE_TIMEOUT_MS,
                                                                       raise_errors=True))
        except Exception as exc:              # noqa: BLE001
            self.console.audit(user, "delete-topic", name, outcome=self.console.error_text(exc))
            return _redirect(f"/topics/{urllib.parse.quote(name)}",
                             f"Not deleted: {self.console.error_text(exc)}", "error")
        self.console.audit(user, "delete-topic", name, outcome="ok")
        await self.console.access.run(self.console.sampler.wait_until, lambda s: name not in s.topics, SETTLE_S)
        return _redirect("/topics", f"Topic {name} deleted.")

    async def add_partitions(self, request: Request):
        name = request.path_params["name"]
        user, form = await self.console.write_form(request)
        total = _int(form.get("total"), -1)
        try:
            await self.console.access.admin_call(lambda a: a.create_partitions(
                {name: total}, timeout_ms=CREATE_TIMEOUT_MS, raise_errors=True))
        except Exception as exc:              # noqa: BLE001
            self.console.audit(user, "add-partitions", name, total=total, outcome=self.console.error_text(exc))
            return _redirect(f"/topics/{urllib.parse.quote(name)}",
                             f"Partitions not added: {self.console.error_text(exc)}", "error")
        self.console.audit(user, "add-partitions", name, total=total, outcome="ok")
        self.console.sampler.refresh_soon()
        return _redirect(f"/topics/{urllib.parse.quote(name)}", f"{name} now has {total} partitions.")

    async def alter_configs(self, request: Request):
        name = request.path_params["name"]
        user, form = await self.console.write_form(request)
        key = str(form.get("key", "")).strip()
        value = str(form.get("value", "")).strip()
        delete = form.get("operation") == "delete"
        if not key:
            return _redirect(f"/topics/{urllib.parse.quote(name)}#configs", "No config key given.", "error")
        from kafka.admin import ConfigResource
        change = {key: ("DELETE", None) if delete else ("SET", value)}
        try:
            result = await self.console.access.admin_call(lambda a: a.alter_configs(
                [ConfigResource("TOPIC", name, configs=change)], raise_on_unknown=False, incremental=True))
            _raise_alter_errors(result, name)
        except Exception as exc:              # noqa: BLE001
            self.console.audit(user, "alter-config", name, key=key, value=None if delete else value,
                          outcome=self.console.error_text(exc))
            return _redirect(f"/topics/{urllib.parse.quote(name)}#configs",
                             f"{key} not changed: {self.console.error_text(exc)}", "error")
        self.console.audit(user, "alter-config", name, key=key, value=None if delete else value, outcome="ok")
        self.console.sampler.refresh_soon()
        done = f"{key} reset to its default." if delete else f"{key} set to {value}."
        return _redirect(f"/topics/{urllib.parse.quote(name)}#configs", done)

    def routes(self) -> list:
        return [Route("/topics", self.list_topics), Route("/topics", self.create_topic, methods=["POST"]),
                Route("/topics/{name}", self.topic_page),
                Route("/topics/{name}/delete", self.delete_topic, methods=["POST"]),
                Route("/topics/{name}/partitions", self.add_partitions, methods=["POST"]),
                Route("/topics/{name}/configs", self.alter_configs, methods=["POST"])]


def routes(console) -> list:
    return TopicPages(console).routes()


def _describe_topic(admin, name: str) -> dict:
    """The topic's Metadata, offsets and sizes (kwire topics --describe's document) and every
    config with its source.  Raises the broker's error (UNKNOWN_TOPIC_OR_PARTITION, ...)."""
    from kafka.admin import ConfigResource
    from kafka.errors import for_code
    from kwire.tools.topics import describe_batch
    found = admin.describe_topics([name])
    if not found or found[0]["error_code"] != 0:
        code = found[0]["error_code"] if found else 3
        raise for_code(code)(f"Topic '{name}' does not exist." if code == 3 else name)
    document = describe_batch(admin, found)[0]
    described = admin.describe_configs([ConfigResource("TOPIC", name)], config_filter="all")
    entries = described.get("topic", {}).get(name, {})
    document["all_configs"] = [{"name": k, "value": None if c["is_sensitive"] else c["value"],
                                "source": c["config_source"], "read_only": c.get("read_only", False)}
                               for k, c in sorted(entries.items())]
    return document


class ConfigRefused(Exception):
    """The broker refused a config change; the text is kafka-python's "[Error N] Name: message"."""


def _raise_alter_errors(result, name: str) -> None:
    """kafka-python's alter_configs result ({"topic": {name: "OK" or an error text}}): raise
    ConfigRefused with the error's name and the broker's message."""
    import re
    outcome = str(result.get("topic", {}).get(name, "OK"))
    if outcome != "OK":
        match = re.match(r"^\[Error (\d+)\] \w+:? ?(.*)$", outcome)
        if match:
            from kafka.errors import for_code
            error = for_code(int(match.group(1)))
            raise ConfigRefused(f"{error.message}: {match.group(2)}" if match.group(2) not in ("", "None")
                                else error.message)
        raise ConfigRefused(outcome)


def _redirect(target: str, flash: str, kind: str = "ok") -> RedirectResponse:
    path, _, fragment = target.partition("#")
    query = urllib.parse.urlencode({"flash": flash, "kind": kind})
    return RedirectResponse(f"{path}?{query}" + (f"#{fragment}" if fragment else ""), status_code=303)


def _int(value, default: int) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default

