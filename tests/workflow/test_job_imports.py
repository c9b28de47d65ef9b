"""What a cold job's fresh interpreter imports before it does any work (a cluster run starts hundreds):
each ``scripts/*.py`` entry point's module-level imports are held to the heavy packages it needs."""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest

from contrastlab.paths import REPO_ROOT

HEAVY = ("torch", "transformers", "scipy", "sklearn", "pandas", "matplotlib", "mteb")

#: script -> the heavy packages its imports may load (the rest of HEAVY must stay out)
ALLOWED = {
    "encode.py": {"torch"},  # transformers too, but only when the model loads (models.text)
    "encode_vision.py": {"torch"},
    "evaluate_vision.py": {"torch"},
    "train_vision.py": {"torch"},
    "publish.py": set(),  # make publish, make cards: the parameter counts come from the safetensors headers
    "tables.py": set(),
    "figure_analytic.py": set(),
    "prepare_corpus.py": set(),
    "prepare_senteval.py": set(),
    "search_select.py": set(),
}


def imported_heavy(script: str) -> set[str]:
    """The packages of :data:`HEAVY` that the module-level imports of ``scripts/<script>`` load."""
    tree = ast.parse((REPO_ROOT / "scripts" / script).read_text())
    imports = [ast.unparse(node) for node in tree.body if isinstance(node, ast.Import | ast.ImportFrom)]
    probe = "\n".join([*imports, "import sys", f"print(' '.join(m for m in {HEAVY!r} if m in sys.modules))"])
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    return set(done.stdout.split())


@pytest.mark.parametrize("script", sorted(ALLOWED))
def test_a_job_imports_only_the_heavy_packages_it_uses(script):
    assert imported_heavy(script) <= ALLOWED[script]


def test_the_check_sees_a_heavy_import():
    """The probe is not blind: a figure job's entry does load matplotlib."""
    assert "matplotlib" in imported_heavy("figure_lr_sweep.py")
