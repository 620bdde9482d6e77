"""A small, safe expression language for tag rules (no ``eval`` of rule text).

A rule's condition and the expressions in its hint are parsed by Python's
``ast`` module and then walked here; only these nodes are accepted:
numbers, strings, ``True``/``False``, names and dotted names
(``cpu.user_pct.avg``, ``finding.idle_cpu.severity``), tuples/lists of
constants (for ``in``), ``and``/``or``/``not``, comparisons (chains too),
``+ - * / %`` and unary minus, and calls of the functions in
:data:`FUNCTIONS` (min, max, abs). Anything else (attribute access on a
value, subscripts, lambdas, comprehensions, keyword arguments) is refused
when the rule is loaded, with the rule file's name, so a site's bad rule
fails ``hushmon tag`` at once rather than on the first job.

A name is looked up in the facts first, then in the parameters; a name in
neither makes the expression :class:`Missing` (the rule does not apply),
never a wrong answer."""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from hushmon.errors import HushmonError

Value = float | int | str | bool | tuple[Any, ...]

FUNCTIONS: dict[str, Callable[..., Any]] = {"min": min, "max": max, "abs": abs}
_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Mod: operator.mod,
}
_CMPOPS: dict[type, Callable[[Any, Any], bool]] = {
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}
MAX_TEXT_CHARS = 2000  # a condition longer than this is not a rule, it is a program


class Missing(Exception):
    """A name the expression needs is not known for this job."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


def dotted(node: ast.expr) -> str | None:
    """``a.b.c`` as one name; None for anything else."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


@dataclass(frozen=True)
class Expr:
    text: str
    tree: ast.expr

    def names(self) -> set[str]:
        """Every name the expression reads (for ``requires`` checks)."""
        out: set[str] = set()
        _collect(self.tree, out)
        return out

    def evaluate(self, facts: Mapping[str, Any], params: Mapping[str, Any]) -> Any:
        return _eval(self.tree, facts, params)


def parse(text: str, where: str) -> Expr:
    """Parse and check ``text``; a bad expression is one HushmonError naming ``where``."""
    if len(text) > MAX_TEXT_CHARS:
        raise HushmonError(f"{where}: expression longer than {MAX_TEXT_CHARS} characters")
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except SyntaxError as exc:
        raise HushmonError(f"{where}: cannot parse {text!r}: {exc.msg}") from None
    _check(tree, where)
    return Expr(text, tree)


def _check(node: ast.expr, where: str) -> None:
    if isinstance(node, ast.Constant):
        if not isinstance(node.value, int | float | str | bool):
            raise HushmonError(f"{where}: constant {node.value!r} is not a number or string")
        return
    if isinstance(node, ast.Name | ast.Attribute):
        if dotted(node) is None:
            raise HushmonError(f"{where}: only names and dotted names may be read")
        return
    if isinstance(node, ast.Tuple | ast.List):
        for elt in node.elts:
            if not isinstance(elt, ast.Constant):
                raise HushmonError(f"{where}: a list may hold constants only")
            _check(elt, where)
        return
    if isinstance(node, ast.BoolOp):
        for value in node.values:
            _check(value, where)
        return
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not | ast.USub):
        _check(node.operand, where)
        return
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        _check(node.left, where)
        _check(node.right, where)
        return
    if isinstance(node, ast.Compare) and all(type(op) in _CMPOPS for op in node.ops):
        _check(node.left, where)
        for comparator in node.comparators:
            _check(comparator, where)
        return
    if isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
            raise HushmonError(f"{where}: only {', '.join(FUNCTIONS)} may be called")
        if node.keywords or not node.args:
            raise HushmonError(f"{where}: {node.func.id}() takes plain arguments")
        for arg in node.args:
            _check(arg, where)
        return
    raise HushmonError(f"{where}: {type(node).__name__} is not allowed in a rule")


def _collect(node: ast.AST, out: set[str]) -> None:
    name = dotted(node) if isinstance(node, ast.expr) else None
    if name is not None:
        out.add(name)
        return
    if isinstance(node, ast.Call):
        for arg in node.args:
            _collect(arg, out)
        return
    for child in ast.iter_child_nodes(node):
        _collect(child, out)


def _eval(node: ast.expr, facts: Mapping[str, Any], params: Mapping[str, Any]) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    name = dotted(node)
    if name is not None:
        if name in facts:
            return facts[name]
        if name in params:
            return params[name]
        raise Missing(name)
    if isinstance(node, ast.Tuple | ast.List):
        return tuple(_eval(e, facts, params) for e in node.elts)
    if isinstance(node, ast.BoolOp):
        if isinstance(node.op, ast.And):
            return all(_eval(v, facts, params) for v in node.values)
        return any(_eval(v, facts, params) for v in node.values)
    if isinstance(node, ast.UnaryOp):
        operand = _eval(node.operand, facts, params)
        return (not operand) if isinstance(node.op, ast.Not) else -operand
    if isinstance(node, ast.BinOp):
        left, right = _eval(node.left, facts, params), _eval(node.right, facts, params)
        try:
            return _BINOPS[type(node.op)](left, right)
        except ZeroDivisionError:
            raise Missing("a division by zero") from None
        except TypeError:
            raise HushmonError(f"cannot compute {left!r} and {right!r}") from None
    if isinstance(node, ast.Compare):
        left = _eval(node.left, facts, params)
        for op, comp in zip(node.ops, node.comparators, strict=True):
            right = _eval(comp, facts, params)
            try:
                if not _CMPOPS[type(op)](left, right):
                    return False
            except TypeError:
                raise HushmonError(f"cannot compare {left!r} with {right!r}") from None
            left = right
        return True
    if isinstance(node, ast.Call):
        assert isinstance(node.func, ast.Name)
        return FUNCTIONS[node.func.id](*(_eval(a, facts, params) for a in node.args))
    raise HushmonError(f"{type(node).__name__} is not allowed in a rule")
