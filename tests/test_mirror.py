"""The tests mirror the rooms: the test of ``src/contrastlab/<room>/<module>.py`` is
``tests/<room>/test_<module>.py`` (a top-level module's: ``tests/test_<module>.py``; a package's
``__init__.py`` that holds code of its own: ``tests/<room>/test_<room>.py``), so that whoever changes a
module finds its tests without searching. Most modules have one; this keeps it so."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIBRARY = ROOT / "src" / "contrastlab"
TESTS = ROOT / "tests"
#: The share of library modules with a test at the mirrored path (lightly's: 61%).
AT_LEAST = 0.60


def _has_code(init: Path) -> bool:
    """A package ``__init__.py`` with a function or class of its own (not only imports and a docstring)."""
    body = ast.parse(init.read_text()).body
    return any(isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) for node in body)


def mirrored_paths() -> dict[str, Path]:
    """{library module, relative to src/contrastlab: the path of its mirrored test module}."""
    found = {}
    for module in sorted(LIBRARY.rglob("*.py")):
        relative = module.relative_to(LIBRARY)
        if module.name == "__init__.py":
            if relative.parent == Path(".") or not _has_code(module):
                continue  # the package's own docstring, or a room's re-exports
            found[str(relative)] = TESTS / relative.parent / f"test_{relative.parent.name}.py"
        else:
            found[str(relative)] = TESTS / relative.parent / f"test_{module.stem}.py"
    return found


def test_most_library_modules_have_a_test_at_the_mirrored_path():
    paths = mirrored_paths()
    missing = [
        f"{module} -> {test.relative_to(ROOT)}" for module, test in paths.items() if not test.is_file()
    ]
    share = 1 - len(missing) / len(paths)
    assert share >= AT_LEAST, (
        f"{len(paths) - len(missing)} of {len(paths)} library modules ({share:.0%}) have a test at the "
        f"mirrored path, fewer than {AT_LEAST:.0%}; without one:\n" + "\n".join(missing)
    )


def test_the_mirror_finds_what_it_should():
    paths = mirrored_paths()
    assert paths["precision.py"] == TESTS / "test_precision.py"
    assert paths["workflow/gpus.py"] == TESTS / "workflow" / "test_gpus.py"
    assert paths["config/__init__.py"] == TESTS / "config" / "test_config.py"  # code of its own
    assert "models/__init__.py" not in paths and "__init__.py" not in paths  # re-exports, docstring
