"""The library's layers (pyproject.toml's ``[tool.importlinter]`` contracts) point down only, with no
circles; and, on a toy package, the contracts catch what they should."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from contrastlab.paths import REPO_ROOT

PYPROJECT = REPO_ROOT / "pyproject.toml"


#: ``lint-imports`` in an interpreter of its own: import-linter configures logging with dictConfig, which
#: disables every logger that exists, ours included, for the rest of a test process.
LINT = (
    "import sys; from importlinter.cli import lint_imports; "
    "sys.exit(lint_imports(config_filename=sys.argv[1], no_cache=True, no_logo=True))"
)


def lint(config: Path) -> tuple[int, str]:
    """``lint-imports`` on ``config``, run in the config's folder (a toy package there is importable)."""
    done = subprocess.run(
        [sys.executable, "-c", LINT, str(config)], capture_output=True, text=True, cwd=config.parent
    )
    return done.returncode, done.stdout + done.stderr


def test_the_import_contracts_are_kept():
    code, out = lint(PYPROJECT)
    assert code == 0, out


# --- the contracts catch what they should: a package of our own ---------------------------------------
CONTRACTS = """
[tool.importlinter]
root_package = "toy"

[[tool.importlinter.contracts]]
name = "layers"
type = "layers"
containers = ["toy"]
exhaustive = true
layers = ["high", "mid_a | mid_b", "low"]

[[tool.importlinter.contracts]]
name = "no circles"
type = "acyclic_siblings"
ancestors = ["toy"]
"""


@pytest.fixture
def toy(tmp_path):
    """``write(files)``: a package ``toy`` with high, mid_a, mid_b, low (plus ``files``, name -> source)
    and the contracts above; returns the config's path."""

    def write(files: dict[str, str]) -> Path:
        package = tmp_path / "toy"
        package.mkdir(exist_ok=True)
        sources = {"__init__": "", "high": "", "mid_a": "", "mid_b": "", "low": "", **files}
        for name, source in sources.items():
            (package / f"{name}.py").write_text(textwrap.dedent(source))
        config = tmp_path / "pyproject.toml"
        config.write_text(CONTRACTS)
        return config

    return write


def test_downward_imports_pass(toy):
    config = toy({"high": "from toy import mid_a, low\n", "mid_b": "import toy.low\n"})
    assert lint(config)[0] == 0


@pytest.mark.parametrize(
    ("files", "named"),
    [
        ({"low": "def f():\n    from toy import high\n    return high\n"}, "toy.low -> toy.high"),  # upward
        ({"mid_a": "from toy import mid_b\n"}, "toy.mid_a -> toy.mid_b"),  # within one layer
        ({"stray": ""}, "toy.stray"),  # a top-level module in no layer
    ],
    ids=["upward-inside-a-function", "within-a-layer", "in-no-layer"],
)
def test_an_import_against_the_layers_is_caught(toy, files, named):
    code, out = lint(toy(files))
    assert code == 1 and named in out, out


def test_a_circle_within_a_package_is_caught(tmp_path, toy):
    config = toy({})
    (tmp_path / "toy" / "low").mkdir()
    (tmp_path / "toy" / "low.py").unlink()
    (tmp_path / "toy" / "low" / "__init__.py").write_text("")
    (tmp_path / "toy" / "low" / "a.py").write_text("from toy.low import b\n")
    (tmp_path / "toy" / "low" / "b.py").write_text("def f():\n    from toy.low import a\n")
    code, out = lint(config)
    assert code == 1 and "toy.low" in out, out


def test_a_layer_naming_a_module_that_does_not_exist_is_caught(toy):
    config = toy({})
    config.write_text(config.read_text().replace('"mid_a | mid_b", "low"', '"mid_a | mid_b", "ghost", "low"'))
    code, out = lint(config)
    assert code != 0 and "toy.ghost does not" in " ".join(out.split()), out


def test_every_script_stays_a_thin_entry_point():
    """A rule's script only calls into the library (at most 60 lines); the installer is the exception."""
    long = {
        path.name: length
        for path in (REPO_ROOT / "scripts").glob("*.py")
        if path.name != "install.py" and (length := len(path.read_text().splitlines())) > 60
    }
    assert not long, f"scripts over 60 lines (move their logic into src/contrastlab): {long}"


#: What the ``tables`` job and ``make cards`` run (the report prices the plan; a card names its backbone's
#: licence), in an interpreter of its own: sys.modules of the test process has torch long since.
JOBS_WITHOUT_TORCH = """
import sys
from contrastlab.config import load
from contrastlab.cost.plan import plan_report
from contrastlab.hub.cards import write_model_card
from contrastlab.hub.publish import backbone_license
from contrastlab.report import build_report
from contrastlab.tables.bridge import bridge_blocks

config = load("config/demo.yaml")
plan_report(config, out_dir=sys.argv[1], echo=False)
print(backbone_license("tiny-bert", config["backbones"])[0])
print(sorted(name for name in ("torch", "transformers", "torchvision") if name in sys.modules))
"""


def test_the_tables_job_and_the_cards_import_no_torch(tmp_path):
    """Neither the report with its plan nor a model card imports torch (1.5-3 s a process): the plan's
    padding-free default and a package's model folder live below :mod:`contrastlab.models`, and the MTEB
    bridge imports torch only when it scores."""
    done = subprocess.run(
        [sys.executable, "-c", JOBS_WITHOUT_TORCH, str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines()[-2:] == ["apache-2.0", "[]"], done.stdout[-2000:]
