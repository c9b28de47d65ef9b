"""Which reliability-review case each fault test injects: the case id ends the marker's first argument,
``@pytest.mark.fault("a symlinked results folder while a run is live (C3)", ...)``. `make faults` prints
each case with its tests after the fault table, and ``tests/test_fault_cases.py`` holds that every case
reliability review 9 found not to hold has one."""

from __future__ import annotations

import ast
import re
from pathlib import Path

#: Reliability review 8 (at bf5710a): the cases that did not hold, each by its id in the review (review 9
#: found all but G15 good; their fault tests stay and keep them so).
RELIABILITY_8_NOT_HELD = "G15 C1 C2 C3 C4 C5 W3 W6 L2 M4 M5 M6 M7 F1 F4".split()
#: Reliability review 9 (at b1650d2): G15, still open, and the new cases whose verdict was not "good".
RELIABILITY_9_NOT_HELD = "G15 R3 R4 V3 E1 E3 B3 Q2 I1 I2 H1 H2 H3 H5 U1 J1".split()

CASE_ID = re.compile(r"\(([A-Z]\d{1,2})\)\s*$")


def case_of(name: str) -> str | None:
    """The review's case id a fault's description ends with (``"... (C3)"`` -> ``"C3"``), else None."""
    found = CASE_ID.search(name)
    return found[1] if found else None


def _literal_text(node: ast.expr) -> str:
    """A marker argument's text: a string, or an f-string's literal parts (its fields left empty)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(part.value for part in node.values if isinstance(part, ast.Constant))
    return ""


def cases_in_tests(tests_dir: Path) -> dict[str, list[str]]:
    """{case id: ["<test file>::<function>", ...]} of every fault marker in the test modules under
    ``tests_dir``, read from their source (no collection, no run)."""
    found: dict[str, list[str]] = {}
    for path in sorted(tests_dir.rglob("test_*.py")):
        module = path.relative_to(tests_dir.parent)
        for node in ast.parse(path.read_text(), filename=str(path)).body:
            # a marker outside any test (a module-level list of pytest.param) is named by its module
            where = (
                f"{module}::{node.name}" if isinstance(node, ast.FunctionDef | ast.ClassDef) else str(module)
            )
            for call in (n for n in ast.walk(node) if isinstance(n, ast.Call)):
                if isinstance(call.func, ast.Attribute) and call.func.attr == "fault" and call.args:
                    case = case_of(_literal_text(call.args[0]))
                    if case and where not in found.get(case, []):
                        found.setdefault(case, []).append(where)
    return found
