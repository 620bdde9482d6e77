"""The docs name only commands, options and files that exist (issue 24).

What is read: README.md and docs/*.md, in fenced code blocks (every line)
and inline code spans (```...```). What is checked:

- Commands. A token whose last path part is ``hushmon`` or one of the C
  programs (the ``hushmon-*`` targets of the CMake files) starts an
  invocation: ``.venv/bin/hushmon digest``, ``build/bin/hushmon-agent``,
  ``mpirun -np 4 build/bin/hushmon-bench``. For ``hushmon``, the words that
  follow must be its subcommands down the argparse tree (``noise detect``,
  ``ctl set``) until the first option, value or placeholder (``JOB``,
  ``<x>``, ``[...]``).
- Options. Every ``--long`` option in an invocation must be one the program
  (or the subcommand reached) declares: for ``hushmon``, its argparse
  parsers (``hushmon.cli.build_parser``); for a C program, the option rows
  and usage lines of the built binary's own ``--help``. The invocation ends
  at a shell separator (``|``, ``&&``, ``;``), a comment (``#``), or ``--``:
  what follows ``hushmon run --`` is another program's command line.
- Paths. A markdown link's relative target (from the page's folder), and a
  code token that starts with a top-level entry of the repository
  (``c/agent/config.c``, ``tests/python/test_x.py::name``) must exist; a
  shorter code path with a file extension (``digest/binned.py``) must be
  the end of some file's path in the tree.

Not checked, on purpose: options of other programs (mpirun, srun, sacct,
nats-server, bench scripts, the test apps...), options written alone in
prose without a program before them in the same span or line (``--json``:
whose?), short options (``-np``), build outputs (``build/``, ``.venv/``),
absolute and placeholder paths (``/etc/hushmon``, ``<data>/run``), globs
only where they match nothing.
"""

from __future__ import annotations

import argparse
import re
import subprocess
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from hushmon.cli import build_parser
from hushmon.paths import REPO_ROOT

FENCE = re.compile(r"^\s*(```|~~~)")
INLINE = re.compile(r"(`+)(.+?)\1")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
# A quoted string is one token and never a command (it is an argument).
TOKEN = re.compile(r"""'[^']*'|"[^"]*"|\S+""")
SEPARATORS = {"|", "||", "&&", ";", "&", "--", ">", ">>", "2>", "2>&1", "<"}
LONG_OPTION = re.compile(r"--[a-z0-9][a-z0-9-]*")
# The option column of a C program's --help: an option at the start of a line
# (after at most a short option), or anywhere on its usage lines.
HELP_ROW = re.compile(r"^\s{0,6}(?:-[A-Za-z0-9],\s+)?(--[a-z0-9][a-z0-9-]*)")
BUILD_OUTPUTS = {"build", "build-asan", "build-mpich", ".venv", ".git"}
# Named in the docs, rightly not in the tree, each with where it lives.
NOT_IN_TREE: Mapping[str, str] = {
    "include/hushmon.h": "installed under PREFIX by `make install` (docs/libhushmon.md)",
}
FILE_SUFFIX = re.compile(r"\.(py|c|h|md|toml|sh|json|conf|txt|service|timer|yml|yaml|def|in)$")


@dataclass(frozen=True)
class Snippet:
    doc: Path
    line: int
    text: str

    def where(self) -> str:
        return f"{_shown(self.doc)}:{self.line}"


def _shown(doc: Path) -> str:
    return str(doc.relative_to(REPO_ROOT)) if doc.is_relative_to(REPO_ROOT) else doc.name


@dataclass
class Invocation:
    snippet: Snippet
    program: str
    words: list[str] = field(default_factory=list)


def doc_files(root: Path = REPO_ROOT) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def snippets(doc: Path, text: str | None = None) -> Iterator[Snippet]:
    """Every line of a fenced block and every inline code span."""
    in_block = False
    for number, line in enumerate((doc.read_text() if text is None else text).splitlines(), 1):
        if FENCE.match(line):
            in_block = not in_block
            continue
        if in_block:
            yield Snippet(doc, number, line)
        else:
            for m in INLINE.finditer(line):
                yield Snippet(doc, number, m.group(2).strip())


def c_programs(root: Path = REPO_ROOT) -> set[str]:
    """The hushmon-* executables the CMake files build."""
    names: set[str] = set()
    for cmake in root.glob("c/**/CMakeLists.txt"):
        names.update(re.findall(r"add_executable\((hushmon-[\w-]+)", cmake.read_text()))
    return names


