"""The readable compatibility report: one self-contained HTML page and the JSON it is made from.

``document(...)`` gathers a run into plain data (what ``--report``/``--json`` write as JSON);
``render(doc)`` turns that data into the page: the client x scenario matrix (each cell pass,
fail or skip, with its reason and the API versions the client sent) and the broker's
ApiVersions beside Apache Kafka 4.2's.  No script, inline CSS, every string escaped, status
given as text and symbol as well as colour.
"""
from __future__ import annotations

import json
from html import escape
from pathlib import Path

from .api_versions import KAFKA_4_2_NAME, api_rows
from .scenarios import SCENARIOS

STATUS_TEXT = {"pass": "\u2713 pass", "fail": "\u2717 fail", "skip": "\u2013 skip"}
API_STATUS_TEXT = {"same": "= same as Kafka", "behind": "\u2193 behind Kafka", "ahead": "\u2191 ahead of Kafka",
                   "missing": "\u2717 missing", "extra": "+ not in Kafka 4.2"}
FORMAT = "kwire-compat-report/1"


def summary(results: list[dict]) -> dict:
    return {k: sum(1 for r in results if r["status"] == k) for k in ("pass", "fail", "skip")}


def guess_kafka_release(apis: dict) -> str | None:
    """The Kafka release kafka-python takes these ApiVersions for (what a client will assume)."""
    try:
        from kafka.protocol.broker_version_data import infer_broker_version_from_api_versions
        version = infer_broker_version_from_api_versions({int(k): tuple(v) for k, v in apis.items()})
    except Exception:
        return None
    return ".".join(map(str, version)) if version else None


def document(results: list[dict], *, broker: str, bootstrap: str, started: str, duration_s: float,
             clients: list[str], scenarios: list[str], client_versions: dict | None = None,
             probe: dict | None = None, command: str | None = None) -> dict:
    """The JSON report: the run's results plus what the page shows beside them."""
    doc = {"format": FORMAT, "broker": broker, "bootstrap": bootstrap, "started": started,
           "duration_s": duration_s, "command": command, "clients": clients, "scenarios": scenarios,
           "client_versions": client_versions or {}, "summary": summary(results), "results": results}
    if probe is not None:
        doc["api_versions"] = {**probe, "reference": KAFKA_4_2_NAME,
                               "kafka_release_guess": guess_kafka_release(probe.get("apis") or {}),
                               "rows": api_rows(probe.get("apis") or {})}
    return doc


def json_path_for(html_path: str | Path) -> Path:
    """``out.html`` -> ``out.json`` (beside it)."""
    return Path(html_path).with_suffix(".json")


def write(doc: dict, html_path: str | Path | None = None, json_path: str | Path | None = None) -> None:
    if json_path:
        Path(json_path).write_text(json.dumps(doc, indent=2) + "\n")
    if html_path:
        Path(html_path).write_text(render(doc))


# ----------------------------------------------------------------------------------- HTML
CSS = """
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:1.5rem auto;max-width:80rem;
padding:0 1rem;color:#1b1b1b;background:#fff}
h1{font-size:1.6rem;margin-bottom:.2rem}h2{font-size:1.25rem;margin-top:2rem}
table{border-collapse:collapse;margin:.5rem 0}caption{text-align:left;font-weight:600;padding:.3rem 0}
th,td{border:1px solid #c8c8c8;padding:.3rem .45rem;vertical-align:top;text-align:left}
thead th{background:#f1f1f1}tbody th{background:#fafafa;font-weight:600}
.scroll{overflow-x:auto}.small{font-size:.85rem;color:#444}.mono{font-family:ui-monospace,Menlo,Consolas,monospace}
.pass{background:#e3f4e1;color:#14521a}.fail{background:#fbe1e0;color:#8a1410}.skip{background:#f0f0f0;color:#444}
.same{background:#e3f4e1;color:#14521a}.behind,.missing{background:#fdf0d5;color:#6b4200}
.ahead,.extra{background:#e4eefb;color:#173f7a}
td.cell{min-width:6.5rem}table.matrix tbody th{min-width:12rem}details summary{cursor:pointer;font-weight:600}details p{margin:.3rem 0}
ul.apis{margin:.2rem 0;padding-left:1rem}dl.meta{display:grid;grid-template-columns:max-content auto;gap:.15rem 1rem}
dl.meta dt{font-weight:600}dl.meta dd{margin:0}.counts span{margin-right:1rem;padding:.1rem .4rem;border-radius:3px}
"""


