"""Snakemake's own dry runs of the demo under `--sdm apptainer` and `--sdm conda apptainer`: which image it
would pull, and what it asks of the image before any job runs. No apptainer here: a stand-in `apptainer` on
PATH logs every call and answers as contrastlab's image would (Miniforge's conda in /opt/conda, at the
Dockerfile's tag), or as an image without conda."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from tests import forked

from .conftest import OFFLINE, folders

IMAGE = "docker://ghcr.io/contrastlab/contrastlab:0.2.0"  # the Snakefile's default (tests/test_container.py)

# The answers of an image whose conda is Miniforge's in /opt/conda; the version is the Dockerfile's tag's.
WITH_CONDA = """\
  *" -c conda info --json") echo '{"conda_prefix": "/opt/conda", "platform": "linux-64"}' ;;
  *" -c type conda") echo "conda is /opt/conda/condabin/conda" ;;
  *" -c conda --version") echo "conda CONDA_VERSION" ;;
"""


def _stand_in_apptainer(folder: Path, log: Path, answers: str) -> Path:
    """A folder with an `apptainer` that writes each call's arguments to ``log`` and answers ``--version``
    (what Snakemake checks first) and the image commands that ``answers`` lists; anything else fails."""
    folder.mkdir()
    script = folder / "apptainer"
    script.write_text(
        "#!/bin/sh\n"
        f'printf "%s\\n" "$*" >> "{log}"\n'
        'case "$*" in\n'
        '  "--version") echo "apptainer version 1.3.4" ;;\n'
        f"{answers}"
        "  *) exit 127 ;;\n"
        "esac\n"
    )
    script.chmod(0o755)
    return folder


def _dry_run(repo_root: Path, tmp_path: Path, sdm: list[str], answers: str) -> tuple[int, str, list[str]]:
    """`snakemake -n --sdm ...` of config/demo.yaml with its outputs under ``tmp_path``: the exit status,
    the output and the stand-in's calls."""
    log = tmp_path / "apptainer-calls.log"
    log.touch()
    stand_in = _stand_in_apptainer(tmp_path / "bin", log, answers)
    env = dict(os.environ, **OFFLINE, PATH=f"{stand_in}:{os.environ['PATH']}")
    env.pop("CONTRASTLAB_IMAGE", None)
    argv = ["-s", str(repo_root / "Snakefile"), "-n", "--cores", "2", "--sdm", *sdm]
    argv += ["--configfile", "config/demo.yaml", "--config", *folders(tmp_path)]
    done = forked.snakemake(argv, cwd=repo_root, env=env, timeout=300)
    return done.returncode, done.stdout + done.stderr, log.read_text().splitlines()


def test_sdm_apptainer_pulls_the_published_image_and_asks_nothing_of_it(repo_root, tmp_path):
    status, output, calls = _dry_run(repo_root, tmp_path, ["apptainer"], answers="")
    assert status == 0, output[-3000:]
    assert f"Singularity image {IMAGE} will be pulled." in output
    assert "Conda environment" not in output
    assert calls == ["--version"]  # the jobs would run in the image as it is
    assert "total                        115" in output


def test_sdm_conda_apptainer_builds_the_conda_environment_with_the_images_conda(repo_root, tmp_path):
    """With `container:`, Snakemake asks the pulled image for its conda (where it lives, its version) and
    plans to build envs/contrastlab.yaml with it, in the working directory's .snakemake/conda; with
    `containerized:` it would have looked for that environment inside the image instead."""
    tag = re.search(r"^ARG MINIFORGE=(\S+)$", (repo_root / "container" / "Dockerfile").read_text(), re.M)
    answers = WITH_CONDA.replace("CONDA_VERSION", tag.group(1).split("-")[0])
    status, output, calls = _dry_run(repo_root, tmp_path, ["conda", "apptainer"], answers)
    assert status == 0, output[-3000:]
    assert f"Singularity image {IMAGE} will be pulled." in output
    assert "Conda environment envs/contrastlab.yaml will be created." in output
    assert "Unable to find environment in container image" not in output
    pulled = repo_root / ".snakemake" / "singularity" / f"{hashlib.md5(IMAGE.encode()).hexdigest()}.simg"
    in_image = f"--quiet --silent exec --home {repo_root} {pulled} sh -c"
    assert calls == [
        "--version",
        f"{in_image} conda info --json",
        f"{in_image} type conda",
        f"{in_image} conda --version",
    ]


def test_sdm_conda_apptainer_needs_conda_in_the_image(repo_root, tmp_path):
    """Why the image carries Miniforge: a pip image alone stops the run before its first job."""
    status, output, calls = _dry_run(repo_root, tmp_path, ["conda", "apptainer"], answers="")
    assert status == 1
    assert "Error running conda info. Is conda installed and accessible?" in output
    assert calls[-1].endswith("sh -c conda info --json")