def invocations(snippet: Snippet, programs: set[str]) -> list[Invocation]:
    found: list[Invocation] = []
    current: Invocation | None = None
    for token in TOKEN.findall(snippet.text):
        if token.startswith("#"):
            break
        if token in SEPARATORS or token.endswith(";"):
            current = None
            continue
        quoted = token[0] in "'\""
        # `hushmon: warning: ...` is a message of the program, not a command
        name = token.rstrip(",.;)").rsplit("/", 1)[-1]
        if not quoted and name in programs:
            current = Invocation(snippet, name)
            found.append(current)
        elif current is not None:
            current.words.append(token)
    return found


def options_named(words: list[str]) -> list[str]:
    """The --long options among an invocation's words (``--a=1`` -> --a;
    ``[--a]``, ``--a/--b``, ``--a|--b`` -> each)."""
    out = []
    for word in words:
        if word[0] in "'\"":
            continue
        for part in re.split(r"[/|]", word.strip("[](){},.;:`")):
            m = LONG_OPTION.match(part)
            if m and (part == m.group(0) or part[len(m.group(0))] in "=]),"):
                out.append(m.group(0))
    return out


def is_placeholder(word: str) -> bool:
    bare = word.strip("[](){},.`")
    return not bare or bare[0] in "<[{$'\"" or "..." in word or bare.upper() == bare


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def check_hushmon(inv: Invocation, root: argparse.ArgumentParser) -> list[str]:
    """Walks the subcommand words, then checks every option against the
    parser reached (and the ones above it: ``hushmon --version``)."""
    path = ["hushmon"]
    parsers = [root]
    rest = list(inv.words)
    while rest:
        word = rest[0]
        if word.startswith("-"):
            break
        choices = _subparsers(parsers[-1])
        if not choices:
            break
        bare = word.rstrip(",.;:)'`")
        if bare in choices:
            parsers.append(choices[bare])
            path.append(bare)
            rest.pop(0)
            continue
        if is_placeholder(word):
            return []  # `hushmon COMMAND ...`: nothing to check beyond it
        return [f"{inv.snippet.where()}: '{' '.join(path)} {bare}': no such command"]
    known = {s for p in parsers for s in p._option_string_actions}
    return [
        f"{inv.snippet.where()}: '{' '.join(path)}' has no option {option}"
        for option in options_named(rest)
        if option not in known
    ]


def help_options(help_text: str) -> set[str]:
    options: set[str] = set()
    for line in help_text.splitlines():
        if "usage:" in line or line.lstrip().startswith("hushmon-"):
            options.update(LONG_OPTION.findall(line))
        m = HELP_ROW.match(line)
        if m:
            options.add(m.group(1))
    return options


def check_c_program(inv: Invocation, known: Mapping[str, set[str] | str]) -> list[str]:
    options = known[inv.program]
    if isinstance(options, str):  # its --help failed: say so wherever an option is named
        named = options_named(inv.words)
        return [f"{inv.snippet.where()}: {inv.program} {named[0]}: {options}"] if named else []
    return [
        f"{inv.snippet.where()}: {inv.program} has no option {option} (not in its --help)"
        for option in options_named(inv.words)
        if option not in options
    ]


def c_help(bin_dir: Path, programs: set[str]) -> dict[str, set[str] | str]:
    known: dict[str, set[str] | str] = {}
    for name in sorted(programs):
        exe = bin_dir / name
        if not exe.exists():
            known[name] = f"{exe} is not built"
            continue
        proc = subprocess.run(
            [str(exe), "--help"], capture_output=True, text=True, timeout=30, check=False
        )
        if proc.returncode != 0:
            known[name] = f"'{name} --help' exited {proc.returncode}: its options cannot be checked"
        else:
            known[name] = help_options(proc.stdout + proc.stderr)
    return known


def command_problems(
    docs: list[Path], parser: argparse.ArgumentParser, known: Mapping[str, set[str] | str]
) -> list[str]:
    problems: list[str] = []
    programs = {"hushmon", *known}
    for doc in docs:
        for snippet in snippets(doc):
            for inv in invocations(snippet, programs):
                if inv.program == "hushmon":
                    problems += check_hushmon(inv, parser)
                else:
                    problems += check_c_program(inv, known)
    return problems


def tree_files(root: Path = REPO_ROOT) -> list[str]:
    """Every file of the tree as a /-path from the root, build outputs aside."""
    out = []
    for path in root.rglob("*"):
        rel = path.relative_to(root)
        if rel.parts[0] in BUILD_OUTPUTS or "__pycache__" in rel.parts or not path.is_file():
            continue
        out.append(rel.as_posix())
    return out


