"""Tag rules as data: one TOML file per rule, thresholds in one parameters file.

The shipped rules live beside this module (``rules/*.toml``, thresholds in
``rules/parameters.toml``); a site adds its own folder (``--rules DIR`` or
``$HUSHMON_TAG_RULES``): a file there with the same name as a shipped rule
replaces it, a ``parameters.toml`` there overrides single thresholds. The
format is described in ``rules/README.md``. Everything is checked when the
rules are loaded, so a bad rule is one line naming its file."""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hushmon.errors import HushmonError
from hushmon.tags.expr import Expr, Missing, parse

SHIPPED_DIR = Path(__file__).parent / "rules"
PARAMETERS_FILE = "parameters.toml"
RULES_ENV = "HUSHMON_TAG_RULES"
_TAG = re.compile(r"[a-z][a-z0-9_]{0,40}")
# {expression} or {expression:format}; the format is a number format only
_FIELD = re.compile(r"\{([^{}:]+)(?::([0-9.,+ <>^-]*[dfge%]?))?\}")
MAX_HINT_CHARS = 500
_KEYS = {
    "tag", "description", "requires", "guards", "condition", "hint", "live", "hold_s", "nhr_class",
}  # fmt: skip


@dataclass(frozen=True)
class Rule:
    name: str  # the file's stem
    tag: str
    description: str
    requires: tuple[str, ...]
    guards: tuple[Expr, ...]
    condition: Expr
    hint: str
    hint_fields: tuple[tuple[Expr, str], ...]
    live: bool  # may be evaluated on one period's job summary (tags/live.py)
    # live: how long the condition must hold before an alert (an expression,
    # usually a threshold's name; None = at once); stored jobs ignore it
    hold_s: Expr | None
    nhr_class: str  # the NHR pathological job class this tag stands for ("" = none)
    source: Path

    def render_hint(self, facts: Mapping[str, Any], params: Mapping[str, Any]) -> str:
        """The hint with each {expression[:format]} replaced by its value."""
        values = iter(self.hint_fields)

        def one(_match: re.Match[str]) -> str:
            expr, fmt = next(values)
            try:
                value = expr.evaluate(facts, params)
            except Missing:
                return "?"
            try:
                return format(value, fmt) if fmt else _plain(value)
            except (ValueError, TypeError):
                return str(value)

        return _FIELD.sub(one, self.hint)[:MAX_HINT_CHARS]


def _plain(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)


@dataclass(frozen=True)
class RuleSet:
    rules: tuple[Rule, ...]
    params: Mapping[str, float | int | str]
    folders: tuple[Path, ...]


def _str_list(value: Any, where: str, key: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise HushmonError(f"{where}: {key} must be a string or a list of strings")
    return tuple(value)


def load_rule(path: Path) -> Rule:
    where = str(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise HushmonError(f"{where}: {exc}") from None
    unknown = set(data) - _KEYS
    if unknown:
        raise HushmonError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
    for key in ("tag", "condition", "hint"):
        if not isinstance(data.get(key), str) or not data[key].strip():
            raise HushmonError(f"{where}: {key} must be a non-empty string")
    tag = data["tag"]
    if not _TAG.fullmatch(tag):
        raise HushmonError(f"{where}: tag {tag!r}: lower-case letters, digits and _ only")
    hint = data["hint"]
    if len(hint) > MAX_HINT_CHARS:
        raise HushmonError(f"{where}: hint longer than {MAX_HINT_CHARS} characters")
    fields = tuple(
        (parse(m.group(1), f"{where}: hint {{{m.group(1)}}}"), m.group(2) or "")
        for m in _FIELD.finditer(hint)
    )
    rest = _FIELD.sub("", hint)
    if "{" in rest or "}" in rest:
        raise HushmonError(f"{where}: hint has a brace that is not {{expression[:format]}}")
    live = data.get("live", False)
    if not isinstance(live, bool):
        raise HushmonError(f"{where}: live must be true or false")
    hold = data.get("hold_s")
    if hold is not None and not isinstance(hold, str | int | float):
        raise HushmonError(f"{where}: hold_s must be a number or a threshold's name")
    return Rule(
        name=path.stem,
        tag=tag,
        description=str(data.get("description", "")),
        requires=_str_list(data.get("requires", []), where, "requires"),
        guards=tuple(
            parse(g, f"{where}: guard") for g in _str_list(data.get("guards", []), where, "guards")
        ),
        condition=parse(data["condition"], f"{where}: condition"),
        hint=hint,
        hint_fields=fields,
        live=live,
        hold_s=None if hold is None else parse(str(hold), f"{where}: hold_s"),
        nhr_class=str(data.get("nhr_class", "")),
        source=path,
    )


def _load_params(path: Path) -> dict[str, float | int | str]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise HushmonError(f"{path}: {exc}") from None
    out: dict[str, float | int | str] = {}
    for key, value in data.items():
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise HushmonError(f"{path}: {key} must be a number or a string")
        if "." in key or not key.isidentifier():
            raise HushmonError(f"{path}: {key!r} is not a plain name")
        out[key] = value
    return out


def site_folder(explicit: Path | None) -> Path | None:
    if explicit is not None:
        return explicit
    env = os.environ.get(RULES_ENV, "").strip()
    return Path(env) if env else None


def load_rules(site: Path | None = None, shipped: Path = SHIPPED_DIR) -> RuleSet:
    """The shipped rules, with a site folder's rules and thresholds over them."""
    folders = [shipped]
    if site is not None:
        if not site.is_dir():
            raise HushmonError(f"rules folder {site} is not a folder")
        folders.append(site)
    params: dict[str, float | int | str] = {}
    by_name: dict[str, Rule] = {}
    for folder in folders:
        if (folder / PARAMETERS_FILE).exists():
            params.update(_load_params(folder / PARAMETERS_FILE))
        for path in sorted(folder.glob("*.toml")):
            if path.name != PARAMETERS_FILE:
                rule = load_rule(path)
                by_name[rule.name] = rule
    rules = tuple(by_name[n] for n in sorted(by_name))
    for rule in rules:
        hold = (rule.hold_s,) if rule.hold_s is not None else ()
        for expr in (*rule.guards, rule.condition, *(e for e, _ in rule.hint_fields), *hold):
            for name in expr.names():
                # a plain name (no dot) can only be a threshold: catch typos at load
                if "." not in name and name not in params:
                    raise HushmonError(
                        f"{rule.source}: {name!r} is not in {PARAMETERS_FILE} "
                        "(facts have dotted names: job.duration_s, cpu.busy_pct.avg)"
                    )
    return RuleSet(rules, params, tuple(folders))