def _e(value) -> str:
    return escape("" if value is None else str(value))


def _versions(vs) -> str:
    return "v" + ",".join(str(v) for v in vs)


def _apis_compact(apis: dict) -> str:
    return ", ".join(f"{name} {_versions(vs)}" for name, vs in apis.items())


def _range(r) -> str:
    if not r:
        return "\u2014"
    return f"{r[0]}\u2013{r[1]}" if r[0] != r[1] else str(r[0])


def _cell(r: dict | None) -> str:
    if r is None:
        return '<td class="cell skip">not run</td>'
    status = r["status"]
    label = STATUS_TEXT.get(status, status)
    apis = r.get("apis") or {}
    inner = []
    if r.get("reason"):
        inner.append(f"<p>{_e(r['reason'])}</p>")
    if apis:
        inner.append(f'<p class="small">API versions sent ({len(apis)}):</p><ul class="apis small mono">'
                     + "".join(f"<li>{_e(n)} {_e(_versions(vs))}</li>" for n, vs in apis.items()) + "</ul>")
    inner.append(f'<p class="small">{_e(r.get("seconds"))} s</p>')
    title = f' title="{_e(_apis_compact(apis))}"' if apis else ""
    return (f'<td class="cell {_e(status)}"{title}>'
            f"<details><summary>{_e(label)}</summary>{''.join(inner)}</details></td>")


def _matrix(doc: dict) -> str:
    results = doc["results"]
    clients = doc.get("clients") or list(dict.fromkeys(r["client"] for r in results))
    scenarios = doc.get("scenarios") or list(dict.fromkeys(r["scenario"] for r in results))
    cells = {(r["client"], r["scenario"]): r for r in results}
    versions = doc.get("client_versions") or {}
    head = "".join(f'<th scope="col" title="{_e(SCENARIOS[s][2] if s in SCENARIOS else "")}">{_e(s)}</th>'
                   for s in scenarios)
    rows = []
    for c in clients:
        tds = "".join(_cell(cells.get((c, s))) for s in scenarios)
        rows.append(f'<tr><th scope="row">{_e(c)}<br><span class="small">{_e(versions.get(c) or "version unknown")}'
                    f"</span></th>{tds}</tr>")
    return ('<div class="scroll"><table class="matrix"><caption>Clients (rows) \u00d7 scenarios (columns): '
            "open a cell for its reason and the API versions the client sent</caption>"
            f'<thead><tr><th scope="col">client</th>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table></div>')


def _sent_by_clients(results: list[dict]) -> dict[str, set[int]]:
    sent: dict[str, set[int]] = {}
    for r in results:
        for name, vs in (r.get("apis") or {}).items():
            sent.setdefault(name, set()).update(vs)
    return sent


def _api_table(doc: dict) -> str:
    av = doc.get("api_versions")
    if not av:
        return "<p>ApiVersions was not asked in this run.</p>"
    if av.get("error"):
        return f"<p>{_e(av['error'])}</p>"
    rows = av.get("rows") or []
    sent = _sent_by_clients(doc["results"])
    counts = {}
    for r in rows:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    body = []
    for r in rows:
        s = sent.get(r["name"])
        body.append(f'<tr><td class="mono">{_e(r["api_key"])}</td><th scope="row">{_e(r["name"])}</th>'
                    f'<td class="mono">{_e(_range(r["broker"]))}</td><td class="mono">{_e(_range(r["kafka"]))}</td>'
                    f'<td class="{_e(r["status"])}">{_e(API_STATUS_TEXT.get(r["status"], r["status"]))}</td>'
                    f'<td class="mono small">{_e(_versions(sorted(s)) if s else "")}</td></tr>')
    guess = av.get("kafka_release_guess")
    intro = (f"<p>Asked with ApiVersions v{_e(av.get('request_version'))}. "
             + "; ".join(f"{n} {_e(API_STATUS_TEXT[k].split(' ', 1)[1])}" for k, n in sorted(counts.items())
                         if k in API_STATUS_TEXT)
             + "." + (f" kafka-python takes these versions for Kafka {_e(guess)}." if guess else "") + "</p>")
    return (intro + '<div class="scroll"><table class="apis-table"><caption>Every API key: the versions the broker '
            f"advertises beside {_e(av.get('reference', KAFKA_4_2_NAME))}'s, and the versions the clients sent"
            '</caption><thead><tr><th scope="col">key</th><th scope="col">API</th><th scope="col">broker</th>'
            f'<th scope="col">{_e(av.get("reference", KAFKA_4_2_NAME))}</th><th scope="col">status</th>'
            f'<th scope="col">sent by clients</th></tr></thead><tbody>{"".join(body)}</tbody></table></div>'
            + _features(av))


