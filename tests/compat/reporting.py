"""The compat runs of the test suite write the readable report too (``kwire compat --report``'s
page and JSON) into ``$KWIRE_COMPAT_REPORT_DIR`` (CI keeps it), else a pytest temp folder."""
from __future__ import annotations

import datetime
import os
import time
from pathlib import Path

from kwire.compat_tests import api_versions, report_html
from kwire.compat_tests.runner import CLIENTS, DEFAULT_CLIENTS, run_matrix
from kwire.compat_tests.scenarios import SCENARIOS

REPORT_DIR_ENV = "KWIRE_COMPAT_REPORT_DIR"


def report_dir(tmp_path_factory) -> Path:
    if os.environ.get(REPORT_DIR_ENV):
        path = Path(os.environ[REPORT_DIR_ENV])
        path.mkdir(parents=True, exist_ok=True)
        return path
    return tmp_path_factory.mktemp("compat-report")


def run_with_report(bootstrap: str, broker: str, out_dir: Path, clients=None, **kw) -> list[dict]:
    """run_matrix through the recording proxy, then ``<out_dir>/<broker>.html`` and ``.json``."""
    clients = clients or DEFAULT_CLIENTS
    started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    t0 = time.monotonic()
    probe = api_versions.probe(bootstrap)
    results = run_matrix(bootstrap, clients, record_apis=True, **kw)
    doc = report_html.document(results, broker=broker, bootstrap=bootstrap, started=started,
                               duration_s=round(time.monotonic() - t0, 1), clients=clients,
                               scenarios=list(SCENARIOS),
                               client_versions={c: CLIENTS[c].library_version() for c in clients},
                               probe=probe, command=f"pytest tests/compat ({broker})")
    html = out_dir / f"{broker}.html"
    report_html.write(doc, html_path=html, json_path=report_html.json_path_for(html))
    print(f"\ncompatibility report: {html}")
    return results
