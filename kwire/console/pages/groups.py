"""Consumer groups and share groups: the list (from the sampler's latest sample, so it is fast
with hundreds of groups: state, protocol, lag; member counts of the shown page asked fresh),
a group's page (state, coordinator, members and their assignments, lag per partition and over
time, refreshed by htmx), resetting offsets with a preview, and deleting a group.  A share
group's page shows its members and share-partitions (start offset, lag and, from the brokers'
/metrics when the console has ``--metrics-url``, the in-flight and archived record counts);
its start offsets are reset with the same preview (AlterShareGroupOffsets).

A group id may hold "/", so everything about one group lives at its own path and is told apart
by the query (a path suffix such as ``/reset`` could be part of an id):

    GET  /groups?q=TEXT&page=N                             the list (htmx: the table only)
    GET  /groups/{id}                                      the group's page
    GET  /groups/{id}?part=lag                             its lag (htmx, every LAG_REFRESH_S)
    GET  /groups/{id}?action=reset&topic=&scenario=&value= a reset's preview
    GET  /groups/{id}?action=delete                        the confirmation of a deletion
    POST /groups/{id}  action=reset | action=delete        the writes

The cluster is asked through ``groups_data`` (kwire groups' own functions), in a thread.
"""
from __future__ import annotations

import time
import urllib.parse
from typing import Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from kwire.console.app import WriteRefused
from kwire.console.pages.groups_data import (SCENARIO_LABELS, ResetRefused, delete, describe, lookup_type,
                                             member_counts, reset, scenario_from, share_partitions,
                                             share_record_counts, type_of, with_record_counts)
from kwire.console.pages.overview import current_sample
from kwire.tools.common import ToolError

NAV = [("Groups", "/groups")]
PAGE_SIZE = 100
LAG_REFRESH_S = 3                 # a group's lag table and chart
LIST_REFRESH_S = 5                # the list's table
DELETED_SAMPLE_WAIT_S = 5.0       # after a deletion, the list waits this long for a sample without it


def routes(console) -> list:
    pages = GroupPages(console)
    return [Route("/groups", pages.list_page),
            Route("/groups/{group_id:path}", pages.group_page, methods=["GET", "POST"])]


def _page_number(text: str | None) -> int:
    try:
        return max(1, int(text or 1))
    except ValueError:
        return 1


def _redirect(path: str, flash: str, kind: str = "ok") -> RedirectResponse:
    query = urllib.parse.urlencode({"flash": flash, "kind": kind})
    return RedirectResponse(f"{path}?{query}", status_code=303)


def group_path(group_id: str) -> str:
    return "/groups/" + urllib.parse.quote(group_id, safe="")


def list_rows(sample, query: str) -> list[dict[str, Any]]:
    """The sample's groups whose id contains ``query`` (any case), by id."""
    rows = []
    for g in sorted(sample.groups.values(), key=lambda g: g.group_id):
        if query and query.lower() not in g.group_id.lower():
            continue
        group_type = type_of(g.group_type, g.protocol_type)
        rows.append({"group_id": g.group_id, "href": group_path(g.group_id), "type": group_type,
                     "protocol_type": g.protocol_type, "state": g.state,
                     "lag": None if group_type == "share" else g.total_lag})
    return rows


def lag_rows(sample, group_id: str) -> list[dict[str, Any]]:
    """Committed offset, log end offset and lag of each partition the group has an offset for."""
    g = sample.groups.get(group_id)
    if g is None:
        return []
    rows = []
    for (topic, partition), committed in sorted(g.committed.items()):
        state = sample.topics.get(topic, {}).get(partition)
        rows.append({"topic": topic, "partition": partition, "committed": committed,
                     "end": state.end_offset if state is not None else None,
                     "lag": g.lag.get((topic, partition))})
    return rows


