"""The run's search points, priced by the main process and read back by the jobs' processes."""

from __future__ import annotations

import copy
import json

import pytest
import yaml

from contrastlab import config as cl_config
from contrastlab import search as cl_search
from contrastlab.cost import budget
from contrastlab.paths import REPO_ROOT, Results
from contrastlab.workflow import points


def _demo_config() -> dict:
    return cl_config.validate(yaml.safe_load((REPO_ROOT / "config" / "demo.yaml").read_text()))


@pytest.fixture(scope="module")
def demo():
    """config/demo.yaml validated: its grid's digest and its search points (two searches, eight points)."""
    grid = cl_config.Grid(_demo_config())
    return grid.digest, budget.searched_points(grid)


def _fail():
    raise AssertionError("priced although the main process kept the points")


def test_a_jobs_process_reads_the_points_the_main_process_kept(demo, tmp_path):
    """Each under the name the main process gave it: a point of two axes (lr, then hp.m) keeps its name
    through the file, whose keys are sorted: 'mpt~s1-lr3e-05-m0.23', not 'mpt~s1-m0.23-lr3e-05'."""
    digest, kept = demo
    # and a point of a later stage around the winner: its moves are (op, value) tuples
    kept = [*kept, cl_search.SearchPoint("li2024", "tiny-bert", "mmhe", 3, 0, {}, {"lr": ("times", 2.0)})]
    path = tmp_path / "state" / "search_points.json"
    assert len(kept) == 9 and any(p.shared_with for p in kept)
    assert points.write_points(path, digest, kept)
    assert points.read_points(path, digest) == kept
    assert [p.name for p in points.read_points(path, digest)] == [p.name for p in kept]
    assert "mpt~s1-lr3e-05-m0.23" in [p.name for p in kept]
    assert points.run_points(path, digest, _fail, main=False) == kept
    # the main process prices, whatever the file says
    assert points.run_points(path, digest, lambda: kept[:1], main=True) == kept[:1]


def test_a_file_of_another_config_or_none_is_priced_afresh(demo, tmp_path):
    """The digest is the config's, not the objects': a job's process validates the same YAML again."""
    digest, kept = demo
    assert cl_config.Grid(_demo_config()).digest == digest
    path = tmp_path / "search_points.json"
    assert points.read_points(path, digest) is None  # no file
    assert points.run_points(path, digest, lambda: kept, main=False) == kept
    points.write_points(path, digest, kept)
    other = copy.deepcopy(dict(_demo_config()))
    other["training"]["lr"] = 1.0e-3
    assert points.read_points(path, cl_config.Grid(other).digest) is None
    path.write_text("{not json")
    assert points.read_points(path, digest) is None
    path.write_text(json.dumps({"format": 0, "config": digest, "points": []}))
    assert points.read_points(path, digest) is None


def test_points_json_cannot_give_back_are_not_written(demo, tmp_path):
    digest, kept = demo
    odd = cl_search.SearchPoint("nie2023", "tiny-bert", "mpt", 1, 0, {"hp.m": (0.1, 0.2)})
    path = tmp_path / "search_points.json"
    assert not points.write_points(path, digest, [*kept, odd])
    assert not path.exists()


def test_the_points_file_lies_in_the_results_state():
    assert points.points_file(Results("results/demo")) == "results/demo/state/search_points.json"
