"""The library's layers point down only, and no modules import each other in a circle.

``LAYERS`` is the order, bottom first, as ``src/contrastlab/__init__.py`` states it. Each top-level
module or package of ``contrastlab`` belongs to one layer; a module may import its own package and
the packages of lower layers, never a sibling of its own layer or anything above. Imports are read
with ``ast`` from the source, function-local ones included (the library imports torch-heavy modules
lazily, inside functions, and such an import is an arrow all the same). A new module inside an
existing package is covered by its package's row; a new top-level module fails until it has one.
"""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Iterator, Mapping
from pathlib import Path

import contrastlab

SRC = Path(contrastlab.__file__).resolve().parent

#: Bottom first. Each row: the layer's name and the top-level modules/packages of ``contrastlab`` in it.
LAYERS: dict[str, tuple[str, ...]] = {
    "paths": ("paths",),
    "foundations": ("provenance", "senteval", "precision"),
    "components": ("data", "models", "losses"),
    "analysis": ("analysis",),
    "grid": ("config",),
    "search": ("search",),
    "training": ("training",),
    "evaluation": ("evaluation",),
    "tables": ("tables",),
    "cost": ("cost",),
    "figures": ("figures",),
    "report": ("report",),
    "glue": ("workflow",),
    "versioning": ("versioning",),
}

#: Arrows that point up today and are someone else's to remove, each with why and where it goes.
#: An entry that no longer matches an import fails the test, so the list only shrinks.
KNOWN_UP_ARROWS: dict[tuple[str, str], str] = {}


