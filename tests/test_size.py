"""The rooms stay under their size (issue 54; house review 6, P2): no module of the library over
:data:`MAX_MODULE_LINES` lines, and the functions over :data:`LONG_FUNCTION` lines held by a ratchet,
:data:`RATCHET`, so that a room that outgrows the house's size rule fails a test by name instead of
eroding silently. When you shorten a long function, lower :data:`RATCHET` to the new count; never raise
it: split the function into named steps instead (or the module along a seam that names itself)."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIBRARY = ROOT / "src" / "contrastlab"
#: No module of the library has more lines (style.md: "No module over ~700 lines").
MAX_MODULE_LINES = 700
#: A function longer than this, from its ``def`` to its last line, is long (about a screen).
LONG_FUNCTION = 60
#: The long functions there may be at most: 38 before issue 54, 24 after it.
RATCHET = 24


def module_lines(root: Path = LIBRARY) -> dict[str, int]:
    """{module, relative to ``root``: its number of lines}."""
    return {
        str(path.relative_to(root)): len(path.read_text(encoding="utf-8").splitlines())
        for path in sorted(root.rglob("*.py"))
    }


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


def test_no_module_is_over_the_size_rule():
    over = [f"{module}: {n}" for module, n in module_lines().items() if n > MAX_MODULE_LINES]
    assert not over, (
        f"modules over {MAX_MODULE_LINES} lines; split each along a seam that names itself:\n"
        + "\n".join(over)
    )


def test_long_functions_do_not_grow_in_number():
    found = long_functions()
    assert len(found) <= RATCHET, (
        f"{len(found)} functions over {LONG_FUNCTION} lines, the ratchet allows {RATCHET}; split the new "
        "one(s) into named steps rather than raise it:\n" + "\n".join(found)
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
