"""A two-stage search through Snakemake: stage 2 starts from stage 1's winner, a point equal to a trained
cell is not trained again, and only the winner is evaluated on the test sets; the add-seeds lines the
report prints for that experiment plan exactly the cells they name."""

from __future__ import annotations

import json

import pytest

from contrastlab.config.command_line import configfile_words
from contrastlab.report.answer import add_seeds_script

from .add_seeds import named_cells, planned_cells, script_commands
from .conftest import job_counts, reduced_demo, run_snakemake, write

pytestmark = pytest.mark.slow
SCHEDULE_FIRST = 4  # a long module: tests/conftest.py starts the highest numbers first


@pytest.fixture(scope="module")
def finished_search(repo_root, tmp_path_factory):
    """The reduced demo's Nie experiment with MPT alone and a two-stage search over it, run (target
    ``searches``): its folder, config path and Snakemake's output."""
    workdir = tmp_path_factory.mktemp("search")
    config = reduced_demo(repo_root, workdir)
    nie = config["experiments"]["nie2023"]
    nie["methods"] = {"mpt": {"loss": "mpt", "hp": {"m": 0.23}, "note": "test"}}
    nie.pop("training")  # no probe statistics: faster
    # stage 1: the configured lr only (the mpt cell itself, so it wins); stage 2: the margin at the
    # winner, 0.23 being the winner's own (that point is the winner: a copy, not a second training)
    # (lr 1e12 diverges to NaN within two steps: a point without a dev score, not a failed search)
    nie["search"] = {
        "methods": ["mpt"],
        "stages": [{"grid": {"lr": [3.0e-5, 1.0e12]}}, {"grid": {"hp.m": [0.23, 0.5]}}],
    }
    path = write(config, workdir / "search.yaml")
    return workdir, path, run_snakemake(repo_root, "searches", "--configfile", path, "--cores", "2")


def test_two_stage_search_runs_and_trains_each_setting_once(repo_root, finished_search):
    workdir, path, output = finished_search
    results = workdir / "results"
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
    scored = sorted(p.parent.parent.name for p in (results / "metrics").rglob("senteval.json"))
    assert scored == ["mpt~searched"]
    assert "Nothing to be done" in run_snakemake(repo_root, "searches", "-n", "--configfile", path)
    assert job_counts(output)["train"] == 4  # mpt, lr 1e12, and the two margins (one of them the copy)


def test_every_add_seeds_line_plans_exactly_the_cells_it_names(repo_root, finished_search, tmp_path):
    """The report's add-seeds script, run as printed on the finished search: the select line plans its
    two cells and nothing else of a cell (not the stage-1 point the ``mpt`` cell shares), the tables line
    none."""
    workdir, path, _ = finished_search
    plan = [
        dict(experiment="nie2023", backbone="tiny-bert", methods=["mpt"], seeds=[42, 43, 44], new=[43, 44])
    ]
    script = add_seeds_script(plan, configfile_words([path], repo_root))
    assert script[1] == f'run() {{ .venv/bin/snakemake --configfile {path} --config "$SEEDS" "$@"; }}'
    commands = script_commands(script, tmp_path)
    names = {"nie2023/tiny-bert/mpt/seed43", "nie2023/tiny-bert/mpt/seed44"}
    selected = "select={backbones: [tiny-bert], experiments: [nie2023], methods: [mpt], seeds: [43, 44]}"
    assert len(commands) == 2 and selected in commands[0]
    for argv, named in zip(commands, [names, set()], strict=True):
        assert named_cells(argv) == named
        output = run_snakemake(repo_root, *argv, "-n")
        assert planned_cells(output) == named, (argv, job_counts(output))


def test_a_select_that_leaves_the_shared_cell_out_trains_it_under_its_own_name(
    repo_root, finished_search, tmp_path
):
    """In a fresh results folder, a select that leaves out the ``mpt`` cell the stage-1 point shares
    plans the search with that cell's training, not the point as a second cell."""
    _, path, _ = finished_search
    seeds = "experiments={nie2023: {seeds: [42, 43]}}"
    select = "select={experiments: [nie2023], seeds: [43]}"  # the search's seed, 42, left out
    overrides = ("--config", f"results_dir={tmp_path}", seeds, select)
    output = run_snakemake(repo_root, "searches", "-n", "--configfile", path, *overrides)
    assert job_counts(output)["train"] == 4  # mpt itself, lr 1e12, the two margins
    assert planned_cells(output) == {
        f"nie2023/tiny-bert/{method}/seed42"
        for method in ("mpt", "mpt~s1-lr1e+12", "mpt~s2-m0.23", "mpt~s2-m0.5")
    }
