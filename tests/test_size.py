"""The rooms stay under their size (issue 54; house review 6, P2): no module of the library over
:data:`MAX_MODULE_LINES` lines, and the functions over :data:`LONG_FUNCTION` lines held by a ratchet,
:data:`RATCHET`, so that a room that outgrows the house's size rule fails a test by name instead of
eroding silently. When you shorten a long function, lower :data:`RATCHET` to the new count; never raise
it: split the function into named steps instead (or the module along a seam that names itself).

Both are counted as the formatter writes the code (issue 64 item 4): on a scratch copy of the library with
its ``# fmt:`` pragmas taken out and ``ruff format`` run under the project's settings, so that switching
the formatter off cannot make a module or a function shorter to count. The pragmas themselves are held
too: at most :data:`FMT_PRAGMAS` formatter pragmas and :data:`NOQA_PRAGMAS` linter pragmas (noqa) in the
library; lower them as they go, never raise them. So are the doors to the config (issue 77 item 3): the
Grid's public members (:data:`GRID_MEMBERS`) and the rules' reads of the config by key
(:data:`CONFIG_READS`): a rule asks the Grid, and a job gets its answers as params. And the house's size
(:data:`SRC_LINES`, :data:`TESTS_LINES`) and the document's floor (issue 85): no Markdown parsed back
into the report, one Markdown table writer, ``cost/`` reading no ``tables/``, no word-to-kind map in
``report/``."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from contrastlab.report.html import BADGE_COLOURS

ROOT = Path(__file__).resolve().parents[1]
LIBRARY = ROOT / "src" / "contrastlab"
#: No module of the library has more lines (style.md: "No module over ~700 lines").
MAX_MODULE_LINES = 700
#: A function longer than this, from its ``def`` to its last line, is long (about a screen).
LONG_FUNCTION = 60
#: The long functions there may be at most: 38 before issue 54, 24 after it, 23 as formatted after issue 64,
#: 21 after issues 82-86, 20 after issue 85, 15 after its fifth round of folds, 14 after its seventh (the
#: tree's count: a ratchet sits on it, not above).
RATCHET = 14
#: Formatter pragmas (fmt skip, off or on) the library may hold: 20 at house review 7, none after issue 64.
FMT_PRAGMAS = 0
#: Linter pragmas (noqa) the library may hold: 12 at issue 64, 9 after issues 82-86, 8 after issue 85, 7
#: after its fifth round of folds (the tree's count); a new one is a linter switched off.
NOQA_PRAGMAS = 7
#: Public members (methods and properties) of contrastlab.config.Grid: 38 at house review 7, 15 at review 8.
GRID_MEMBERS = 15
#: Lines of rules/*.smk and the Snakefile that read the config by key (``config[``): 17 at house review 8,
#: 3 after issue 77: the keys no Grid door answers (the backbones map, analytic_figures, paradigm_figures).
CONFIG_READS = 3
#: Lines (``wc -l``) of the library's and the suite's .py files: the house's size, a ratchet on the tree. A
#: change that adds lines folds as many elsewhere, or argues in :data:`SIZE_LEDGER`, in its own commit, why
#: the house must grow; the ledger's last line names the bounds below.
SIZE_LEDGER = ROOT / "docs" / "history" / "size.md"
SRC_LINES = 37365
TESTS_LINES = 37691
FMT_PRAGMA = re.compile(r"[ \t]*# fmt: (?:skip|off|on)\b[^\n]*")
NOQA_PRAGMA = re.compile(r"# noqa\b")


def ruff() -> Path:
    """The project's ruff (a dev dependency): beside this interpreter (the virtual environment's
    ``bin/``), else the one on the PATH."""
    beside = Path(sys.executable).parent / "ruff"
    found = beside if beside.exists() else shutil.which("ruff")
    assert found, "ruff is not installed (pip install -e '.[dev]'): the size rule counts formatted code"
    return Path(found)


def formatted_copy(dest: Path, root: Path = LIBRARY) -> Path:
    """A copy of every module under ``root`` in ``dest``, its ``# fmt:`` pragmas taken out and formatted
    by ``ruff format`` with the project's settings (pyproject.toml): the code as the formatter writes it.
    Returns ``dest``."""
    for path in sorted(root.rglob("*.py")):
        target = dest / path.relative_to(root)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(FMT_PRAGMA.sub("", path.read_text(encoding="utf-8")), encoding="utf-8")
    command = [str(ruff()), "format", "--quiet", "--no-cache", "--config", str(ROOT / "pyproject.toml")]
    subprocess.run([*command, str(dest)], check=True, capture_output=True, text=True)
    return dest


@pytest.fixture(scope="module")
def formatted(tmp_path_factory) -> Path:
    """The library as the formatter writes it (:func:`formatted_copy`), once for this module's tests."""
    return formatted_copy(tmp_path_factory.mktemp("formatted") / "contrastlab")


def lines_where(holds, paths: list[Path], root: Path) -> list[str]:
    """``"<file relative to root>:<line>"`` of every line of ``paths`` that ``holds``."""
    return [
        f"{path.relative_to(root)}:{number}"
        for path in paths
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if holds(line)
    ]