def module_name(path: Path, root: Path) -> str:
    """``contrastlab.evaluation.probe`` for ``<root>/evaluation/probe.py`` or ``.../probe/__init__.py``."""
    parts = [root.name, *path.relative_to(root).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules(root: Path) -> dict[str, Path]:
    """Every module of the package at ``root``, by dotted name."""
    return {module_name(p, root): p for p in sorted(root.rglob("*.py"))}


def imports(path: Path, name: str, known: set[str]) -> Iterator[str]:
    """The modules of the package that ``path`` (module ``name``) imports, anywhere in the file.

    ``from a.b import c`` names the module ``a.b.c`` when that is a module, else ``a.b``; relative
    imports are resolved against the module's package."""
    top = name.split(".")[0]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            targets = [f"{source}.{a.name}" if f"{source}.{a.name}" in known else source for a in node.names]
        else:
            continue
        for target in targets:
            if target == top or target.startswith(top + "."):
                yield target


def unit(module: str) -> str | None:
    """The top-level module or package a module belongs to (``None`` for the root package)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def import_graph(root: Path) -> dict[str, set[str]]:
    found = modules(root)
    return {name: set(imports(path, name, set(found))) - {name} for name, path in found.items()}


def layer_problems(
    root: Path, layers: Mapping[str, tuple[str, ...]], known_up: Mapping[tuple[str, str], str] = {}
) -> list[str]:
    """Every arrow that points up or sideways, every unit with no layer and every stale row."""
    rank = {member: i for i, members in enumerate(layers.values()) for member in members}
    layer_of = {member: layer for layer, members in layers.items() for member in members}
    graph = import_graph(root)
    problems = []
    units = {unit(m) for m in graph} - {None}
    for missing in sorted(units - set(rank)):
        problems.append(
            f"{root.name}/{missing} is in no layer: add {missing!r} to its layer in LAYERS "
            f"(tests/test_layers.py) and to the order in {root.name}/__init__.py's docstring"
        )
    for stale in sorted(set(rank) - units):
        problems.append(f"LAYERS names {stale!r}, which {root.name} does not have: remove it")
    used_exceptions = set()
    for source, targets in sorted(graph.items()):
        for target in sorted(targets):
            u, v = unit(source), unit(target)
            if v is None or u == v or u not in rank or v not in rank:
                continue  # the root package, its own package, or a unit already reported above
            if rank[v] < rank[u]:
                continue
            if (source, target) in known_up:
                used_exceptions.add((source, target))
                continue
            where = "above it" if rank[v] > rank[u] else "beside it (same layer)"
            problems.append(
                f"{source} ({layer_of[u]}) imports {target} ({layer_of[v]}), a layer {where}: move the "
                "imported piece down to a layer both can use, or the importer up"
            )
    for stale in sorted(set(known_up) - used_exceptions):
        problems.append(f"KNOWN_UP_ARROWS lists {stale[0]} -> {stale[1]}, which is gone: remove the entry")
    return problems


def circles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of two or more modules (Tarjan), each as a sorted list."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []

    def visit(node: str) -> None:  # the library's graph is a few hundred nodes: recursion is fine
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


# --- the library -------------------------------------------------------------------------------------


def test_every_import_points_down():
    problems = layer_problems(SRC, LAYERS, KNOWN_UP_ARROWS)
    assert not problems, "\n".join(problems)


def test_no_import_circle():
    found = circles(import_graph(SRC))
    assert not found, "import circles: " + "; ".join(" <-> ".join(group) for group in found)


def test_package_docstring_states_the_layers_in_order():
    """Each layer has one line of the docstring naming all its members; the lines come bottom first."""
    lines = (contrastlab.__doc__ or "").splitlines()
    positions = []
    for layer, members in LAYERS.items():
        hits = [i for i, line in enumerate(lines) if all(f"``{m}``" in line for m in members)]
        assert hits, f"contrastlab's docstring has no line naming layer {layer!r}: {', '.join(members)}"
        positions.append(hits[0])
    assert positions == sorted(positions), "the docstring lists the layers in another order than LAYERS"


# --- the checker itself, on small made-up packages --------------------------------------------------


def _package(tmp_path: Path, files: Mapping[str, str]) -> Path:
    root = tmp_path / "pkg"
    for rel, text in {"__init__.py": "", **files}.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


TOY_LAYERS = {"bottom": ("base",), "middle": ("left", "right"), "top": ("app",)}


def test_checker_accepts_downward_arrows(tmp_path):
    root = _package(
        tmp_path,
        {
            "base.py": "",
            "left/__init__.py": "from pkg import base\n",
            "left/inner.py": "from . import helper\nfrom ..base import x\n",
            "left/helper.py": "",
            "right.py": "import pkg.base\n",
            "app.py": "def run():\n    from pkg.left.inner import go\n    import pkg.right\n",
        },
    )
    assert layer_problems(root, TOY_LAYERS) == []
    assert circles(import_graph(root)) == []


def test_checker_reports_an_upward_arrow_even_inside_a_function(tmp_path):
    root = _package(
        tmp_path,
        {
            "base.py": "def f():\n    from pkg.app import main\n",
            "left.py": "",
            "right.py": "",
            "app.py": "",
        },
    )
    (problem,) = layer_problems(root, TOY_LAYERS)
    assert problem.startswith("pkg.base (bottom) imports pkg.app (top), a layer above it")


def test_checker_reports_a_sibling_arrow_and_a_relative_one(tmp_path):
    root = _package(
        tmp_path, {"base.py": "", "left.py": "from .right import x\n", "right.py": "", "app.py": ""}
    )
    (problem,) = layer_problems(root, TOY_LAYERS)
    assert "pkg.left (middle) imports pkg.right (middle), a layer beside it" in problem


def test_checker_reports_a_circle_within_a_package(tmp_path):
    root = _package(
        tmp_path,
        {
            "base.py": "",
            "left/__init__.py": "",
            "left/a.py": "from pkg.left import b\n",
            "left/b.py": "def g():\n    from pkg.left.c import h\n",
            "left/c.py": "import pkg.left.a\n",
            "right.py": "",
            "app.py": "",
        },
    )
    assert layer_problems(root, TOY_LAYERS) == []
    assert circles(import_graph(root)) == [["pkg.left.a", "pkg.left.b", "pkg.left.c"]]


def test_checker_names_where_to_add_a_new_top_level_module(tmp_path):
    root = _package(tmp_path, {"base.py": "", "left.py": "", "right.py": "", "app.py": "", "extra.py": ""})
    (problem,) = layer_problems(root, TOY_LAYERS)
    assert "pkg/extra is in no layer: add 'extra' to its layer in LAYERS (tests/test_layers.py)" in problem


def test_checker_reports_a_stale_exception(tmp_path):
    root = _package(tmp_path, {"base.py": "", "left.py": "", "right.py": "", "app.py": ""})
    (problem,) = layer_problems(root, TOY_LAYERS, {("pkg.base", "pkg.app"): "gone"})
    assert "KNOWN_UP_ARROWS lists pkg.base -> pkg.app, which is gone" in problem


def test_checker_reports_a_row_for_a_unit_that_does_not_exist(tmp_path):
    root = _package(tmp_path, {"base.py": "", "left.py": "", "right.py": "", "app.py": ""})
    (problem,) = layer_problems(root, {**TOY_LAYERS, "more": ("nowhere",)})
    assert "LAYERS names 'nowhere', which pkg does not have: remove it" in problem