def path_problems(docs: list[Path], root: Path = REPO_ROOT) -> list[str]:
    top = {p.name for p in root.iterdir()} - BUILD_OUTPUTS
    files = tree_files(root)
    suffixes = {"/" + f for f in files}
    problems = []

    def exists(base: Path, rel: str) -> bool:
        if any(c in rel for c in "*?["):
            return any(base.glob(rel))
        return (base / rel).exists()

    for doc in docs:
        for number, line in enumerate(doc.read_text().splitlines(), 1):
            for m in LINK.finditer(line):
                target = m.group(1).split("#", 1)[0]
                if not target or re.match(r"^[a-z]+:", target):
                    continue
                if not (doc.parent / target).exists():
                    problems.append(f"{_shown(doc)}:{number}: link to {target}: missing")
        for snippet in snippets(doc):
            for token in TOKEN.findall(snippet.text):
                for word in token.strip("'\"").split():
                    word = word.strip("`,;:.()[]'\"")
                    word = re.sub(r"(::.*|:\d+(-\d+)?)$", "", word)
                    if "/" not in word or any(c in word for c in "<>{}$~=@%"):
                        continue
                    first = word.split("/", 1)[0]
                    if first in top:
                        if not exists(root, word):
                            problems.append(f"{snippet.where()}: {word}: no such file or folder")
                    elif (
                        FILE_SUFFIX.search(word)
                        and not word.startswith(("/", "."))
                        and first not in BUILD_OUTPUTS
                        and not first.isupper()
                        and word not in NOT_IN_TREE
                        and not any(s.endswith("/" + word) for s in suffixes)
                    ):
                        problems.append(f"{snippet.where()}: {word}: no file of the tree ends so")
    return problems


@pytest.fixture(scope="module")
def parser() -> argparse.ArgumentParser:
    return build_parser()


@pytest.fixture(scope="module")
def c_options(bin_dir: Path) -> dict[str, set[str] | str]:
    return c_help(bin_dir, c_programs())


def test_every_command_and_option_in_the_docs_exists(
    parser: argparse.ArgumentParser, c_options: dict[str, set[str] | str]
) -> None:
    problems = command_problems(doc_files(), parser, c_options)
    assert not problems, "the docs name what the programs do not have:\n" + "\n".join(problems)


def test_every_path_in_the_docs_exists() -> None:
    problems = path_problems(doc_files())
    assert not problems, "the docs name paths the tree does not have:\n" + "\n".join(problems)


def test_the_docs_name_many_commands(c_options: dict[str, set[str] | str]) -> None:
    """Guards the extraction: if the patterns stopped matching, the checks
    above would pass on nothing."""
    programs = {"hushmon", *c_options}
    found = [inv for doc in doc_files() for s in snippets(doc) for inv in invocations(s, programs)]
    named = {inv.program for inv in found}
    assert len(found) > 200 and {"hushmon", "hushmon-agent", "hushmon-bench"} <= named
    assert sum(len(options_named(inv.words)) for inv in found) > 200


def test_a_wrong_doc_fails(
    tmp_path: Path, parser: argparse.ArgumentParser, c_options: dict[str, set[str] | str]
) -> None:
    """A doc naming an option no program has, a command that does not
    exist and a missing file is caught, line by line; another program's
    options (mpirun's, a job's after `--`) are not."""
    doc = tmp_path / "wrong.md"
    doc.write_text(
        "```\n"
        "hushmon digest JOB --from-summaries --no-such-option\n"
        "mpirun -np 4 --oversubscribe build/bin/hushmon-bench --op bcast --no-such-flag\n"
        "hushmon run --json - -- mpirun --mca btl self build/bin/butterfly --cycles 3\n"
        "```\n"
        "Use `hushmon ctl set --job 7 --period-sec 1` or `hushmon frobnicate`,\n"
        "see `c/agent/no_such_file.c` and [x](no_such_page.md).\n"
    )
    problems = command_problems([doc], parser, c_options)
    assert problems == [
        "wrong.md:2: 'hushmon digest' has no option --no-such-option",
        "wrong.md:3: hushmon-bench has no option --no-such-flag (not in its --help)",
        "wrong.md:6: 'hushmon ctl set' has no option --period-sec",
        "wrong.md:6: 'hushmon frobnicate': no such command",
    ], problems
    paths = path_problems([doc], root=REPO_ROOT)
    assert any("c/agent/no_such_file.c: no such file" in p for p in paths), paths
    assert any("link to no_such_page.md: missing" in p for p in paths), paths


def test_an_option_removed_from_a_program_fails(parser: argparse.ArgumentParser) -> None:
    """The real docs against a program that lost an option: `hushmon
    digest --from-summaries` is named in docs/digest.md and README.md."""
    digest = _subparsers(parser)["digest"]
    action = digest._option_string_actions.pop("--from-summaries")
    try:
        problems = command_problems(doc_files(), parser, {})
    finally:
        digest._option_string_actions["--from-summaries"] = action
    assert any("'hushmon digest' has no option --from-summaries" in p for p in problems)