def pragmas(pattern: re.Pattern, root: Path = LIBRARY) -> list[str]:
    """``"<module>:<line>"`` of every line under ``root`` that ``pattern`` finds."""
    return lines_where(pattern.search, sorted(root.rglob("*.py")), root)


def module_lines(root: Path = LIBRARY) -> dict[str, int]:
    """{module, relative to ``root``: its number of lines}."""
    return {
        str(path.relative_to(root)): len(path.read_text(encoding="utf-8").splitlines())
        for path in sorted(root.rglob("*.py"))
    }


def test_the_house_does_not_grow():
    rooms = {"src/contrastlab": (LIBRARY, SRC_LINES), "tests": (ROOT / "tests", TESTS_LINES)}
    found = {room: sum(module_lines(root).values()) for room, (root, _) in rooms.items()}
    over = [
        f"{room}: {found[room]} lines, at most {rooms[room][1]}"
        for room in rooms
        if found[room] > rooms[room][1]
    ]
    assert not over, "the house grew; fold what repeats rather than raise the bound:\n" + "\n".join(over)


def test_the_size_ledger_argues_the_bounds():
    last = SIZE_LEDGER.read_text(encoding="utf-8").rstrip().splitlines()[-1]
    assert last == f"Now {SRC_LINES:,} / {TESTS_LINES:,}.", f"{SIZE_LEDGER.name} must end with the bounds"


def long_functions(root: Path = LIBRARY, limit: int = LONG_FUNCTION) -> list[str]:
    """Every function and method under ``root`` (nested ones too) longer than ``limit`` lines, counted from
    its ``def`` line to its last line (its decorators not counted), longest first: ``"<lines>
    <module>:<line> <name>"``."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = node.end_lineno - node.lineno + 1
                if lines > limit:
                    found.append((-lines, str(path.relative_to(root)), node.lineno, node.name))
    return [f"{-lines} {module}:{line} {name}" for lines, module, line, name in sorted(found)]


def test_no_module_is_over_the_size_rule(formatted):
    over = [f"{module}: {n}" for module, n in module_lines(formatted).items() if n > MAX_MODULE_LINES]
    assert not over, (
        f"modules over {MAX_MODULE_LINES} lines as ruff formats them; split each along a seam that names "
        "itself:\n" + "\n".join(over)
    )


def test_long_functions_do_not_grow_in_number(formatted):
    found = long_functions(formatted)
    assert len(found) <= RATCHET, (
        f"{len(found)} functions over {LONG_FUNCTION} lines as ruff formats them, the ratchet allows "
        f"{RATCHET}; split the new one(s) into named steps rather than raise it:\n" + "\n".join(found)
    )


def test_the_measure_counts_what_it_should(tmp_path):
    """A function of 61 lines counts and one of 60 does not, a method and a nested function count, a
    decorator does not; a module's lines are its lines."""

    def function(name: str, lines: int, indent: str = "") -> str:
        body = "".join(f"{indent}    x{i} = {i}\n" for i in range(lines - 2))
        return f"{indent}def {name}():\n{body}{indent}    return 0\n"

    source = (
        function("just_long", 61)
        + function("a_screen", 60)
        + "@staticmethod\n"
        + function("decorated", 60)
        + "class Room:\n"
        + function("method", 62, indent="    ")
        + "def outer():\n"
        + textwrap.indent(function("inner", 61), "    ")
        + "    return inner\n"
    )
    (tmp_path / "room").mkdir()
    (tmp_path / "room" / "module.py").write_text(source)
    found = long_functions(tmp_path)
    assert [row.split()[-1] for row in found] == ["outer", "method", "just_long", "inner"]
    assert found[2] == "61 room/module.py:1 just_long"
    assert module_lines(tmp_path) == {"room/module.py": len(source.splitlines())}


def test_the_formatter_is_not_switched_off_to_meet_a_count():
    found = pragmas(FMT_PRAGMA)
    assert len(found) <= FMT_PRAGMAS, (
        f"{len(found)} '# fmt:' pragmas in the library, at most {FMT_PRAGMAS}; let ruff format the code and "
        "split what grows too long:\n" + "\n".join(found)
    )


def test_no_new_noqa():
    found = pragmas(NOQA_PRAGMA)
    assert len(found) <= NOQA_PRAGMAS, (
        f"{len(found)} '# noqa' comments in the library, at most {NOQA_PRAGMAS}; fix what the linter "
        "finds instead:\n" + "\n".join(found)
    )


def test_the_formatted_copy_counts_what_the_formatter_writes(tmp_path):
    """A call packed by hand on two lines behind ``# fmt: skip`` counts as the lines ruff writes for it
    (one argument a line, 13 lines in all), and ``pragmas`` finds the pragma where it stands."""
    arguments = ", ".join(f"argument_{i}" for i in range(10))
    packed = f"def packed():\n    return call(\n        {arguments},\n    )  # fmt: skip\n"
    (tmp_path / "library" / "room").mkdir(parents=True)
    (tmp_path / "library" / "room" / "module.py").write_text(packed)
    formatted = formatted_copy(tmp_path / "formatted", tmp_path / "library")
    assert module_lines(tmp_path / "library") == {"room/module.py": 4}
    assert module_lines(formatted) == {"room/module.py": 13}
    assert "# fmt" not in (formatted / "room" / "module.py").read_text()
    assert pragmas(FMT_PRAGMA, tmp_path / "library") == ["room/module.py:4"]
    assert pragmas(FMT_PRAGMA, formatted) == []


