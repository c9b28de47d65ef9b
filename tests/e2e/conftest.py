"""The end-to-end tests: every module here starts Snakemake, and only those do. This folder is marked e2e
as a whole (``make test-fast`` leaves it out with ``--ignore=tests/e2e``; ``-m "not e2e"`` works too), and
each of its modules runs Snakemake in a working copy of its own of the repository."""

from __future__ import annotations

import itertools
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from contrastlab.data.fixtures import write_demo_corpus
from contrastlab.paths import REPO_ROOT
from tests import forked

from .slurm_cluster import ClusterUnavailable, start_cluster, stop_cluster

HERE = Path(__file__).parent


def pytest_collection_modifyitems(items):
    """Every test of this folder is e2e: the folder says it, not a list of names."""
    for item in items:
        if HERE in Path(item.path).parents:
            item.add_marker(pytest.mark.e2e)


# What Snakemake writes into its working directory, and the run outputs the presets keep there: a module's
# working copy has its own (empty) ones; everything else is a link to the repository.
OWN_IN_EACH_COPY = frozenset({".snakemake", "results", "resources"})


@pytest.fixture(scope="module")
def repo_root(tmp_path_factory) -> Path:
    """The repository as this module's Snakemake runs see it: a folder of links to the repository's files
    with a ``.snakemake`` of its own (a run that ends removes the whole locks folder, other runs' locks
    included: a working directory per module lets modules run side by side)."""
    return linked_copy(tmp_path_factory.mktemp("copy") / "repo")


def linked_copy(copy: Path) -> Path:
    """:func:`repo_root`'s folder of links at ``copy`` (a new folder; ``../shared`` beside it)."""
    copy.mkdir()
    for entry in REPO_ROOT.iterdir():
        if entry.name not in OWN_IN_EACH_COPY:
            (copy / entry.name).symlink_to(entry)
    # The presets name the real data relative to the repository (config/cpu.yaml: ../shared/data/...).
    shared = REPO_ROOT.parent / "shared"
    if shared.exists():
        (copy.parent / "shared").symlink_to(shared)
    return copy


@pytest.fixture(scope="session")
def e2e_resources(tmp_path_factory) -> Path:
    """One ``resources_dir`` for the end-to-end configs of a worker (the tiny BERT materialised, the
    SentEval fixture, the generated corpus and its tokenised cache), as the presets share ``resources/``:
    each run builds only what an earlier one has not. ``results_dir`` stays each test's own."""
    return tmp_path_factory.mktemp("e2e-resources")


# --- Snakemake as the tests run it: offline, on a working copy's Snakefile, and the demo cut down ------


SNAKEMAKE = [sys.executable, "-m", "snakemake"]
DEAD_PROXY = "http://127.0.0.1:9"  # nothing listens there: a download through it fails at once
#: The environment of the tests' Snakemake: offline, and any download sent to :data:`DEAD_PROXY`.
OFFLINE = dict(
    HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HTTP_PROXY=DEAD_PROXY, HTTPS_PROXY=DEAD_PROXY, NO_PROXY=""
)


