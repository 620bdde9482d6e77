"""The report's "Phases" section: each phase's span, share and main limit."""

from __future__ import annotations

from hushmon.digest.phases import Phases
from hushmon.report.html import Page


def phase_section(page: Page, phases: Phases) -> None:
    page.heading("Phases")
    page.paragraph(phases.note[0].upper() + phases.note[1:] + ".")
    if not phases.several:
        return
    page.paragraph(
        "Every factor ran on each phase's periods alone; a phase's main limit is its most "
        "severe finding with the largest estimated loss, as a share of the phase's time and "
        "(times the phase's share) of the job's.",
        "meta",
    )
    page.table(
        ["phase", "seconds from the start", "share of the job", "what sets it apart", "main limit"],
        [
            (
                p.name,
                p.span_text() + (f" ({len(p.spans)} stretches)" if len(p.spans) > 1 else ""),
                f"{p.share:.0%}",
                p.description or "–",
                p.limit_text(),
            )
            for p in phases.phases
        ],
        text_columns=(0, 1, 2, 3, 4),
    )
