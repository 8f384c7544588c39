"""The client x scenario table of one run, and the FINDINGS.md allow-list that explains its
failures and skips (``unexpected``, ``stale``)."""
from __future__ import annotations

import re
from pathlib import Path

from .scenarios import SCENARIOS

FINDINGS = Path(__file__).with_name("FINDINGS.md")
MARK = {"pass": "pass", "fail": "FAIL", "skip": "skip"}


def _grid(results):
    clients = list(dict.fromkeys(r["client"] for r in results))
    scenarios = list(dict.fromkeys(r["scenario"] for r in results))
    cell = {(r["client"], r["scenario"]): r for r in results}
    return clients, scenarios, cell


def table(results: list[dict], title: str = "") -> str:
    """Scenarios down, clients across; reasons for every fail and skip listed below."""
    clients, scenarios, cell = _grid(results)
    w0 = max([len("scenario")] + [len(s) for s in scenarios])
    widths = [max(len(c), 4) for c in clients]
    lines = [title] if title else []
    lines.append(f"{'scenario':{w0}} | " + " | ".join(f"{c:{w}}" for c, w in zip(clients, widths)))
    lines.append("-" * w0 + "-+-" + "-+-".join("-" * w for w in widths))
    for s in scenarios:
        row = [MARK.get(cell[(c, s)]["status"], "?") if (c, s) in cell else "" for c in clients]
        lines.append(f"{s:{w0}} | " + " | ".join(f"{v:{w}}" for v, w in zip(row, widths)))
    counts = {k: sum(1 for r in results if r["status"] == k) for k in ("pass", "fail", "skip")}
    lines.append(f"{counts['pass']} pass, {counts['fail']} fail, {counts['skip']} skip")
    notes = [r for r in results if r["status"] != "pass" or r.get("reason")]
    if notes:
        lines.append("")
        for r in notes:
            lines.append(f"  {MARK[r['status']]:4} {r['client']} / {r['scenario']}: {r.get('reason') or ''}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------- allow-list
ROW = re.compile(r"^\|\s*(?P<broker>[\w.*-]+)\s*\|\s*(?P<client>[\w.*-]+)\s*\|\s*(?P<scenario>[\w*-]+)\s*\|"
                 r"\s*(?P<status>fail|skip)\s*\|\s*(?P<reason>.+?)\s*\|\s*$")


def allow_list(path: Path = FINDINGS) -> list[dict]:
    """Rows of FINDINGS.md's allow-list tables: broker | client | scenario | status | reason."""
    rows = []
    for line in path.read_text().splitlines():
        m = ROW.match(line)
        if m:
            rows.append(m.groupdict())
    return rows


def _matches(entry: dict, broker: str, r: dict) -> bool:
    return (entry["broker"] in ("*", broker) and entry["status"] == r["status"]
            and entry["client"] in ("*", r["client"]) and entry["scenario"] in ("*", r["scenario"]))


def unexpected(broker: str, results: list[dict], allowed: list[dict] | None = None) -> list[dict]:
    """Results that are not a pass and are not explained by an allow-list entry."""
    allowed = allow_list() if allowed is None else allowed
    return [r for r in results if r["status"] != "pass"
            and not any(_matches(e, broker, r) for e in allowed)]


def stale(broker: str, results: list[dict], allowed: list[dict] | None = None) -> list[dict]:
    """Allow-list entries for ``broker`` that no result needed (the difference went away)."""
    allowed = allow_list() if allowed is None else allowed
    out = []
    for e in allowed:
        if e["broker"] != broker:   # "*" rows describe the harness, not a broker
            continue
        relevant = [r for r in results if e["client"] in ("*", r["client"]) and e["scenario"] in ("*", r["scenario"])]
        if relevant and not any(_matches(e, broker, r) for r in relevant):
            out.append(e)
    return out


def scenario_help() -> str:
    return "\n".join(f"  {name:14} {desc}" for name, (_, _, desc) in SCENARIOS.items())
