"""One document model on the ground floor: every page is built as blocks and rendered once. Four counts
read from the library's source hold it: Markdown parsed back into blocks in ``report/``, importers of a
second Markdown-table writer, ``cost/`` modules importing ``tables/``, word-to-kind maps in ``report/``."""

from __future__ import annotations

import ast
from pathlib import Path

from contrastlab.report.html import BADGE_COLOURS

LIBRARY = Path(__file__).resolve().parents[1] / "src" / "contrastlab"


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
    importers = [
        path
        for path, tree in _modules().items()
        if any(
            name.endswith("markdown_table") or name == "contrastlab.tables.markdown"
            for name in _imported(tree)
        )
    ]
    assert importers == []


def test_cost_reads_no_tables():
    """``cost/`` stands beside ``tables/``, not above it: the plan's paper facts come from
    :mod:`contrastlab.papers` (3 modules imported ``tables/``)."""
    importers = [
        path
        for path, tree in _modules("cost").items()
        if any(
            name == "contrastlab.tables" or name.startswith("contrastlab.tables.") for name in _imported(tree)
        )
    ]
    assert importers == []


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
