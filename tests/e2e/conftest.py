"""The end-to-end tests: every module here starts Snakemake, and only those do. This folder is marked e2e
as a whole (``make test-fast`` leaves it out with ``--ignore=tests/e2e``; ``-m "not e2e"`` works too), and
each of its modules runs Snakemake in a working copy of its own of the repository."""

from __future__ import annotations

from pathlib import Path

import pytest

from contrastlab.paths import REPO_ROOT

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
