"""Render docs/grafana-kwire.json's panels from a live kwire run, without Grafana, and screenshot it.

    .venv/bin/python docs/render_dashboard.py [--seconds 150] [--out docs/dashboard.png]

Grafana is not packaged where kwire's machines install from (PyPI, npm, Debian), so this
stands in for it: it starts ``kwire serve`` with prometheus.listener, runs a workload
through confluent-kafka (producers on three topics at changing rates, one consumer group
that keeps up and one that falls behind, an occasional record the broker refuses),
scrapes /metrics every ``SCRAPE_S`` seconds as Prometheus would, evaluates each panel's
PromQL over that series and draws the panels where the dashboard's gridPos puts them, as
SVG in one HTML page, which headless Chromium (Debian's ``chromium``) screenshots.

Only the PromQL the dashboard uses is understood: selectors with =, !=, =~, !~ matchers,
``rate(v[range])``, ``sum [by (labels)] (v)`` and ``histogram_quantile(q, v)``;
``$__rate_interval`` is RATE_WINDOW_S and ``$instance`` matches everything.
"""
from __future__ import annotations

import argparse
import html
import json
import math
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from confluent_kafka import Consumer, Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from kwire.testing.process import BrokerProcess, free_port  # noqa: E402

SCRAPE_S = 2.0
RATE_WINDOW_S = 20.0
COLORS = ("#73bf69", "#f2cc0c", "#5794f2", "#ff780a", "#f2495c", "#b877d9", "#8ab8ff", "#ff9830", "#96d98d")

# -- the scrape series -------------------------------------------------------------------------

Series = list[tuple[float, dict]]          # (time, {(name, frozenset(labels)): value})