def snakemake_process(repo_root: Path, *args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    """Snakemake on the repository's Snakefile, offline, its output captured (exit status not checked)."""
    # A fork of a process that imported Snakemake (tests/forked.py), as ``subprocess.run`` of SNAKEMAKE.
    argv = ["-s", str(repo_root / "Snakefile"), *args]
    return forked.snakemake(argv, cwd=repo_root, env=dict(os.environ, **OFFLINE), timeout=timeout)


def run_snakemake(repo_root: Path, *args: str, timeout: int = 600) -> str:
    """:func:`snakemake_process` that must succeed; returns its output."""
    return succeeded(snakemake_process(repo_root, *args, timeout=timeout))


def succeeded(done: subprocess.CompletedProcess) -> str:
    """The output of a Snakemake run that must have succeeded."""
    output = done.stdout + done.stderr
    failures = "\n".join(said(output))
    assert done.returncode == 0, f"{failures}\n...\n{output[-4000:]}"
    return output


def said(output: str) -> list[str]:
    """The ``contrastlab:`` lines of a run's output."""
    return [line for line in output.splitlines() if line.startswith("contrastlab:")]


def one_line_failure(done: subprocess.CompletedProcess) -> str:
    """The one ``contrastlab:`` line of a run that must have failed with exit status 1 and no traceback."""
    out = done.stdout + done.stderr
    lines = said(out)
    assert done.returncode == 1 and len(lines) == 1 and "Traceback" not in out, out[-3000:]
    return lines[0]


def folders(scratch: Path | str) -> list[str]:
    """The ``--config`` entries that put a run's results and resources folders under ``scratch``."""
    return [f"results_dir={scratch}/results", f"resources_dir={scratch}/resources"]


def demo_process(
    repo_root: Path, scratch: Path, *config: str, args: tuple[str, ...] = ("-n", "--cores", "1")
) -> subprocess.CompletedProcess:
    """:func:`snakemake_process` of the demo preset with ``args``, its folders under ``scratch`` and the
    ``config`` overrides (which a ``--`` and targets may end)."""
    demo = ("--configfile", "config/demo.yaml", "--config", *folders(scratch), *config)
    return snakemake_process(repo_root, *args, *demo)


def job_counts(output: str) -> dict[str, int]:
    """Parse the 'Job stats' table of a dry-run."""
    rows = (line.split() for line in output.split("Job stats:", 1)[1].splitlines()[3:])
    table = itertools.takewhile(lambda parts: len(parts) == 2 and parts[1].isdigit(), rows)
    return {name: int(count) for name, count in table}


def dry_run_jobs(output: str) -> list[dict]:
    """Every job a dry-run printed (a group's, indented under it, too): its rule (a checkpoint's too), its
    input and output files, its resources line and its wildcards."""
    jobs = []
    for block in re.split(r"\n(?=\s*(?:local)?(?:rule|checkpoint) \w+:\n)", output):
        match = re.match(r"\s*(?:local)?(?:rule|checkpoint) (\w+):\n", block)
        if match:
            fields = dict(re.findall(r"^\s+(input|output|resources|wildcards): (.*)$", block, re.M))
            job = {key: fields[key].split(", ") if fields.get(key) else [] for key in ("input", "output")}
            pairs = fields.get("wildcards", "").split(", ")
            job["wildcards"] = dict(pair.split("=", 1) for pair in pairs if pair)
            jobs.append({"rule": match.group(1), "resources": fields.get("resources", ""), **job})
    return jobs


def nothing_to_do(output: str) -> None:
    assert "Nothing to be done" in output, output[-3000:]


def reduced_demo(repo_root, workdir, mteb=False):
    """config/demo.yaml on one backbone and two losses, fewer steps; the corpus a user copy
    (``data.wiki_path``) the tests can move and change; MTEB's evaluator only with ``mteb``."""
    config = yaml.safe_load((repo_root / "config" / "demo.yaml").read_text())
    config["mteb"]["enabled"] = mteb
    config["results_dir"] = str(workdir / "results")
    config["resources_dir"] = str(workdir / "resources")
    config["data"]["wiki_path"] = str(write_demo_corpus(workdir / "corpus" / "wiki.txt", 2000))
    config["training"].update(max_steps=8, eval_every=4, state_every=4, log_every=2)
    # every figure rule, seconds each
    config["analytic_figures"] = {"points": 10, "batches": 20}
    config["oar_synthetic"] = {"epochs": 10, "seeds": 1, "sweep": []}
    config["experiments"] = {
        "nie2023": {
            "backbones": ["tiny-bert"],
            "pretrained_pooling": "avg_embeddings_and_last",
            # the probe statistics behind Nie Fig. 1b-d and 3b
            "training": {"analysis_every": 4, "analysis_sentences": 64, "analysis_batch": 32},
            "methods": {
                "cl": {"loss": "infonce", "hp": {"tau": 0.05}, "note": "test"},
                "mpt": {"loss": "mpt", "hp": {"m": 0.23}, "note": "test"},
            },
        }
    }
    return config


def write(config, path):
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return str(path)


def start_snakemake(repo_root: Path, args: list[str], out: Path) -> subprocess.Popen:
    """A real Snakemake process (one the test kills) of ``args``, offline, its output written to ``out``, in
    a process group of its own (a kill of the group takes its jobs too)."""
    with open(out, "w") as log:
        return subprocess.Popen(
            [*SNAKEMAKE, "-s", str(repo_root / "Snakefile"), *args],
            cwd=repo_root,
            env=dict(os.environ, **OFFLINE),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def macl_pair(repo_root, workdir, e2e_resources, **macl):
    """reduced_demo with MACL's two sentence cells on the tiny BERT (simcse; macl, updated by ``macl``)
    in place of Nie's, no figures, Pretrained rows or OAR Table 2; the session's resources."""
    config = reduced_demo(repo_root, workdir)
    config["resources_dir"] = str(e2e_resources)  # tiny BERT, fixture and corpus cache: once a session
    config["oar_synthetic"] = None
    macl_hp = {"tau0": 0.05, "alpha": 2, "a0": 0.8, "reweight": False}
    methods = {
        "simcse": {"loss": "infonce", "hp": {"tau": 0.05}, "note": "test"},
        "macl": {"loss": "macl", "hp": macl_hp, "note": "test", **macl},
    }
    config["experiments"] = {"macl": {"backbones": ["tiny-bert"], "methods": methods}}
    return config


# --- a real SLURM (test_slurm.py, test_slurm_gpu.py: a cluster of each module's own) ---------------------


@pytest.fixture(scope="module")
def cluster():
    """A single-node SLURM on 127.0.0.1 (slurm_cluster.py) for this module; skips where none can start."""
    try:
        running = start_cluster()
    except ClusterUnavailable as reason:
        pytest.skip(f"no local SLURM cluster: {reason}")
    try:
        yield running
    finally:
        stop_cluster(running)