def public_members(path: Path, name: str) -> list[str]:
    """The public methods and properties (``def``s not starting with ``_``) of class ``name`` in ``path``."""
    found = [n for n in ast.parse(path.read_text(encoding="utf-8")).body if isinstance(n, ast.ClassDef)]
    (cls,) = [c for c in found if c.name == name]
    return [f.name for f in cls.body if isinstance(f, ast.FunctionDef) and not f.name.startswith("_")]


def config_reads(root: Path = ROOT) -> list[str]:
    """``"<file>:<line>"`` of every line of ``rules/*.smk`` and the Snakefile that holds ``config[``."""
    files = [*sorted((root / "rules").glob("*.smk")), root / "Snakefile"]
    return lines_where(lambda line: "config[" in line, files, root)


def test_the_grid_grows_no_new_door():
    members = public_members(LIBRARY / "config" / "grid.py", "Grid")
    assert len(members) <= GRID_MEMBERS, (
        f"Grid has {len(members)} public members, at most {GRID_MEMBERS}: answer a new question on the "
        "view it belongs to (grid.experiment(name), grid.data, grid.options):\n" + "\n".join(members)
    )
    # the measure: a classmethod counts, a property too, a private helper not
    assert public_members(LIBRARY / "config" / "grid.py", "Options") == ["of"]
    assert "digest" in members and "_resolve" not in members


def test_the_rules_ask_the_grid_not_the_config(tmp_path):
    found = config_reads()
    assert len(found) <= CONFIG_READS, (
        f"{len(found)} lines of the rules read config[...], at most {CONFIG_READS}: ask GRID (its "
        "experiment, options, data, backbone) and hand the job the answer as a param:\n" + "\n".join(found)
    )
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "a.smk").write_text('x = GRID.options.mteb\ny = config["mteb"]["data"]\n')
    (tmp_path / "Snakefile").write_text('if config["searches"]:\n    pass\n')
    assert config_reads(tmp_path) == ["rules/a.smk:2", "Snakefile:1"]


# One document model on the ground floor (issue 85 item 1): every page is built as blocks
# (contrastlab.blocks) and rendered once; nothing reaches the report as Markdown to be parsed back.
def _modules(room: str = "") -> dict[str, ast.Module]:
    """Every module under ``src/contrastlab/<room>``, parsed, by its path relative to the library."""
    return {
        str(path.relative_to(LIBRARY)): ast.parse(path.read_text(encoding="utf-8"))
        for path in sorted((LIBRARY / room).rglob("*.py"))
    }


def _imported(tree: ast.Module) -> set[str]:
    """The modules and names a module imports, function-local imports included (``a.b`` and ``a.b.c``
    for ``from a.b import c``)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found |= {node.module, *(f"{node.module}.{alias.name}" for alias in node.names)}
    return found


def _importers(room: str, imports) -> list[str]:
    """The modules under ``src/contrastlab/<room>`` that import a name for which ``imports`` holds."""
    return [path for path, tree in _modules(room).items() if any(map(imports, _imported(tree)))]


def test_no_markdown_is_parsed_back_into_the_report():
    """``blocks_of`` read the cost, search, bridge and comparison sections' Markdown back (4 calls)."""
    calls = [
        path
        for path, tree in _modules("report").items()
        for node in ast.walk(tree)
        if isinstance(node, ast.Name | ast.Attribute)
        and (node.id if isinstance(node, ast.Name) else node.attr) == "blocks_of"
    ]
    assert calls == []


def test_one_markdown_table_writer():
    """``tables/markdown.markdown_table`` wrote a second kind of table beside the blocks' (7 importers)."""
    assert not _importers(
        "", lambda name: name.endswith("markdown_table") or name == "contrastlab.tables.markdown"
    )


def test_cost_reads_no_tables():
    """``cost/`` stands beside ``tables/``, not above it: the plan's paper facts come from
    :mod:`contrastlab.papers` (3 modules imported ``tables/``)."""
    assert not _importers("cost", lambda name: f"{name}.".startswith("contrastlab.tables."))


def test_no_map_in_the_report_turns_a_word_back_into_a_verdict_kind():
    """A dict of two or more entries whose values are all badge kinds (``SEARCH_KINDS``,
    ``MARKER_KINDS``) maps words the page shows back to the kind they were decided as."""
    kinds = set(BADGE_COLOURS)
    maps = [
        f"{path}:{node.lineno}"
        for path, tree in _modules("report").items()
        for node in ast.walk(tree)
        if isinstance(node, ast.Dict)
        and len(node.values) >= 2
        and all(isinstance(v, ast.Constant) and v.value in kinds for v in node.values)
    ]
    assert maps == []
