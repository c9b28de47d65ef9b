"""A two-stage search through Snakemake: stage 2 starts from stage 1's winner, a point equal to a trained
cell is not trained again, and only the winner is evaluated on the test sets."""

from __future__ import annotations

import json

import pytest

from .test_dryrun import job_counts, run_snakemake
from .test_pipeline import reduced_demo, write

pytestmark = pytest.mark.slow
SCHEDULE_FIRST = 4  # a long module: tests/conftest.py starts the highest numbers first


def test_two_stage_search_runs_and_trains_each_setting_once(repo_root, tmp_path):
    config = reduced_demo(repo_root, tmp_path)
    nie = config["experiments"]["nie2023"]
    nie["methods"] = {"mpt": {"loss": "mpt", "hp": {"m": 0.23}, "note": "test"}}
    nie.pop("training")  # no probe statistics: faster
    # stage 1: the configured lr only (the mpt cell itself, so it wins); stage 2: the margin at the
    # winner, 0.23 being the winner's own (that point is the winner: a copy, not a second training)
    # (lr 1e12 diverges to NaN within two steps: a point without a dev score, not a failed search)
    nie["search"] = {"stages": [{"grid": {"lr": [3.0e-5, 1.0e12]}}, {"grid": {"hp.m": [0.23, 0.5]}}]}
    path = write(config, tmp_path / "search.yaml")
    output = run_snakemake(repo_root, "searches", "--configfile", path, "--cores", "2")
    results = tmp_path / "results"
    stage1 = json.loads((results / "search/nie2023/tiny-bert/mpt/stage1.json").read_text())
    stage2 = json.loads((results / "search/nie2023/tiny-bert/mpt/stage2.json").read_text())
    # stage 1's lr 3e-5 point is the configured cell: its checkpoint, trained once
    assert stage1["points"][0]["model_dir"].endswith("checkpoints/nie2023/tiny-bert/mpt/seed42/model")
    assert stage1["winner"] == "mpt~s1-lr3e-05" and stage1["winner_settings"]["lr"] == 3.0e-5
    diverged = stage1["points"][1]
    assert diverged["dev"] is None and "not finite at step" in diverged["diverged"], diverged
    # every stage-2 point at stage 1's winner, with its own margin
    assert [p["settings"]["loss_hp"]["m"] for p in stage2["points"]] == [0.23, 0.5]
    assert {json.dumps({**p["settings"], "loss_hp": None}) for p in stage2["points"]} == {
        json.dumps({**stage1["winner_settings"], "loss_hp": None})
    }
    # m 0.23 at the winner is the winner: its checkpoint copied, not trained a second time
    repeat = (results / "logs/train/nie2023/tiny-bert/mpt~s2-m0.23/seed42.log").read_text()
    assert "settings equal the earlier winner's; copying" in repeat
    assert stage2["points"][0]["dev"] == stage1["winner_dev"]
    metrics = json.loads(
        (results / "metrics/nie2023/tiny-bert/mpt~searched/seed42/senteval.json").read_text()
    )
    assert metrics["search"]["winner"] == stage2["winner"] and metrics["search"]["stage"] == 2
    assert metrics["model_dir"] == stage2["winner_model"]
    # test scores exist for the winner alone
    assert sorted(p.parent.parent.name for p in (results / "metrics").rglob("senteval.json")) == [
        "mpt~searched"
    ]
    assert "Nothing to be done" in run_snakemake(repo_root, "searches", "-n", "--configfile", path)
    assert job_counts(output)["train"] == 4  # mpt, lr 1e12, and the two margins (one of them the copy)
