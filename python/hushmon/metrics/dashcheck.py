"""Runs every panel's query of the Grafana dashboards against a Prometheus
API (Prometheus or VictoriaMetrics), without Grafana.

``python -m hushmon.metrics.dashcheck URL [DASHBOARD.json ...]`` (default:
the jobs and cost dashboards of deploy/grafana/): each query variable is
resolved as Grafana would (``label_values(metric, label)`` through the
label API; several values as the regex ``(a|b)``), ``$__rate_interval``
becomes 1m, and a query that returns nothing, or a series without a label
its legend names, is a failure. A site checks its data source with it; the
tests check the shipped dashboards with it against real servers.
"""

from __future__ import annotations

import json
import re
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from hushmon.paths import REPO_ROOT

GRAFANA = REPO_ROOT / "deploy" / "grafana"
RATE_INTERVAL = "1m"  # about what Grafana puts for $__rate_interval at short scrapes


def _get(url: str) -> Any:
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            doc = json.loads(r.read())
    except urllib.error.HTTPError as exc:
        doc = json.loads(exc.read() or b"{}")
    if doc.get("status") != "success":
        raise ValueError(f"{url}: {doc.get('error', doc)}")
    return doc["data"]


def promql(url: str, query: str) -> list[dict[str, Any]]:
    q = urllib.parse.urlencode({"query": query})
    return list(_get(f"{url}/api/v1/query?{q}")["result"])


def label_values(url: str, label: str, match: str) -> list[str]:
    q = urllib.parse.urlencode({"match[]": match})
    return list(_get(f"{url}/api/v1/label/{label}/values?{q}"))


def _regex_value(value: str) -> str:
    """A value inside a PromQL regex inside a double-quoted string."""
    return re.escape(value).replace("\\", "\\\\")


def substitute(expr: str, chosen: dict[str, str]) -> str:
    expr = expr.replace("$__rate_interval", RATE_INTERVAL)
    for name in sorted(chosen, key=len, reverse=True):
        expr = expr.replace(f"${name}", chosen[name])
    if "$" in expr:
        raise ValueError(f"a variable the dashboard does not define: {expr}")
    return expr


def resolve(url: str, dash: dict[str, Any]) -> tuple[dict[str, str], list[str]]:
    """Each query variable's values (a later one may use an earlier), and problems."""
    chosen: dict[str, str] = {}
    problems: list[str] = []
    for var in dash["templating"]["list"]:
        if var["type"] != "query":
            continue
        m = re.fullmatch(r"label_values\((.+), *(\w+)\)", var["definition"])
        if not m:
            problems.append(f"variable {var['name']}: {var['definition']} is not label_values")
            continue
        values = label_values(url, m.group(2), substitute(m.group(1), chosen))
        if not values:
            problems.append(f"variable {var['name']} has no values ({var['definition']})")
        chosen[var["name"]] = "(" + "|".join(_regex_value(v) for v in values) + ")"
    return chosen, problems


def check(url: str, path: Path) -> tuple[int, list[str]]:
    """(queries run, problems) of one dashboard file against ``url``."""
    dash = json.loads(path.read_text(encoding="utf-8"))
    chosen, problems = resolve(url, dash)
    queries = 0
    for panel in dash["panels"]:
        for target in panel["targets"]:
            expr = substitute(target["expr"], chosen)
            result = promql(url, expr)
            queries += 1
            if not result:
                problems.append(f"{path.name}: {panel['title']!r}: no data for {expr}")
                continue
            used = set(re.findall(r"\{\{ *(\w+) *\}\}", target.get("legendFormat", "")))
            for series in result:
                missing = used - set(series["metric"])
                if missing:
                    problems.append(f"{path.name}: {panel['title']!r}: {expr} lacks {missing}")
                    break
    return queries, problems


def main(argv: list[str]) -> int:
    if not argv or argv[0].startswith("-"):
        print("usage: python -m hushmon.metrics.dashcheck URL [DASHBOARD.json ...]",
              file=sys.stderr)  # fmt: skip
        return 2
    url = argv[0].rstrip("/")
    files = [Path(a) for a in argv[1:]] or [
        GRAFANA / "hushmon-jobs.json",
        GRAFANA / "hushmon-cost.json",
    ]
    failed = 0
    for path in files:
        try:
            queries, problems = check(url, path)
        except (OSError, ValueError, KeyError) as exc:
            print(f"dashcheck: {path}: {exc}", file=sys.stderr)
            return 1
        for p in problems:
            print(f"dashcheck: {p}", file=sys.stderr)
        failed += len(problems)
        print(f"{path.name}: {queries} queries, {len(problems)} problem(s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
