"""The cluster image's definitions (container/Dockerfile, container/contrastlab.def) are held to the pinned
environment: they install through scripts/install.py under constraints.txt (the same pins as `make
install`), on the Python the pins were made for, with the CUDA build chosen by the same argument, and
they copy the same workflow. No image is built here (no registry or container runtime on the CI machine):
these are the facts a build depends on that can be checked without one."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = ROOT / "container" / "Dockerfile"
APPTAINER = ROOT / "container" / "contrastlab.def"

sys.path.insert(0, str(ROOT / "scripts"))
import install  # noqa: E402  (scripts/install.py: the install both images run)


def _docker_copies() -> set[str]:
    sources = set()
    for line in DOCKERFILE.read_text().splitlines():
        if line.startswith("COPY "):
            *paths, _dest = line.split()[1:]
            sources.update(p.rstrip("/") for p in paths)
    return sources


def _apptainer_section(name: str) -> list[str]:
    text = APPTAINER.read_text()
    match = re.search(rf"^%{name}\n(.*?)(?=^%|\Z)", text, re.S | re.M)
    assert match, f"{APPTAINER.name} has no %{name} section"
    return [line.strip() for line in match.group(1).splitlines() if line.strip()]


def _apptainer_copies() -> set[str]:
    return {line.split()[0] for line in _apptainer_section("files")}


def test_both_images_install_with_scripts_install_under_constraints_txt():
    for copies in (_docker_copies(), _apptainer_copies()):
        assert {"pyproject.toml", "constraints.txt", "src"} <= copies
        assert "scripts/install.py" in copies or "scripts" in copies
        assert install.CFFCONVERT_CONSTRAINTS.name in copies  # install.py's second environment
    assert re.search(
        r"\.venv/bin/python scripts/install\.py \$\{CUDA:\+--cuda \$\{CUDA\}\}", DOCKERFILE.read_text()
    )
    post = "\n".join(_apptainer_section("post"))
    assert re.search(r"\.venv/bin/python scripts/install\.py \$\{CUDA:\+--cuda \$\{CUDA\}\}", post)
    # install.py's pins are constraints.txt's: the image has no pins of its own
    assert install.CONSTRAINTS == ROOT / "constraints.txt"
    for text in (DOCKERFILE.read_text(), APPTAINER.read_text()):
        assert "pip install" not in text and "==" not in text


def test_the_base_python_is_the_one_the_pins_were_made_for():
    env = yaml.safe_load((ROOT / "envs" / "contrastlab.yaml").read_text())
    pinned = next(
        d.split("=", 1)[1] for d in env["dependencies"] if isinstance(d, str) and d.startswith("python=")
    )
    docker = re.search(r"^ARG PYTHON=(\S+)$", DOCKERFILE.read_text(), re.M).group(1)
    apptainer = next(
        line.split("=", 1)[1] for line in _apptainer_section("arguments") if line.startswith("PYTHON=")
    )
    assert docker == apptainer == pinned == "3.11"
    assert "FROM python:${PYTHON}-slim-bookworm" in DOCKERFILE.read_text()
    assert "From: python:{{ PYTHON }}-slim-bookworm" in APPTAINER.read_text()


@pytest.mark.parametrize("cuda, backend", [("", None), ("12.6", "cu126"), ("cpu", "cpu")])
def test_the_cuda_argument_is_install_pys(cuda, backend):
    """Empty: the registry's torch (CUDA 13.0); 12.6: PyTorch's cu126 index; cpu: the CPU build."""
    assert install.torch_backend(cuda or None) == backend
    assert re.search(r"^ARG CUDA=$", DOCKERFILE.read_text(), re.M)
    assert "CUDA=" in _apptainer_section("arguments")


def test_the_torch_pins_the_images_get():
    pins = dict(
        line.split("==") for line in (ROOT / "constraints.txt").read_text().splitlines() if "==" in line
    )
    assert pins["torch"] == "2.14.1" and pins["torchvision"] == "0.29.1"  # a matched pair (see README)


def test_both_images_copy_the_same_workflow_and_every_path_exists():
    docker = _docker_copies() - {"scripts/install.py"}  # the Dockerfile copies it first, for its layer
    assert docker == _apptainer_copies()
    for path in docker:
        assert (ROOT / path).exists(), path
    for needed in ("Snakefile", "rules", "config", "schemas", "profiles", "scripts", "config.yaml"):
        assert needed in docker, needed


def test_the_snakefile_runs_its_jobs_in_the_image_under_sdm_apptainer():
    text = (ROOT / "Snakefile").read_text()
    match = re.search(r'^containerized: os\.environ\.get\("CONTRASTLAB_IMAGE", "([^"]+)"\)$', text, re.M)
    assert match and match.group(1) == "container/contrastlab.sif"
    assert "container/*.sif" in (ROOT / ".gitignore").read_text()


def test_the_rootfs_build_copies_what_the_definition_copies_and_runs_its_install():
    """container/rootfs.sh (the Python layer in a debootstrap'd Debian, where no runtime can be had) reads
    the paths of contrastlab.def's %files, not a list of its own, and installs as %post does."""
    script = ROOT / "container" / "rootfs.sh"
    text = script.read_text()
    assert script.stat().st_mode & 0o111, "container/rootfs.sh is not executable"
    assert re.search(r"awk '/\^%files/.*\$repo/container/contrastlab\.def", text)
    assert re.search(r'\.venv/bin/python scripts/install\.py \$\{CUDA:\+--cuda "\$CUDA"\}', text)
    assert "debootstrap --variant=minbase" in text and " bookworm " in text  # the images' Debian
    assert "pip install" not in text and "==" not in text
