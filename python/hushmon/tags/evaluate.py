"""Rules applied to one job's facts: which tags it gets, with their hints."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hushmon.errors import HushmonError
from hushmon.tags.expr import Missing
from hushmon.tags.rules import Rule, RuleSet


@dataclass(frozen=True)
class JobTag:
    job: str
    tag: str
    rule: str
    hint: str


@dataclass(frozen=True)
class Outcome:
    tags: list[JobTag]
    # rule -> why it did not apply (a fact missing, a guard false)
    not_applied: dict[str, str]


def applies(rule: Rule, facts: Mapping[str, Any], params: Mapping[str, Any]) -> str | None:
    """None when ``rule`` tags a job with these facts; else why not."""
    missing = [name for name in rule.requires if name not in facts]
    if missing:
        return f"needs {', '.join(missing)}"
    try:
        for guard in rule.guards:
            if not guard.evaluate(facts, params):
                return f"guard false: {guard.text}"
        if not rule.condition.evaluate(facts, params):
            return "condition false"
    except Missing as exc:
        return f"needs {exc.name}"
    except HushmonError as exc:
        raise HushmonError(f"{rule.source}: {exc}") from None
    return None


def evaluate(job: str, facts: Mapping[str, Any], rules: RuleSet) -> Outcome:
    tags: dict[str, JobTag] = {}
    not_applied: dict[str, str] = {}
    for rule in rules.rules:
        why = applies(rule, facts, rules.params)
        if why is not None:
            not_applied[rule.name] = why
            continue
        # two rules with one tag: the first (by file name) gives the hint
        tags.setdefault(
            rule.tag, JobTag(job, rule.tag, rule.name, rule.render_hint(facts, rules.params))
        )
    return Outcome(sorted(tags.values(), key=lambda t: t.tag), not_applied)
