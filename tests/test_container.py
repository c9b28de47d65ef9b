"""The cluster images (container/Dockerfile, container/contrastlab.def) are held to the pinned environment,
the same workflow, the conda `--sdm conda apptainer` needs and the Snakefile's `container:`, without
building one (no container runtime here; Snakemake's dry runs: tests/e2e/test_container_sdm.py)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.version import Version
from snakemake.deployment.conda import MIN_CONDA_VER
from test_install import install, pins  # scripts/install.py: the install both images run

import contrastlab

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = ROOT / "container" / "Dockerfile"
APPTAINER = ROOT / "container" / "contrastlab.def"


def _docker_copies() -> set[str]:
    """The repository paths the Dockerfile copies (not what it copies from another stage: --from=)."""
    sources = set()
    for line in DOCKERFILE.read_text().splitlines():
        if line.startswith("COPY ") and not line.startswith("COPY --from="):
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
        assert {install.LOCK.name, install.CFFCONVERT_LOCK.name} <= copies  # what install.py installs
    runs_install = r"\.venv/bin/python scripts/install\.py \$\{CUDA:\+--cuda \$\{CUDA\}\}"
    assert re.search(runs_install, DOCKERFILE.read_text())
    assert re.search(runs_install, "\n".join(_apptainer_section("post")))
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
    pinned = pins(ROOT / "constraints.txt")
    assert pinned["torch"] == "2.14.1" and pinned["torchvision"] == "0.29.1"  # a matched pair (see README)


def test_both_images_copy_the_same_workflow_and_every_path_exists():
    docker = _docker_copies() - {"scripts/install.py"}  # the Dockerfile copies it first, for its layer
    assert docker == _apptainer_copies()
    for path in docker:
        assert (ROOT / path).exists(), path
    for needed in ("Snakefile", "rules", "config", "schemas", "profiles", "scripts", "config.yaml"):
        assert needed in docker, needed


def _default_image() -> str:
    """The image the Snakefile names when CONTRASTLAB_IMAGE is unset, its version filled in."""
    text = (ROOT / "Snakefile").read_text()
    assert re.search(r"^from contrastlab import __version__ as _VERSION$", text, re.M)
    match = re.search(r'^container: os\.environ\.get\("CONTRASTLAB_IMAGE", f"([^"]+)"\)$', text, re.M)
    assert match, "the Snakefile names no default image"
    return match.group(1).replace("{_VERSION}", contrastlab.__version__)


def test_the_snakefile_names_a_pip_image_with_container_not_containerized():
    """`containerized:` tells Snakemake that the image holds envs/contrastlab.yaml's conda environment
    (under /conda-envs/<hash>), which a pip image does not: `--sdm conda apptainer` would stop at the first
    job. With `container:` Snakemake builds that environment with the image's conda instead."""
    text = (ROOT / "Snakefile").read_text()
    assert not re.search(r"^containerized:", text, re.M)
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    image = "docker://ghcr.io/contrastlab/contrastlab:"
    assert _default_image() == image + version == image + "0.2.0"
    assert "container/*.sif" in (ROOT / ".gitignore").read_text()  # a local build stays untracked


def test_the_docs_name_the_default_image_and_say_it_is_not_yet_published():
    cluster = " ".join((ROOT / "docs" / "cluster.md").read_text().split())
    reference = _default_image().removeprefix("docker://")
    assert _default_image() in cluster and f"docker push {reference}" in cluster
    assert "not yet published" in cluster
    assert _default_image() in (ROOT / "README.md").read_text()


def test_both_images_carry_a_conda_snakemake_accepts_beside_the_venv():
    """`--sdm conda apptainer` runs `conda info`, `conda --version` and `conda env create` inside the image
    and activates with its bin/activate: both images copy Miniforge's /opt/conda from its image, at a conda
    no older than Snakemake's minimum, and put only condabin/ on PATH, after the venv, so that `python` in a
    job without conda is still the venv's."""
    docker = re.search(r"^ARG MINIFORGE=(\S+)$", DOCKERFILE.read_text(), re.M).group(1)
    apptainer = re.search(
        r"^From: condaforge/miniforge3:(\S+)\nStage: conda$", APPTAINER.read_text(), re.M
    ).group(1)
    assert docker == apptainer == "25.3.0-1"
    conda_version = docker.split("-")[0]  # Miniforge's tags are <conda version>-<build>
    assert Version(conda_version) >= Version(MIN_CONDA_VER) == Version("24.7.1")
    assert "FROM condaforge/miniforge3:${MINIFORGE} AS conda" in DOCKERFILE.read_text()
    assert "COPY --from=conda /opt/conda /opt/conda" in DOCKERFILE.read_text()
    assert _apptainer_section("files from conda") == ["/opt/conda /opt/conda"]
    path = "PATH=/opt/contrastlab/.venv/bin:/opt/conda/condabin:$PATH"
    assert f"    {path} \\" in DOCKERFILE.read_text()
    assert f"export {path}" in _apptainer_section("environment")


def test_the_rootfs_build_copies_what_the_definition_copies_and_runs_its_install():
    """container/rootfs.sh (the Python layer in a debootstrap'd Debian, where no runtime can be had) reads
    the paths of contrastlab.def's %files, not a list of its own, and installs as %post does."""
    script = ROOT / "container" / "rootfs.sh"
    text = script.read_text()
    assert script.stat().st_mode & 0o111, "container/rootfs.sh is not executable"
    assert re.search(r"awk '/\^%files\$/.*\$repo/container/contrastlab\.def", text)  # not %files from conda
    assert re.search(r'\.venv/bin/python scripts/install\.py \$\{CUDA:\+--cuda "\$CUDA"\}', text)
    assert "debootstrap --variant=minbase" in text and " bookworm " in text  # the images' Debian
    assert "pip install" not in text and "==" not in text
