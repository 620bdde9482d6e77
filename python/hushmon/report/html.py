"""A small builder for self-contained HTML reports.

Reports must open in a browser on a cluster login node with no network: no
scripts or fonts from elsewhere, plots inlined as SVG, styles inline. Every
command that writes a report (bench, noise, digest, overhead) builds it with
:class:`Page` so they look alike.
"""

from __future__ import annotations

import html
import io
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.figure import Figure

_STYLE = """
body { font-family: system-ui, -apple-system, 'Segoe UI', sans-serif; margin: 2em auto;
       max-width: 1100px; color: #1d2430; line-height: 1.45; padding: 0 1em; }
h1 { font-size: 1.6em; border-bottom: 2px solid #2d6cdf; padding-bottom: .2em; }
h2 { font-size: 1.25em; margin-top: 1.8em; color: #1f4f9e; }
h3 { font-size: 1.05em; margin-top: 1.2em; }
table { border-collapse: collapse; margin: .8em 0; font-size: .9em; }
th, td { border: 1px solid #ccd3de; padding: .25em .6em; text-align: right; }
th { background: #eef2f8; }
td.text, th.text { text-align: left; }
.meta { color: #556; font-size: .9em; }
.figure { margin: 1em 0; }
.figure .caption { color: #445; font-size: .9em; }
.finding { border-left: 4px solid #888; padding: .3em .8em; margin: .6em 0; background: #f7f8fa; }
.finding.high { border-color: #c62828; }
.finding.medium { border-color: #ef8f00; }
.finding.low { border-color: #2e7d32; }
.verdict { font-size: 1.2em; font-weight: 600; }
code, pre { background: #f3f4f6; padding: 0 .25em; }
"""


def escape(text: object) -> str:
    return html.escape(str(text), quote=True)


def figure_svg(fig: Figure) -> str:
    """The figure as inline SVG markup; closes the figure."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    plt.close(fig)
    svg = buf.getvalue()
    start = svg.find("<svg")
    return svg[start:] if start >= 0 else svg


def _format_cell(value: Any) -> str:
    if isinstance(value, float):
        if value != value:  # NaN
            return "–"
        return f"{value:.4g}"
    return escape(value)


class Page:
    """An HTML report page built section by section."""

    def __init__(self, title: str) -> None:
        self.title = title
        self._parts: list[str] = [f"<h1>{escape(title)}</h1>"]

    def heading(self, text: str, level: int = 2) -> Page:
        self._parts.append(f"<h{level}>{escape(text)}</h{level}>")
        return self

    def paragraph(self, text: str, css_class: str = "") -> Page:
        cls = f' class="{escape(css_class)}"' if css_class else ""
        self._parts.append(f"<p{cls}>{escape(text)}</p>")
        return self

    def meta(self, items: Iterable[tuple[str, Any]]) -> Page:
        """A compact key: value list (provenance: host, MPI, timer, ...)."""
        rows = "".join(
            f"<tr><th class='text'>{escape(k)}</th><td class='text'>{escape(v)}</td></tr>"
            for k, v in items
        )
        self._parts.append(f"<table class='meta'>{rows}</table>")
        return self

    def table(
        self,
        columns: Sequence[str],
        rows: Iterable[Sequence[Any]],
        text_columns: Sequence[int] = (0,),
    ) -> Page:
        head = "".join(
            f"<th class='{'text' if i in text_columns else ''}'>{escape(c)}</th>"
            for i, c in enumerate(columns)
        )
        body = []
        for row in rows:
            cells = "".join(
                f"<td class='{'text' if i in text_columns else ''}'>{_format_cell(v)}</td>"
                for i, v in enumerate(row)
            )
            body.append(f"<tr>{cells}</tr>")
        self._parts.append(f"<table><tr>{head}</tr>{''.join(body)}</table>")
        return self

    def figure(self, fig: Figure, caption: str = "") -> Page:
        cap = f"<div class='caption'>{escape(caption)}</div>" if caption else ""
        self._parts.append(f"<div class='figure'>{figure_svg(fig)}{cap}</div>")
        return self

    def finding(self, severity: str, title: str, text: str) -> Page:
        self._parts.append(
            f"<div class='finding {escape(severity)}'><b>{escape(title)}</b>"
            f" <span class='meta'>({escape(severity)})</span><br>{escape(text)}</div>"
        )
        return self

    def raw_html(self, markup: str) -> Page:
        """Trusted markup produced by this package (never user text)."""
        self._parts.append(markup)
        return self

    def render(self) -> str:
        return (
            "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
            f"<title>{escape(self.title)}</title><style>{_STYLE}</style></head>"
            f"<body>{''.join(self._parts)}</body></html>\n"
        )

    def write(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(self.render(), encoding="utf-8")
        tmp.replace(path)
        return path