def scrape(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


# -- a PromQL subset ---------------------------------------------------------------------------

_TOKEN = re.compile(r'\s*(?:(?P<dur>\d+[smh])|(?P<num>\d+(?:\.\d+)?)|(?P<str>"(?:[^"\\]|\\.)*")'
                    r'|(?P<op>=~|!~|!=|[(){}\[\],=])|(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*))')


def tokenize(expr: str) -> list[str]:
    tokens, pos = [], 0
    while pos < len(expr.rstrip()):
        m = _TOKEN.match(expr, pos)
        if m is None:
            raise ValueError(f"cannot read {expr[pos:]!r}")
        tokens.append(m.group().strip())
        pos = m.end()
    return tokens


class Parser:
    """Recursive descent over the tokens into nested tuples: ("sel", name, matchers, range_s),
    ("rate", sel), ("sum", by_labels | None, expr), ("hq", q, expr)."""

    def __init__(self, expr: str):
        self.tokens = tokenize(expr.replace("$__rate_interval", f"{int(RATE_WINDOW_S)}s")
                               .replace('"$instance"', '".*"'))
        self.i = 0

    def take(self, expected: str | None = None) -> str:
        token = self.tokens[self.i]
        if expected is not None and token != expected:
            raise ValueError(f"expected {expected!r}, got {token!r}")
        self.i += 1
        return token

    def peek(self) -> str | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def expr(self):
        word = self.take()
        if word == "rate":
            self.take("(")
            inner = self.expr()
            self.take(")")
            return ("rate", inner)
        if word == "sum":
            by = None
            if self.peek() == "by":
                self.take()
                by = self.labels()
            self.take("(")
            inner = self.expr()
            self.take(")")
            return ("sum", by, inner)
        if word == "histogram_quantile":
            self.take("(")
            q = float(self.take())
            self.take(",")
            inner = self.expr()
            self.take(")")
            return ("hq", q, inner)
        return self.selector(word)

    def labels(self) -> list[str]:
        self.take("(")
        names = [self.take()]
        while self.peek() == ",":
            self.take()
            names.append(self.take())
        self.take(")")
        return names

    def selector(self, name: str):
        matchers, range_s = [], None
        if self.peek() == "{":
            self.take()
            while self.peek() != "}":
                label, op, value = self.take(), self.take(), json.loads(self.take())
                matchers.append((label, op, value))
                if self.peek() == ",":
                    self.take()
            self.take("}")
        if self.peek() == "[":
            self.take()
            duration = self.take()
            self.take("]")
            range_s = float(duration[:-1]) * {"s": 1, "m": 60, "h": 3600}[duration[-1]]
        return ("sel", name, matchers, range_s)


def matches(labels: dict, matchers) -> bool:
    for label, op, value in matchers:
        have = labels.get(label, "")
        ok = {"=": have == value, "!=": have != value,
              "=~": re.fullmatch(value, have) is not None, "!~": re.fullmatch(value, have) is None}[op]
        if not ok:
            return False
    return True


def select(sample: dict, name: str, matchers) -> dict:
    return {labels: v for (n, labels), v in sample.items() if n == name and matches(dict(labels), matchers)}


def evaluate(node, series: Series, k: int) -> dict:
    """The instant vector {frozenset(labels): value} of ``node`` at the k-th scrape."""
    kind = node[0]
    if kind == "sel":
        return select(series[k][1], node[1], node[2])
    if kind == "rate":
        return rate(node[1], series, k)
    if kind == "sum":
        out: dict = {}
        for labels, v in evaluate(node[2], series, k).items():
            key = frozenset((n, x) for n, x in labels if node[1] is not None and n in node[1])
            out[key] = out.get(key, 0.0) + v
        return out
    return quantiles(node[1], evaluate(node[2], series, k))


def rate(sel, series: Series, k: int) -> dict:
    """Per-second increase over the selector's range ending at scrape k (counter resets added)."""
    now = series[k][0]
    window = [(t, select(s, sel[1], sel[2])) for t, s in series[:k + 1] if t >= now - sel[3]]
    out = {}
    for labels in window[-1][1]:
        points = [(t, vec[labels]) for t, vec in window if labels in vec]
        if len(points) < 2:
            continue
        increase = sum(b - a if b >= a else b for (_, a), (_, b) in zip(points, points[1:]))
        out[labels] = increase / (points[-1][0] - points[0][0])
    return out


def quantiles(q: float, buckets: dict) -> dict:
    """Prometheus's histogram_quantile over cumulative ``le`` buckets, per label set."""
    groups: dict = {}
    for labels, v in buckets.items():
        rest = frozenset((n, x) for n, x in labels if n != "le")
        groups.setdefault(rest, []).append((float(dict(labels)["le"]), v))
    out = {}
    for labels, points in groups.items():
        points.sort()
        total = points[-1][1]
        if total <= 0:
            continue
        rank, lower, below = q * total, 0.0, 0.0
        for le, count in points:
            if count >= rank:
                out[labels] = points[-2][0] if math.isinf(le) else lower + (le - lower) * (rank - below) / max(
                    count - below, 1e-12)
                break
            lower, below = le, count
    return out


# -- drawing -----------------------------------------------------------------------------------

def human(value: float, unit: str) -> str:
    suffix = {"Bps": "B/s", "bytes": "B", "ms": " ms", "reqps": " req/s"}.get(unit, "")
    for factor, prefix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor and unit != "ms":
            return f"{value / factor:.1f} {prefix}{suffix.strip()}" if suffix else f"{value / factor:.1f}{prefix}"
    return f"{value:.3g}{suffix}"


def panel_lines(panel: dict, series: Series, first: int) -> list[tuple[str, list[tuple[float, float]]]]:
    lines: dict[str, list] = {}
    for target in panel["targets"]:
        tree = Parser(target["expr"]).expr()
        for k in range(first, len(series)):
            for labels, v in evaluate(tree, series, k).items():
                name = re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: dict(labels).get(m.group(1), ""),
                              target.get("legendFormat") or "value")
                lines.setdefault(name, []).append((series[k][0], v))
    return sorted(lines.items())


