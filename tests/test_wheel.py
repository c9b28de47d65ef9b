"""``pip install .`` gives a library whose ``contrastlab.config.load`` works without a checkout: the schema
is package data, which the top-level ``schemas/`` links to."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from contrastlab import config as cl_config
from contrastlab.config import schema
from contrastlab.paths import REPO_ROOT

PACKAGED = REPO_ROOT / "src" / "contrastlab" / "config" / "config.schema.yaml"
# ... and the calibration and the plan, which read make gpu-check's preset (reliability 9, U1)
PLAN_DEMO = """
import json
import contrastlab.config as cl_config
from contrastlab import artifacts
from contrastlab.cost import calibration, plan
written = plan.plan_report(cl_config.load("config/demo.yaml"), out_dir="plan", echo=False)
print(json.dumps({
    "preset": str(calibration.GPU_CHECK_PRESET),
    "measured": str(calibration.measured_calibration()),
    "default": calibration.load_calibration().path,
    "for_none": calibration.calibration_for(None).path,
    "lock": str(artifacts.LOCK_FILE),
    "plan": [p.name for p in written],
}))
"""
# What the fresh environment runs, from a folder with no checkout in or above it: the demo config loaded,
# and where the library, its schema and the import path came from.
LOAD_DEMO = """
import json, sys
import contrastlab, contrastlab.config as cl_config
from contrastlab.config import schema
config = cl_config.load("config/demo.yaml")
print(json.dumps({
    "module": contrastlab.__file__,
    "schema": str(schema.schema_file()),
    "path": sys.path,
    "config": config,
}, default=str))
"""


def fresh_environment(folder: Path, *, our_dependencies: bool = True) -> tuple[Path, Path]:
    """A fresh environment of the base interpreter at ``folder``, without pip or this one's packages: its
    python and its site-packages. With ``our_dependencies`` those are this environment's, named by a .pth
    line, which adds their folder and none of the .pth files in it (the editable install's link to the
    checkout's src/ among them)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True, timeout=120)
    python = folder / "bin" / "python"
    purelib = [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"]
    site = Path(subprocess.check_output(purelib, text=True).strip())
    if our_dependencies:
        (site / "dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    return python, site


def test_the_schema_is_one_file_the_package_holds_and_schemas_links_to():
    """One copy: ``schemas/config.schema.yaml`` is a relative link to the packaged file, which the
    loader reads through ``importlib.resources``."""
    top = REPO_ROOT / "schemas" / "config.schema.yaml"
    assert top.is_symlink() and top.readlink() == Path("../src/contrastlab/config/config.schema.yaml")
    assert top.resolve() == PACKAGED.resolve()
    assert Path(str(schema.schema_file())) == PACKAGED
    assert schema.load_schema()["title"] == "contrastlab configuration"


@pytest.mark.fault(
    "the installed wheel used outside a checkout: calibration and plan (U1)",
    "make gpu-check's preset read as package data; the plan written",
)
def test_the_wheel_in_a_fresh_environment_loads_the_demo_config(tmp_path):
    # The wheel is built from a copy of what `pip install .` reads (no schemas/, no checkout around it),
    # so that the build leaves nothing in the checkout.
    source = tmp_path / "source"
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
    shutil.copytree(REPO_ROOT / "src", source / "src", ignore=ignore)
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(REPO_ROOT / name, source / name)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input"]
    build = [*pip, "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", str(tmp_path / "dist")]
    subprocess.run([*build, str(source)], check=True, capture_output=True, text=True, timeout=300)
    [wheel] = (tmp_path / "dist").glob("contrastlab-*.whl")
    assert "contrastlab/config/config.schema.yaml" in zipfile.ZipFile(wheel).namelist()

    python, site = fresh_environment(tmp_path / "venv")
    install = [*pip, "--python", str(python), "install", "--no-deps", "--no-index", str(wheel)]
    subprocess.run(install, check=True, capture_output=True, text=True, timeout=300)

    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "config").mkdir(parents=True)
    shutil.copy(REPO_ROOT / "config" / "demo.yaml", elsewhere / "config" / "demo.yaml")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}  # no PYTHONPATH, no CONTRASTLAB_* variables

    def run(code: str) -> str:
        command = [python, "-c", code]
        done = subprocess.run(command, cwd=elsewhere, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout

    seen = json.loads(run(LOAD_DEMO))
    installed = site / "contrastlab"
    assert Path(seen["module"]) == installed / "__init__.py"
    assert Path(seen["schema"]) == installed / "config" / "config.schema.yaml"
    assert not [entry for entry in seen["path"] if entry.startswith(str(REPO_ROOT / "src"))]
    config = seen["config"]  # the schema's defaults filled in, as the checkout's library fills them
    assert config["results_dir"] == "results/demo"
    assert (config["training"]["protocol"], config["training"]["max_steps"]) == ("simcse", 30)
    checkout = cl_config.load(REPO_ROOT / "config" / "demo.yaml")
    assert config == json.loads(json.dumps(checkout, default=str))

    # Reliability 9, U1: the calibration (make gpu-check's preset is package data) and the plan
    seen = json.loads(run(PLAN_DEMO).splitlines()[-1])
    assert Path(seen["preset"]) == installed / "cost" / "gpu-check.yaml"
    # relative: the working directory's, as the config's paths
    assert seen["measured"] == "results/gpu-check/calibration.json"
    shipped = "the shipped H200 file (contrastlab/cost/calibration_h200.json)"
    assert seen["default"] == seen["for_none"] == shipped
    assert seen["lock"] == "artifacts.lock.json" and seen["plan"] == ["plan.md", "plan.csv"]
