"""The structure of ``python/hushmon`` drawn from its imports (issue 24).

Every ``import`` and ``from ... import`` in every module is an arrow, at
the top of the file or inside a function (an import inside a function
still makes the importer depend on the imported; hiding one there is how a
circle survives), under ``if TYPE_CHECKING`` too. Two graphs are checked:
modules (``hushmon.digest.jobdata``), and packages (``hushmon.digest``; a
module directly under ``hushmon`` is its own node). Neither may have a
circle, and these arrows may not exist at all:

- ``run`` -> ``testbed``: a monitored run uses a cluster through
  ``hushmon.run.monitor.ClusterFinder``, handed to it by ``hushmon.runcmd``;
- ``testbed`` -> ``run``, ``transport`` -> ``run``: the agent's control
  socket client is ``hushmon.agentclient``, below all three.

Names given to ``importlib`` as strings (the command table) are not arrows.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE_ROOT = Path(__file__).resolve().parents[2] / "python" / "hushmon"

# (importer's package, imported package, why it may not be).
FORBIDDEN: tuple[tuple[str, str, str], ...] = (
    ("hushmon.run", "hushmon.testbed", "run uses clusters through run.monitor.ClusterFinder"),
    ("hushmon.testbed", "hushmon.run", "the agent client is hushmon.agentclient"),
    ("hushmon.transport", "hushmon.run", "the agent client is hushmon.agentclient"),
)


@dataclass(frozen=True)
class Arrow:
    source: str  # importing module
    target: str  # imported module (or package, for an `__init__`)
    line: int

    def __str__(self) -> str:
        return f"{self.source} -> {self.target} (line {self.line})"


def modules_of(root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every .py under ``root`` (a package)."""
    base = root.parent
    out: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(base).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _resolve(name: str, modules: Mapping[str, Path]) -> str | None:
    """The longest known module a dotted name starts with."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def arrows_of(module: str, path: Path, modules: Mapping[str, Path]) -> list[Arrow]:
    top = next(iter(modules)).split(".")[0]
    is_package = path.name == "__init__.py"
    package = module if is_package else module.rpartition(".")[0]
    found: list[Arrow] = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            # `from pkg import mod` names the module; `from mod import name` the module
            names = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                for alias in node.names
            ]
        for name in names:
            if name != top and not name.startswith(top + "."):
                continue
            target = _resolve(name, modules)
            if target is not None and target != module:
                found.append(Arrow(module, target, getattr(node, "lineno", 0)))
    return found


def import_graph(root: Path) -> list[Arrow]:
    modules = modules_of(root)
    return [a for m, p in modules.items() for a in arrows_of(m, p, modules)]


def package_of(module: str) -> str:
    """``hushmon.digest.factors.base`` -> ``hushmon.digest``; ``hushmon.errors`` stays."""
    return ".".join(module.split(".")[:2])


def cycles(edges: Iterable[tuple[str, str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan),
    each sorted, as circles."""
    graph: dict[str, set[str]] = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
        graph.setdefault(b, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        # iterative, so that a deep chain cannot hit the recursion limit
        work = [(v, iter(sorted(graph[v])))]
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.append(w)
                    if w == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def describe_cycle(component: list[str], arrows: list[Arrow], key: str = "module") -> str:
    """The arrows that make a circle, for the failure message."""
    members = set(component)
    inside = [
        str(a)
        for a in arrows
        if (a.source if key == "module" else package_of(a.source)) in members
        and (a.target if key == "module" else package_of(a.target)) in members
        and (key == "module" or package_of(a.source) != package_of(a.target))
    ]
    return f"circle {' <-> '.join(component)}:\n    " + "\n    ".join(sorted(inside))


def module_cycle_problems(arrows: list[Arrow]) -> list[str]:
    return [describe_cycle(c, arrows) for c in cycles((a.source, a.target) for a in arrows)]


def package_cycle_problems(arrows: list[Arrow]) -> list[str]:
    edges = {
        (package_of(a.source), package_of(a.target))
        for a in arrows
        if package_of(a.source) != package_of(a.target)
    }
    return [describe_cycle(c, arrows, key="package") for c in cycles(edges)]


def forbidden_problems(arrows: list[Arrow]) -> list[str]:
    problems = []
    for a in arrows:
        for source, target, why in FORBIDDEN:
            if package_of(a.source) == source and package_of(a.target) == target:
                problems.append(f"forbidden arrow {source} -> {target}: {a} ({why})")
    return problems


@pytest.fixture(scope="module")
def hushmon_arrows() -> list[Arrow]:
    return import_graph(PACKAGE_ROOT)


def test_the_graph_is_drawn_from_every_kind_of_import(hushmon_arrows: list[Arrow]) -> None:
    """Guards the parser: a top-level import, a function-level one and a
    package's submodule named by `from pkg import mod` are all arrows."""
    pairs = {(a.source, a.target) for a in hushmon_arrows}
    assert ("hushmon.cli", "hushmon.commands") in pairs  # module level
    assert ("hushmon.runcmd.cli", "hushmon.testbed.runmonitor") in pairs  # inside a function
    assert ("hushmon.digest.jobdata", "hushmon.digest.resolution") in pairs  # from pkg import mod


def test_no_module_imports_itself_back(hushmon_arrows: list[Arrow]) -> None:
    problems = module_cycle_problems(hushmon_arrows)
    assert not problems, "modules in a circle of imports:\n" + "\n".join(problems)


def test_no_package_imports_itself_back(hushmon_arrows: list[Arrow]) -> None:
    problems = package_cycle_problems(hushmon_arrows)
    assert not problems, "packages in a circle of imports:\n" + "\n".join(problems)


def test_no_forbidden_arrow(hushmon_arrows: list[Arrow]) -> None:
    problems = forbidden_problems(hushmon_arrows)
    assert not problems, "\n".join(problems)


def _tree(root: Path, files: Mapping[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "hushmon"


def test_the_checks_catch_what_they_are_for(tmp_path: Path) -> None:
    """A tree with each fault the checks exist for: a circle of modules
    closed inside a function, a relative import, and run -> testbed."""
    root = _tree(
        tmp_path,
        {
            "hushmon/__init__.py": "",
            "hushmon/run/__init__.py": "",
            "hushmon/run/session.py": (
                "from hushmon.run.agent import X\n"
                "def monitor():\n    from hushmon.testbed.state import load\n"
            ),
            "hushmon/run/agent.py": "def f():\n    from .session import monitor\nX = 1\n",
            "hushmon/testbed/__init__.py": "",
            "hushmon/testbed/state.py": "from hushmon.run import agent\n",
        },
    )
    arrows = import_graph(root)
    modules = module_cycle_problems(arrows)
    assert len(modules) == 1 and "hushmon.run.agent <-> hushmon.run.session" in modules[0]
    packages = package_cycle_problems(arrows)
    assert len(packages) == 1 and "hushmon.run <-> hushmon.testbed" in packages[0]
    forbidden = forbidden_problems(arrows)
    assert any(
        "hushmon.run -> hushmon.testbed: hushmon.run.session -> hushmon.testbed.state (line 3)" in p
        for p in forbidden
    ), forbidden
    assert any("hushmon.testbed -> hushmon.run" in p for p in forbidden), forbidden