def _features(av: dict) -> str:
    if "supported_features" not in av:
        return "<p>Features: not reported (ApiVersions below v3).</p>"
    sup, fin = av.get("supported_features") or {}, av.get("finalized_features") or {}
    if not sup and not fin:
        return "<p>Features: the broker reports no supported or finalized features.</p>"
    names = sorted(set(sup) | set(fin))
    body = "".join(f'<tr><th scope="row">{_e(n)}</th><td class="mono">{_e(_range(sup.get(n)))}</td>'
                   f'<td class="mono">{_e(_range(fin.get(n)))}</td></tr>' for n in names)
    return ('<table><caption>Features (ApiVersions v3+), finalized epoch '
            f'{_e(av.get("finalized_features_epoch"))}</caption><thead><tr><th scope="col">feature</th>'
            f'<th scope="col">supported</th><th scope="col">finalized</th></tr></thead><tbody>{body}</tbody></table>')


def render(doc: dict) -> str:
    counts = doc.get("summary") or summary(doc["results"])
    total = sum(counts.values())
    versions = doc.get("client_versions") or {}
    client_list = "".join(f"<li>{_e(c)}: {_e(versions.get(c) or 'version unknown')}</li>" for c in doc.get("clients") or [])
    scenario_list = "".join(f"<dt>{_e(s)}</dt><dd>{_e(SCENARIOS[s][2] if s in SCENARIOS else '')}</dd>"
                            for s in doc.get("scenarios") or [])
    title = f"Kafka client compatibility: {doc.get('broker', 'broker')}"
    meta = [("Broker", doc.get("broker")), ("Bootstrap", doc.get("bootstrap")), ("Run started", doc.get("started")),
            ("Duration", f"{doc.get('duration_s')} s"), ("Command", doc.get("command"))]
    meta_html = "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in meta if v not in (None, "", "None s"))
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{_e(title)}</title><style>{CSS}</style></head><body>
<header><h1>{_e(title)}</h1>
<p class="small">Stock Kafka clients run the same scenarios against the broker (<code>kwire compat</code>).</p></header>
<main>
<section aria-labelledby="run"><h2 id="run">Run</h2><dl class="meta">{meta_html}</dl>
<p class="counts"><strong>{total} cells:</strong> <span class="pass">{STATUS_TEXT['pass']}: {counts.get('pass', 0)}</span>
<span class="fail">{STATUS_TEXT['fail']}: {counts.get('fail', 0)}</span>
<span class="skip">{STATUS_TEXT['skip']}: {counts.get('skip', 0)}</span></p>
<h3>Clients</h3><ul>{client_list}</ul></section>
<section aria-labelledby="matrix"><h2 id="matrix">Client \u00d7 scenario</h2>{_matrix(doc)}
<p class="small">A skip means the scenario does not apply to that client or the client is not installed
here; the reason says which. The API versions are what each client sent through a recording proxy
in front of the broker.</p></section>
<section aria-labelledby="apis"><h2 id="apis">API versions</h2>{_api_table(doc)}</section>
<section aria-labelledby="scenarios"><h2 id="scenarios">Scenarios</h2><dl>{scenario_list}</dl></section>
</main>
<footer><p class="small">Run it against any Kafka-compatible broker:
<code>kwire compat --against HOST:PORT --report out.html</code> (writes out.html and out.json).</p></footer>
</body></html>
"""