def svg_panel(panel: dict, series: Series, first: int, width: float, height: float) -> str:
    unit = panel["fieldConfig"]["defaults"].get("unit", "short")
    lines = panel_lines(panel, series, first)
    left, top, right, bottom = 70, 8, width - 12, height - 26 - 16 * ((len(lines) + 2) // 3)
    t0, t1 = series[first][0], series[-1][0]
    ymax = max([v for _, pts in lines for _, v in pts] + [0]) * 1.1 or 1
    ymin = min([v for _, pts in lines for _, v in pts] + [0])
    sx = lambda t: left + (right - left) * (t - t0) / max(t1 - t0, 1e-9)  # noqa: E731
    sy = lambda v: bottom - (bottom - top) * (v - ymin) / max(ymax - ymin, 1e-9)  # noqa: E731
    out = [f'<svg width="{width:.0f}" height="{height:.0f}">']
    for i in range(5):
        v = ymin + (ymax - ymin) * i / 4
        out.append(f'<line x1="{left}" x2="{right}" y1="{sy(v):.1f}" y2="{sy(v):.1f}" class="grid"/>'
                   f'<text x="{left - 6}" y="{sy(v) + 4:.1f}" class="tick" text-anchor="end">{html.escape(human(v, unit))}</text>')
    for i in range(5):
        t = t0 + (t1 - t0) * i / 4
        anchor = ("start", "middle", "middle", "middle", "end")[i]
        out.append(f'<text x="{sx(t):.1f}" y="{bottom + 16}" class="tick" text-anchor="{anchor}">'
                   f'{time.strftime("%H:%M:%S", time.localtime(t))}</text>')
    for n, (name, points) in enumerate(lines):
        color = COLORS[n % len(COLORS)]
        path = " ".join(f"{sx(t):.1f},{sy(v):.1f}" for t, v in points)
        out.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="1.6"/>')
        lx, ly = left + (n % 3) * (right - left) / 3, bottom + 34 + 16 * (n // 3)
        out.append(f'<rect x="{lx:.0f}" y="{ly - 9}" width="12" height="4" fill="{color}"/>'
                   f'<text x="{lx + 18:.0f}" y="{ly - 4}" class="legend">{html.escape(name[:40])}</text>')
    out.append("</svg>")
    return "".join(out)


def render_html(dashboard: dict, series: Series, page_width: int) -> str:
    first = next(k for k, (t, _) in enumerate(series) if t - series[0][0] >= RATE_WINDOW_S)
    unit_w, unit_h = page_width / 24, 34
    parts = []
    for panel in dashboard["panels"]:
        g = panel["gridPos"]
        x, y, w, h = g["x"] * unit_w, g["y"] * unit_h, g["w"] * unit_w - 8, g["h"] * unit_h - 8
        style = f"left:{x:.0f}px;top:{y:.0f}px;width:{w:.0f}px;height:{h:.0f}px"
        if panel["type"] == "row":
            parts.append(f'<div class="row" style="{style}">{html.escape(panel["title"])}</div>')
            continue
        body = svg_panel(panel, series, first, w, h - 28)
        parts.append(f'<div class="panel" style="{style}"><div class="title">{html.escape(panel["title"])}</div>'
                     f"{body}</div>")
    height = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in dashboard["panels"]) * unit_h
    span = time.strftime("%H:%M:%S", time.localtime(series[first][0])) + " – " + \
        time.strftime("%H:%M:%S", time.localtime(series[-1][0]))
    return f"""<!doctype html><html><head><meta charset="utf-8"><style>
body{{margin:0;background:#111217;color:#ccccdc;font:12px Inter,Helvetica,Arial,sans-serif}}
header{{height:40px;padding:0 16px;display:flex;align-items:center;gap:16px;border-bottom:1px solid #2c2e33}}
header b{{font-size:16px}} #grid{{position:relative;margin:8px;height:{height:.0f}px}}
.panel{{position:absolute;background:#181b1f;border:1px solid #2c2e33;border-radius:3px}}
.title{{padding:6px 8px;font-weight:500;height:16px}}
.row{{position:absolute;font-size:14px;font-weight:500;padding-top:6px}}
.grid{{stroke:#2c2e33}} .tick{{fill:#8e8e99;font-size:10px}} .legend{{fill:#ccccdc;font-size:11px}}
</style></head><body><header><b>{html.escape(dashboard["title"])}</b>
<span>docs/grafana-kwire.json, rendered from a live kwire run's /metrics (every {SCRAPE_S:.0f} s, rate window
{RATE_WINDOW_S:.0f} s), {span}</span></header><div id="grid">{"".join(parts)}</div></body></html>"""


# -- the workload --------------------------------------------------------------------------------

def workload(bootstrap: str, stop: threading.Event) -> list[threading.Thread]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [NewTopic("orders", 3, 1), NewTopic("payments", 2, 1), NewTopic("clicks", 6, 1),
              NewTopic("profiles", 1, 1, config={"cleanup.policy": "compact"})]
    for future in admin.create_topics(topics).values():
        future.result(30)

    def produce():
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
        started = refused = time.monotonic()
        while not stop.is_set():
            phase = (time.monotonic() - started) / 40
            for topic, per_tick, size in (("orders", 40 + 30 * math.sin(phase), 1024), ("payments", 15, 512),
                                          ("clicks", 80 + 70 * math.sin(phase * 1.7 + 1), 200)):
                for _ in range(int(per_tick)):
                    producer.produce(topic, b"x" * size)
            if time.monotonic() - refused >= 15:
                refused = time.monotonic()
                producer.produce("profiles", b"a record without a key")     # refused: INVALID_RECORD
            producer.poll(0)
            time.sleep(0.1)
        producer.flush(10)

    def consume(group: str, topic: str, pause: float):
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                             "auto.commit.interval.ms": 1000})
        consumer.subscribe([topic])
        while not stop.is_set():
            consumer.consume(200 if pause else 5000, 0.5)
            time.sleep(pause)
        consumer.close()

    threads = [threading.Thread(target=produce), threading.Thread(target=consume, args=("billing", "payments", 0)),
               threading.Thread(target=consume, args=("analytics", "orders", 0.5)),
               threading.Thread(target=consume, args=("search-indexer", "clicks", 0))]
    for thread in threads:
        thread.start()
    return threads


