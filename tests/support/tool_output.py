"""Run an operator command (``kwire topics|configs|...``'s ``main``) and read back what it printed.

``run_tool(main, bootstrap, capsys, *argv)`` is (exit code, stdout, stderr) of
``main([*argv, "--bootstrap-server", bootstrap])``; ``run_tool_json`` the document it printed
with ``--output json`` (it must succeed).

The tables (kwire.tools.common.print_table):
rich prints a table as an optional title line, a header line, a rule of ``─`` and one line
per row, cells apart by two spaces or more.  ``tables(text)`` returns each table in ``text``
as ``{"title": str | None, "columns": [...], "rows": [{column: cell}]}``.  A line of one cell
under a table of several columns (a title, a message) ends the table.  An empty cell cannot
be told from the gap around it: such a row's cells shift left (tests avoid relying on them).
"""
from __future__ import annotations

import json
import re
import uuid


def cells(line: str) -> list[str]:
    return [c for c in re.split(r" {2,}", line.strip()) if c]


def tables(text: str) -> list[dict]:
    lines = text.splitlines()
    rules = [i for i, line in enumerate(lines) if line.strip() and set(line.strip()) == {"─"}]
    found = []
    for n, i in enumerate(rules):
        columns = cells(lines[i - 1])
        above = lines[i - 2] if i >= 2 else ""
        title = above.strip() if len(cells(above)) == 1 else None
        end = rules[n + 1] - 1 if n + 1 < len(rules) else len(lines)
        rows = []
        for line in lines[i + 1:end]:
            values = cells(line)
            if not values or (len(values) == 1 and len(columns) > 1):
                break
            rows.append(dict(zip(columns, values)))
        found.append({"title": title, "columns": columns, "rows": rows})
    return found


def run_tool(main, bootstrap: str, capsys, *argv: str) -> tuple[int, str, str]:
    code = main([*argv, "--bootstrap-server", bootstrap])
    out, err = capsys.readouterr()
    return code, out, err


def run_tool_json(main, bootstrap: str, capsys, *argv: str):
    code, out, err = run_tool(main, bootstrap, capsys, *argv, "--output", "json")
    assert code == 0, err
    return json.loads(out)


def unique_name(prefix: str) -> str:
    """``prefix-<8 hex digits>``: a topic or group name no other test uses."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"