class GroupPages:
    """The handlers; each blocking call goes through ``console.access``."""

    def __init__(self, console):
        self.console = console

    # -- the list ----------------------------------------------------------------------------
    async def list_page(self, request: Request) -> Response:
        console = self.console
        sample = await current_sample(console)
        q = request.query_params.get("q", "").strip()
        rows = list_rows(sample, q)
        pages = max(1, -(-len(rows) // PAGE_SIZE))
        page = min(_page_number(request.query_params.get("page")), pages)
        shown = rows[(page - 1) * PAGE_SIZE:page * PAGE_SIZE]
        note = None
        if shown:
            try:
                counts = await console.access.admin_call(member_counts, [(r["group_id"], r["type"]) for r in shown])
            except Exception as exc:          # noqa: BLE001 - the list stands without member counts
                counts, note = {}, f"Member counts unknown: {console.error_text(exc)}"
            for r in shown:
                r["members"] = counts.get(r["group_id"])
        template = "groups_table.html" if request.headers.get("hx-request") else "groups.html"
        return console.render(request, template, rows=shown, total=len(rows), page=page, pages=pages, q=q,
                              sample=sample, note=note, refresh_s=LIST_REFRESH_S,
                              flash=request.query_params.get("flash"),
                              flash_kind=request.query_params.get("kind", "ok"))

    # -- one group ---------------------------------------------------------------------------
    async def group_page(self, request: Request) -> Response:
        group_id = request.path_params["group_id"]
        if not group_id:
            return RedirectResponse("/groups", status_code=303)
        if request.method == "POST":
            return await self._write(request, group_id)
        params = request.query_params
        if params.get("part") == "lag":
            sample = await current_sample(self.console)
            group_type = await self._type(group_id, sample)
            return self.console.render(request, "groups_lag.html", group_id=group_id, group_type=group_type,
                                       **await self._lag(group_id, group_type, sample))
        if params.get("action") == "reset":
            return await self._reset(request, group_id, params, user=None)
        if params.get("action") == "delete":
            return await self._confirm_delete(request, group_id)
        return await self._show(request, group_id, flash=params.get("flash"), flash_kind=params.get("kind", "ok"))

    async def _type(self, group_id: str, sample) -> str:
        g = sample.groups.get(group_id)
        if g is not None:
            return type_of(g.group_type, g.protocol_type)
        try:
            return await self.console.access.admin_call(lookup_type, group_id) or "classic"
        except Exception:                     # noqa: BLE001 - describe will say what is wrong
            return "classic"

    async def _describe(self, request: Request, group_id: str):
        """(sample, group type, GroupView), or (.., .., an error page) when there is no such group."""
        console = self.console
        sample = await current_sample(console)
        group_type = await self._type(group_id, sample)
        try:
            view = await console.access.admin_call(describe, group_id, group_type, sample.brokers)
        except Exception as exc:              # noqa: BLE001 - the broker's refusal, as a page
            return sample, group_type, console.error_page(request, f"Group '{group_id}': {console.error_text(exc)}")
        if not view.exists and group_id not in sample.groups:
            return sample, group_type, console.error_page(request, f"Consumer group '{group_id}' does not exist.", 404)
        return sample, group_type, view

    async def _show(self, request: Request, group_id: str, flash: str | None = None,
                    flash_kind: str = "ok") -> Response:
        sample, group_type, view = await self._describe(request, group_id)
        if isinstance(view, Response):
            return view
        return self.console.render(request, "groups_group.html", group=view, group_id=group_id,
                                   group_type=group_type, path_of_group=group_path(group_id),
                                   refresh_s=LAG_REFRESH_S, flash=flash, flash_kind=flash_kind,
                                   reset_form=self._reset_form(sample, view, {}),
                                   **await self._lag(group_id, group_type, sample))

    async def _lag(self, group_id: str, group_type: str, sample) -> dict[str, Any]:
        """The lag part's context: per-partition rows, the total, the chart (from the sample),
        or a share group's share-partitions (asked fresh: the sampler does not read them) with
        their record counts when the console reads the brokers' /metrics (``share_counts``)."""
        if group_type == "share":
            urls = self.console.settings.metrics_urls
            context = {"share_rows": [], "share_counts": bool(urls), "counts_error": None, "total_lag": None}
            try:
                rows = await self.console.access.admin_call(share_partitions, group_id)
            except Exception as exc:          # noqa: BLE001 - shown in place of the table
                return dict(context, lag_error=self.console.error_text(exc))
            if urls:
                counts, context["counts_error"] = await self.console.access.run(share_record_counts, urls, group_id)
                with_record_counts(rows, counts)
            known = [r["lag"] for r in rows if r["lag"] is not None]
            return dict(context, share_rows=rows, lag_error=None, total_lag=sum(known) if known else None)
        history = list(self.console.sampler.group_history.get(group_id, ()))
        g = sample.groups.get(group_id)
        chart = {"x": [at for at, _ in history], "ys": [[lag for _, lag in history]],
                 "labels": ["total lag (records)"], "unit": "records"}
        return {"lag_rows": lag_rows(sample, group_id), "total_lag": g.total_lag if g is not None else None,
                "chart": chart, "sampled_at": sample.at, "lag_error": sample.error}

    @staticmethod
    def _reset_form(sample, view, values) -> dict[str, Any]:
        """The reset form's choices (the group's topics first) and the values it shows."""
        own = view.topics()
        others = sorted(t for t in sample.topics if t not in own and t not in sample.internal)
        return {"own_topics": own, "other_topics": others, "scenarios": SCENARIO_LABELS,
                "topic": values.get("topic", ""), "scenario": values.get("scenario", "to_earliest"),
                "value": values.get("value", "")}

    # -- reset offsets -----------------------------------------------------------------------
    async def _reset(self, request: Request, group_id: str, form, user: str | None) -> Response:
        """The preview (``user`` None) or the execution of a reset, on the reset page."""
        console = self.console
        sample, group_type, view = await self._describe(request, group_id)
        if isinstance(view, Response):
            return view
        values = {k: str(form.get(k, "")).strip() for k in ("topic", "scenario", "value")}
        context = {"group": view, "group_id": group_id, "group_type": group_type,
                   "path_of_group": group_path(group_id), "reset_form": self._reset_form(sample, view, values),
                   "values": values, "plan": None}
        plan, status, error = None, 200, None
        try:
            scenario = scenario_from(values["scenario"], values["value"], int(time.time() * 1000))
            plan = await console.access.admin_call(reset, group_id, group_type, values["topic"] or None, scenario,
                                                   user is not None)
        except ValueError as exc:
            status, error = 400, str(exc)
        except (ResetRefused, ToolError) as exc:
            status, error = 409, str(exc)
        except Exception as exc:              # noqa: BLE001 - the broker's refusal, on the page
            status, error = 502, console.error_text(exc)
        if user is not None:
            console.audit(user, "reset-offsets", group_id, topic=values["topic"] or "(all)",
                          scenario=values["scenario"], value=values["value"],
                          partitions=len(plan.rows) if plan else 0, outcome=error or "ok")
            if plan is not None:
                console.sampler.refresh_soon()
        if error is not None:
            return console.render(request, "groups_reset.html", status_code=status, flash=error,
                                  flash_kind="error", **context)
        flash = None
        if plan.executed:
            flash = (f"Reset the offsets of group '{group_id}' on {len(plan.rows)} "
                     f"partition{'s' if len(plan.rows) != 1 else ''}.")
        return console.render(request, "groups_reset.html", flash=flash, **dict(context, plan=plan))

    # -- delete ------------------------------------------------------------------------------
    async def _confirm_delete(self, request: Request, group_id: str) -> Response:
        if self.console.read_only:
            raise WriteRefused(403, "The console is read-only: writes are disabled.")
        sample, group_type, view = await self._describe(request, group_id)
        if isinstance(view, Response):
            return view
        return self.console.render(request, "groups_delete.html", group=view, group_id=group_id,
                                   path_of_group=group_path(group_id))

    async def _delete(self, request: Request, user: str, group_id: str) -> Response:
        console = self.console
        try:
            error = await console.access.admin_call(delete, group_id)
        except Exception as exc:              # noqa: BLE001 - the broker's refusal, on the page
            error = console.error_text(exc)
        console.audit(user, "delete-group", group_id, outcome=error or "ok")
        if error is not None:
            sample, group_type, view = await self._describe(request, group_id)
            if isinstance(view, Response):
                return view
            return console.render(request, "groups_delete.html", status_code=409, group=view, group_id=group_id,
                                  path_of_group=group_path(group_id), flash_kind="error",
                                  flash=f"Group '{group_id}' was not deleted: {error}")
        console.sampler.refresh_soon()
        await console.access.run(console.sampler.wait_for_sample, time.time(), DELETED_SAMPLE_WAIT_S)
        return _redirect("/groups", f"Deleted group '{group_id}'.")

    async def _write(self, request: Request, group_id: str) -> Response:
        user, form = await self.console.write_form(request)
        action = form.get("action")
        if action == "reset":
            return await self._reset(request, group_id, form, user)
        if action == "delete":
            return await self._delete(request, user, group_id)
        return self.console.error_page(request, "Unknown action.", 400)