def record(seconds: float) -> Series:
    port = free_port()
    url = f"http://127.0.0.1:{port}/metrics"
    stop = threading.Event()
    series: Series = []
    with BrokerProcess(args=["--log-level", "WARNING"], properties={"prometheus.listener": f"127.0.0.1:{port}"}) as b:
        threads = workload(b.bootstrap, stop)
        try:
            deadline = time.time() + seconds
            while time.time() < deadline:
                series.append((time.time(), scrape(url)))
                time.sleep(SCRAPE_S)
        finally:
            stop.set()
            for thread in threads:
                thread.join(30)
    return series


def screenshot(page: Path, out: Path, width: int, height: int) -> None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        raise SystemExit("no chromium: apt-get install chromium")
    subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    f"--window-size={width},{height}", f"--screenshot={out}", page.as_uri()],
                   check=True, capture_output=True, timeout=120)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=150)
    parser.add_argument("--dashboard", type=Path, default=ROOT / "docs" / "grafana-kwire.json")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "dashboard.png")
    parser.add_argument("--html", type=Path, help="also keep the HTML page here")
    parser.add_argument("--width", type=int, default=1600)
    args = parser.parse_args(argv)
    dashboard = json.loads(args.dashboard.read_text())
    page = render_html(dashboard, record(args.seconds), args.width - 16)
    height = 60 + max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in dashboard["panels"]) * 34
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(args.html) if args.html else Path(tmp, "dashboard.html")
        path.write_text(page)
        screenshot(path, args.out.resolve(), args.width, height)
    print(f"{args.out} ({args.width}x{height})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
