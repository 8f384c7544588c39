"""axe-core (Deque's accessibility engine, from the npm registry) for the console's browser
tests: installed once into kwire's cache, injected into a Playwright page, run there."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from kwire.compat_tests.external import cache_dir

AXE_VERSION = "4.10"
# WCAG 2.x levels A and AA: labels, names, contrast, landmarks, keyboard-reachable controls
TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]


def ensure_axe(timeout: float = 180) -> tuple[Path | None, str | None]:
    """(path of axe.min.js, None) or (None, why not)."""
    target = cache_dir() / "axe-core"
    script = target / "node_modules" / "axe-core" / "axe.min.js"
    if script.exists():
        return script, None
    if shutil.which("npm") is None:
        return None, "npm not installed (needed once to fetch axe-core)"
    target.mkdir(parents=True, exist_ok=True)
    try:
        done = subprocess.run(["npm", "install", "--silent", "--no-audit", "--no-fund", "--prefix", str(target),
                               f"axe-core@{AXE_VERSION}"], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"npm install axe-core timed out after {timeout:.0f}s"
    if done.returncode != 0 or not script.exists():
        return None, f"npm install axe-core failed: {done.stderr.strip()[-200:]}"
    return script, None


def violations(page, script: Path) -> list[str]:
    """axe's WCAG A/AA violations on the page as it is now: "rule: target (summary)" lines."""
    page.add_script_tag(path=str(script))
    found = page.evaluate("tags => axe.run(document, {runOnly: {type: 'tag', values: tags}})"
                          ".then(r => r.violations.map(v => [v.id, v.nodes.map(n => n.target.join(' ') + ' ' +"
                          " (n.failureSummary || '').split('\\n').slice(1, 2).join(''))]))", TAGS)
    return [f"{rule}: {node}" for rule, nodes in found for node in nodes]
