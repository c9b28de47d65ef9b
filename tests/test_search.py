"""Hyperparameter searches (contrastlab.search): points, shared cells, stage-2 centring, selection on dev
only, the budget's trimming order, the plan's price, and the selection table against the published
hyperparameters."""

from __future__ import annotations

import json
import math
from collections import Counter

import pandas as pd
import pytest

from contrastlab import config as cl_config
from contrastlab import search as S
from contrastlab.blocks import to_markdown
from contrastlab.cost import budget as cl_budget
from contrastlab.cost import calibration as cl_calibration
from contrastlab.cost import flops as cl_flops
from contrastlab.cost import plan
from contrastlab.paths import REPO_ROOT, write_text
from contrastlab.tables.search import DIFFERS, NOT_RUN, SAME, published_hparams, selection_rows
from tests.tables.tables_synthetic import scores_frame


def _demo() -> dict:
    return cl_config.load(REPO_ROOT / "config" / "demo.yaml")


def _with_search(config: dict, experiment: str, search: dict) -> dict:
    config = json.loads(json.dumps(config))
    config["experiments"][experiment]["search"] = search
    return cl_config.validate(config)


#: The demo's nie2023 search points and the configured cell each shares: lr 3e-5, m 0.23 is the configured
#: mpt cell of the demo, that cell, not a second training.
DEMO_NIE_POINTS = [
    ("mpt~s1-lr3e-05-m0.23", "mpt"),
    ("mpt~s1-lr3e-05-m0.3", None),
    ("mpt~s1-lr0.0001-m0.23", None),
    ("mpt~s1-lr0.0001-m0.3", None),
]


def test_demo_points_and_shared_cells():
    points = S.search_points(cl_config.Grid(_demo()))
    nie = [p for p in points if p.experiment == "nie2023"]
    assert [(p.name, p.shared_with) for p in nie] == DEMO_NIE_POINTS
    assert nie[0].cell.path == "nie2023/tiny-bert/mpt/seed42"
    li = [p for p in points if p.experiment == "li2024"]
    assert [(p.stage, p.name, p.shared_with) for p in li] == [
        (1, "mmhe~s1-lr3e-05", "mmhe"),
        (1, "mmhe~s1-lr0.0001", None),
        (2, "mmhe~s2-r1.25", None),
        (2, "mmhe~s2-r2", None),
    ]


def test_stage_two_is_centred_on_the_stage_one_winner():
    winner = {"lr": 3e-5, "batch_size": 128, "seed": 42, "loss_hp": {"m": 0.3, "tau": 0.05, "r": 1.0}}
    stage = {
        "grid": {"hp.r": [1.25, 2.0]},
        "around": {"lr": {"times": [0.5, 2]}, "hp.m": {"plus": [-0.03, 0.03]}},
    }
    resolved = [S.resolve_settings(winner, grid, around) for grid, around in S.stage_points(stage)]
    assert len(resolved) == 8
    assert sorted({s["lr"] for s in resolved}) == [1.5e-5, 6e-5]  # x0.5 and x2 of the winner's 3e-5
    assert sorted({s["loss_hp"]["m"] for s in resolved}) == [0.27, 0.33]
    assert {s["loss_hp"]["r"] for s in resolved} == {1.25, 2.0}
    # every other setting is the winner's (Li A.4: the best batch size and lr carried into stage 2)
    assert {(s["batch_size"], s["loss_hp"]["tau"], s["seed"]) for s in resolved} == {(128, 0.05, 42)}
    # another winner moves the whole stage with it
    other = S.resolve_settings({**winner, "lr": 1e-5}, {}, {"lr": ("times", 2)})
    assert other["lr"] == 2e-5
    other = S.resolve_settings({**winner, "batch_size": 64}, {}, {"batch_size": ("times", 2)})
    assert other["batch_size"] == 128


def test_resolve_point_reads_the_winner_and_spots_a_repeat(tmp_path):
    winner = {"lr": 1e-4, "batch_size": 16, "seed": 42, "loss_hp": {"m": 0.3, "r": 1.75}}
    selection = tmp_path / "stage1.json"
    selection.write_text(json.dumps({"winner_settings": winner, "winner_model": "w/model"}))
    point = next(p for p in S.search_points(cl_config.Grid(_demo())) if p.name == "mmhe~s2-r2")
    assert (point.stage, dict(point.grid)) == (2, {"hp.r": 2.0})
    moved = S.resolve_point({"seed": 42, "lr": 3e-5}, selection, point)
    assert moved["lr"] == 1e-4 and moved["loss_hp"]["r"] == 2.0
    assert S.same_as_winner(moved, selection) is None
    same = S.SearchPoint("li2024", "tiny-bert", "mmhe", 2, 0, {"hp.r": 1.75})
    assert S.same_as_winner(S.resolve_point({"seed": 42}, selection, same), selection) == "w/model"


def _point_dir(root, name, dev, test):
    model = root / name / "model"
    model.mkdir(parents=True)
    (model / "train_summary.json").write_text(
        json.dumps(
            {"best_dev_spearman": dev, "dev_task": "STSBenchmark", "best_step": 10, "settings": {"lr": dev}}
        )
    )
    (root / name / "senteval.json").write_text(json.dumps({"scores": {"STSBenchmark": test}}))
    return model


def test_selection_reads_dev_scores_only(tmp_path):
    points = [S.SearchPoint("e", "b", "m", 1, i, {"lr": i}) for i in range(3)]
    devs, tests = [70.0, 75.0, 72.0], [90.0, 10.0, 50.0]
    dirs = [_point_dir(tmp_path, f"p{i}", d, t) for i, (d, t) in enumerate(zip(devs, tests, strict=True))]
    first = S.stage_selection(points, dirs)
    assert first["winner"] == points[1].name and first["winner_dev"] == 75.0
    # every test score changed (the worst dev point now best on test): the same winner
    for i, path in enumerate(dirs):
        (path.parent / "senteval.json").write_text(json.dumps({"scores": {"STSBenchmark": 100.0 - i}}))
    assert S.stage_selection(points, dirs) == first
    # a dev score changed: the winner follows it (the selection does read the dev scores)
    summary = json.loads((dirs[2] / "train_summary.json").read_text())
    (dirs[2] / "train_summary.json").write_text(json.dumps({**summary, "best_dev_spearman": 80.0}))
    assert S.stage_selection(points, dirs)["winner"] == points[2].name


def test_select_ties_and_no_finite_score():
    assert S.select([{"dev": 1.0}, {"dev": 2.0}, {"dev": 2.0}]) == 1
    assert S.select([{"dev": math.nan}, {"dev": None}, {"dev": 0.5}]) == 2
    with pytest.raises(ValueError, match="no point of the stage has a finite dev score"):
        S.select([{"dev": math.nan}])


@pytest.mark.parametrize(
    ("search", "message"),
    [
        (
            {"methods": ["nope"], "stages": [{"grid": {"lr": [1e-5]}}]},
            "search.methods: unknown method 'nope'",
        ),
        (
            {"methods": ["mmhe"], "stages": [{"around": {"lr": {"times": [2]}}}]},
            "stage 1 has no earlier winner",
        ),
        ({"methods": ["mmhe"], "stages": [{"grid": {"precision": ["bf16"]}}]}, "not a searchable setting"),
        (
            {"methods": ["mmhe"], "stages": []},
            "method 'mmhe' has none; give experiments.li2024.search.stages",
        ),
        (
            {"methods": ["mmhe"], "backbones": ["minilm"], "stages": [{"grid": {"lr": [1e-5]}}]},
            "not one of the experiment's backbones",
        ),
        # a search names its methods: none named is an error, not every method of the experiment
        (
            {"stages": [{"grid": {"lr": [1e-5]}}]},
            r"search.methods: name the methods to search \(methods: \[mmhe\]",
        ),
        # an axis the searched loss does not take: named with the method and the fix
        (
            {"methods": ["mmhe"], "stages": [{"grid": {"hp.alpha": [1.0]}}]},
            r"search.stages\[0\].hp.alpha: method 'mmhe' \(loss 'mmhe'\) has no hyperparameter 'alpha'; "
            r"it takes lam, m, tau, r, gd, weight. Give 'mmhe' stages of its own \(per_method.mmhe\)",
        ),
    ],
)
def test_bad_search_is_one_line(search, message):
    demo = _demo()
    with pytest.raises(cl_config.ConfigError, match=message) as error:  # when the config loads
        _with_search(demo, "li2024", search)
    assert "\n" not in str(error.value)


def test_image_experiments_are_refused():
    with pytest.raises(cl_config.ConfigError, match="image experiments are not searchable yet"):
        _with_search(_demo(), "macl_cifar10", {"methods": ["ntxent"], "stages": [{"grid": {"lr": [0.1]}}]})


#: MPT's lr x m grid for nie2023 (8 points, lr 3e-5 / m 0.23 the configured one, shared with the main cell).
MPT_SEARCH = {"methods": ["mpt"], "stages": [{"grid": {"lr": [1e-5, 3e-5, 1e-4, 3e-4], "hp.m": [0.23, 0.3]}}]}


def _point_hours(config: dict, search: dict, cal) -> float:
    """The GPU hours ``cal`` prices the first point of ``search`` beside the shared one at (nie2023)."""
    point = S.search_points(cl_config.Grid(_with_search(config, "nie2023", search)))[1]
    work = cl_flops.cell_work(cl_config.Grid(config), point.cell, point=point)
    return cl_calibration.train_seconds(work, cal) / 3600


def test_budget_keeps_the_points_nearest_the_configured_settings():
    config = _demo()
    cal = cl_calibration.load_calibration(cl_calibration.DEFAULT_CALIBRATION)
    search, one = MPT_SEARCH, _point_hours(config, MPT_SEARCH, cal)
    budget = 2.5 * one  # pays for two points besides the shared one
    trimmed = cl_budget.searched_points(
        cl_config.Grid(_with_search(config, "nie2023", {**search, "budget_gpu_hours": budget})), cal
    )
    names = [p.name for p in trimmed if p.experiment == "nie2023"]
    # distance 0: lr 3e-5, m 0.23 (shared, free); distance 1: lr 1e-5/m 0.23, lr 3e-5/m 0.3, lr 1e-4/m 0.23
    # (grid order breaks the tie): the first two of them fit
    assert names == ["mpt~s1-lr1e-05-m0.23", "mpt~s1-lr3e-05-m0.23", "mpt~s1-lr3e-05-m0.3"]
    stages = [*search["stages"], {"grid": {"hp.m": [0.4]}}]
    with pytest.raises(cl_config.ConfigError, match="budget_gpu_hours"):
        tiny = _with_search(config, "nie2023", {**search, "stages": stages, "budget_gpu_hours": 1e-9})
        cl_budget.searched_points(cl_config.Grid(tiny), cal)


def test_a_measured_calibration_changes_no_pinned_search(tmp_path):
    """A faster calibration buys more points, but not once a run has pinned them, until the search changes."""
    import dataclasses

    config = _demo()
    config["results_dir"] = str(tmp_path / "results")
    cal = cl_calibration.load_calibration(cl_calibration.DEFAULT_CALIBRATION)
    search, one = MPT_SEARCH, _point_hours(config, MPT_SEARCH, cal)
    config = _with_search(config, "nie2023", {**search, "budget_gpu_hours": 2.5 * one})
    faster = dataclasses.replace(  # every job four times shorter, FLOPs and overheads alike
        cal,
        achieved_tflops={k: {p: 4 * v for p, v in d.items()} for k, d in cal.achieved_tflops.items()},
        overheads_s={k: v / 4 for k, v in cal.overheads_s.items()},
    )

    def names(grid, cal, pins=None):
        return [p.name for p in cl_budget.searched_points(grid, cal, pins=pins) if p.experiment == "nie2023"]

    grid = cl_config.Grid(config)
    first = names(grid, cal, cl_budget.pinned(grid))
    assert len(first) == 3 and cl_budget.pinned(grid) == {}
    assert len(names(grid, faster)) > 3  # unpinned: the budget buys more
    cl_budget.write_pins(grid, cl_budget.searched_points(grid, cal))  # the workflow's onstart
    assert names(grid, faster, cl_budget.pinned(grid)) == first
    # A changed budget is a changed search: priced afresh.
    bigger = cl_config.Grid(_with_search(config, "nie2023", {**search, "budget_gpu_hours": 2.6 * one}))
    assert len(names(bigger, faster, cl_budget.pinned(bigger))) > 3


def test_plan_prices_the_searches():
    config = _demo()
    cal = cl_calibration.load_calibration(cl_calibration.DEFAULT_CALIBRATION)
    grid = cl_config.Grid(config)
    base = plan.make_plan(grid, cal)
    # the demo runs its searches with everything (searches.in_all)
    jobs = plan.make_plan(grid, cal, points=cl_budget.plan_points(grid, cal))
    added = [j for j in jobs if j.experiment.endswith("(search)")]
    # 6 points of their own (1 of the 2x2 and 1 of stage 1 are configured cells) + 2 winners evaluated
    assert sorted(j.rule for j in added) == ["search_encode"] * 2 + ["train"] * 6
    assert len(jobs) == len(base) + len(added)
    assert all(j.seconds["config"] > 0 for j in added)
    apart = cl_config.Grid({**config, "searches": {"in_all": False}})
    assert cl_budget.plan_points(apart, cal) == []  # not in the default target: not in the plan
    points = cl_budget.searched_points(apart, cal)
    blocks = plan.search_plan_blocks(points, plan.search_jobs(apart, cal, "config", points), cal, "config")
    assert "8 search points (2 of them configured cells" in to_markdown(blocks)


def test_paper_scale_searches_are_priced():
    config = cl_config.load(REPO_ROOT / "config.yaml")
    points = S.search_points(cl_config.Grid(config))
    stages = Counter((p.experiment, p.stage) for p in points)
    # Nie A.3: 16 lr x batch points x 7 losses x 4 backbones; stage 2: the losses' ranges
    # (3 + 3 + 135 + 11 + 16 + 11 + 11 = 190 per backbone). Li A.4: 16 x 4 losses x 2 backbones;
    # stage 2: 60 (MHS: 20) per loss and backbone.
    assert stages == {("nie2023", 1): 448, ("nie2023", 2): 760, ("li2024", 1): 128, ("li2024", 2): 400}
    assert sum(p.shared_with is not None for p in points) == 28  # each Nie cell lies on its lr x batch grid
    grid, cal = cl_config.Grid(config), cl_calibration.load_calibration(cl_calibration.DEFAULT_CALIBRATION)
    points = cl_budget.searched_points(grid, cal)
    jobs = plan.search_jobs(grid, cal, "config", points)
    lines = to_markdown(plan.search_plan_blocks(points, jobs, cal, "config"))
    assert "| nie2023 (search) | 1208 |" in lines and "| li2024 (search) | 536 |" in lines
    docs = " ".join((REPO_ROOT / "docs" / "reproduction.md").read_text().split())  # the hours it quotes
    hours = (plan.total_hours(jobs, choice) for choice in ("config", "bf16"))
    assert "about {:.0f} GPU-hours as configured, {:.0f} all bf16".format(*hours) in docs


def test_selection_table_against_published(tmp_path):
    config = _nie_search(["mpt"], ["bert-base"], [{"grid": {"lr": [1e-5, 3e-5], "hp.m": [0.23, 0.3]}}])
    assert published_hparams("nie2023", "bert-base", "mpt") == {"hp.m": 0.23, "lr": 1e-5, "batch_size": 64}
    assert {r["verdict"] for r in selection_rows(cl_config.Grid(config), tmp_path, "nie2023")} == {NOT_RUN}
    settings = {"lr": 1e-5, "batch_size": 64, "loss_hp": {"m": 0.3}}
    points = [
        {"settings": {**settings, "lr": lr, "loss_hp": {"m": m}}} for lr in (1e-5, 3e-5) for m in (0.23, 0.3)
    ]
    _write_selection(tmp_path, {"winner_settings": settings, "winner_dev": 80.0, "points": points})
    rows = _rows(config, tmp_path)
    assert rows["lr"]["verdict"] == SAME and rows["lr"]["tried"] == "1e-05, 3e-05"
    assert rows["hp.m"]["verdict"] == DIFFERS and rows["hp.m"]["selected"] == "0.3"
    assert rows["hp.m"]["published"] == "0.23" and rows["hp.m"]["configured"] == "0.23"


def test_heatmap_plots_every_point_and_marks_the_winner(tmp_path):
    from contrastlab.figures.search import search_figure

    points = [
        {
            "name": f"mpt~s1-lr{lr:g}-m{m:g}",
            "grid": {"lr": lr, "hp.m": m},
            "around": {},
            "dev": dev,
            "settings": {"lr": lr, "loss_hp": {"m": m}},
        }
        for (lr, m), dev in zip(
            [(1e-5, 0.23), (1e-5, 0.3), (3e-5, 0.23), (3e-5, 0.3)], [80.0, 79.0, 81.5, 78.0], strict=True
        )
    ]
    selection = {
        "backbone": "bert-base",
        "method": "mpt",
        "stage": 1,
        "points": points,
        "winner": points[2]["name"],
    }
    _write_selection(tmp_path, selection)
    written = search_figure(tmp_path, "nie2023", tmp_path / "fig" / "search")
    assert sorted(p.suffix for p in written) == [".csv", ".pdf", ".png"]
    plotted = pd.read_csv(tmp_path / "fig" / "search.csv")
    assert len(plotted) == 4 and plotted["dev"].tolist() == [80.0, 79.0, 81.5, 78.0]
    assert plotted.loc[plotted["winner"], "point"].tolist() == ["mpt~s1-lr3e-05-m0.23"]


def test_heatmap_keeps_and_marks_a_diverged_point(tmp_path, monkeypatch):
    """A point whose training diverged (dev None, search.record_diverged: "the figures mark it") stays in
    the CSV and its cell says "diverged", even alone on its learning rate."""
    from contrastlab.figures import search as search_figures

    points = [
        {"name": f"p{lr:g}", "grid": {"lr": lr}, "around": {}, "dev": dev, "settings": {"lr": lr}}
        for lr, dev in ((1e-5, 80.0), (1e-2, None))
    ]
    selection = {"backbone": "bert-base", "method": "mpt", "stage": 1, "points": points, "winner": "p1e-05"}
    _write_selection(tmp_path, selection)
    drawn = []
    monkeypatch.setattr(search_figures, "save", lambda fig, stem, data: drawn.append((fig, data)) or [])
    search_figures.search_figure(tmp_path, "nie2023", tmp_path / "search")
    fig, data = drawn[0]
    assert data.set_index("point")["dev"].isna().to_dict() == {"p1e-05": False, "p0.01": True}
    assert [t.get_text() for t in fig.axes[0].texts] == ["80.0", "diverged"]


def test_a_diverged_point_is_passed_over(tmp_path):
    points = [S.SearchPoint("e", "b", "m", 1, i, {"lr": i}) for i in range(2)]
    good = _point_dir(tmp_path, "good", 70.0, 0.0)
    S.record_diverged(tmp_path / "bad" / "model", tmp_path / "bad" / "log.jsonl", {"lr": 1e12}, "loss nan")
    selection = S.stage_selection(points, [tmp_path / "bad" / "model", good])
    assert selection["winner"] == points[1].name
    assert selection["points"][0]["dev"] is None and selection["points"][0]["diverged"] == "loss nan"


def _nie_search(methods: list[str], backbones: list[str], stages: list[dict]) -> dict:
    search = {"methods": methods, "backbones": backbones, "stages": stages}
    return _with_search(cl_config.load(REPO_ROOT / "config.yaml"), "nie2023", search)


def _write_selection(tmp_path, selection: dict, backbone: str = "bert-base", method: str = "mpt", k: int = 1):
    """Write ``selection`` as stage ``k``'s selection file of the nie2023 search of ``method`` on
    ``backbone``."""
    write_text(tmp_path / "search" / "nie2023" / backbone / method / f"stage{k}.json", json.dumps(selection))


def _write_stage(tmp_path, backbone: str, method: str, k: int, points: list[tuple[dict, float]], winner: int):
    rows = [{"settings": settings, "dev": dev} for settings, dev in points]
    selection = {
        "winner_settings": rows[winner]["settings"],
        "winner_dev": rows[winner]["dev"],
        "points": rows,
    }
    _write_selection(tmp_path, selection, backbone, method, k)


def _rows(config: dict, tmp_path, metrics=None) -> dict[str, dict]:
    """The nie2023 selection table's rows by searched setting."""
    return {r["setting"]: r for r in selection_rows(cl_config.Grid(config), tmp_path, "nie2023", metrics)}


def _dev_metrics(values: dict[str, list[float]], backbone: str = "bert-base"):
    """Configured cells' best STS-B dev Spearman per seed (the dev noise's pool)."""
    return scores_frame(
        [
            ("nie2023", backbone, method, seed, "best_dev_spearman", v)
            for method, vs in values.items()
            for seed, v in zip((42, 43, 44), vs, strict=True)
        ]
    )


def test_published_point_within_the_winners_dev_noise_counts_as_matched(tmp_path):
    """Dev noise: pooled seed std s of the configured cells' dev score (cl 80, 81, 82; mpt 79, 80, 81:
    s = 1, ν = 4), half-width of a two-point difference t_{4,0.975} · s · √2 = 3.9265. The published m
    (0.23) scored 3.9 below the winner (0.3): same within dev noise; 4.0 below: differs."""
    from contrastlab.tables.search import SAME_NOISE, dev_noise

    config = _nie_search(["mpt"], ["bert-base"], [{"grid": {"hp.m": [0.23, 0.3]}}])
    metrics = _dev_metrics({"cl": [80.0, 81.0, 82.0], "mpt": [79.0, 80.0, 81.0]})
    noise, df = dev_noise(metrics, "nie2023", "bert-base")
    assert df == 4 and noise == pytest.approx(2.7764451051977987 * math.sqrt(2), rel=1e-9)
    base = {"lr": 1e-5, "batch_size": 64}
    for gap, verdict in ((3.9, SAME_NOISE), (4.0, DIFFERS)):
        points = [({**base, "loss_hp": {"m": 0.23}}, 80.0 - gap), ({**base, "loss_hp": {"m": 0.3}}, 80.0)]
        _write_stage(tmp_path, "bert-base", "mpt", 1, points, winner=1)
        row = _rows(config, tmp_path, metrics)["hp.m"]
        assert row["verdict"] == verdict, gap
        assert row["published − winner (dev)"] == f"{-gap:+.2f} (noise ± 3.93)"
    # without a noise estimate (one seed per cell) the exact rule is all that is left
    one_seed = _dev_metrics({"cl": [80.0, math.nan, math.nan]})
    row = _rows(config, tmp_path, one_seed)["hp.m"]
    assert row["verdict"] == DIFFERS and row["published − winner (dev)"] == "-4.00"


def test_published_values_outside_the_papers_grid_are_flagged(tmp_path):
    """Nie Table 2 prints L_dcl τ 0.01 on BERT-large, outside A.3's {0.03, 0.05, 0.07}: the search can
    never select it, so the row says so instead of "differs"."""
    from contrastlab.tables.search import OFF_GRID, off_grid

    config = _nie_search(
        ["dcl"], ["bert-large"], [{"grid": {"lr": [5e-5]}}, {"grid": {"hp.tau": [0.03, 0.05, 0.07]}}]
    )
    stage1 = [({"lr": 5e-5, "batch_size": 64, "loss_hp": {"tau": 0.01}}, 80.0)]
    _write_stage(tmp_path, "bert-large", "dcl", 1, stage1, winner=0)
    stage2 = [
        ({"lr": 5e-5, "batch_size": 64, "loss_hp": {"tau": t}}, 80.0 + i)
        for i, t in enumerate((0.03, 0.05, 0.07))
    ]
    _write_stage(tmp_path, "bert-large", "dcl", 2, stage2, winner=2)
    rows = _rows(config, tmp_path)
    assert rows["hp.tau"]["verdict"] == OFF_GRID and rows["hp.tau"]["published"] == "0.01 (off grid)"
    assert rows["hp.tau"]["off_grid"] and not rows["lr"]["off_grid"] and rows["lr"]["verdict"] == SAME
    assert off_grid([{"grid": {"hp.tau": [0.03]}}], "hp.tau", 0.2)
    assert not off_grid([{"around": {"hp.tau": {"plus": [0.01]}}}], "hp.tau", 0.2)  # relative: no grid


def test_mat_margin_prints_in_units_of_pi(tmp_path):
    config = _nie_search(["mat"], ["bert-base"], [{"grid": {"hp.m": [0.15, 0.2]}}])
    points = [
        ({"lr": 1e-5, "batch_size": 128, "loss_hp": {"m": m}}, dev) for m, dev in ((0.15, 81.0), (0.2, 80.0))
    ]
    _write_stage(tmp_path, "bert-base", "mat", 1, points, winner=0)
    (row,) = selection_rows(cl_config.Grid(config), tmp_path, "nie2023")
    assert (row["tried"], row["selected"], row["configured"], row["published"]) == (
        "0.15π, 0.2π", "0.15π", "0.15π", "0.15π")  # fmt: skip
    assert row["verdict"] == SAME


@pytest.mark.parametrize(
    "select",
    [
        {"experiments": ["nie2023"], "backbones": ["tiny-bert"], "methods": ["cl"], "seeds": [43, 44]},
        {"methods": ["cl"]},  # the twin's method left out, its seed kept
        {"seeds": [43]},  # the twin's seed left out, its method kept
    ],
    ids=["add-seeds", "method", "seed"],
)
def test_a_select_that_leaves_the_twin_out_still_shares_it(select):
    """A stage-1 point still shares its configured twin when ``select`` leaves that cell out."""
    config = _demo()
    config["experiments"]["nie2023"]["seeds"] = [42, 43, 44]  # what the add-seeds line's --config sets
    config["select"] = select
    nie = [
        p for p in S.search_points(cl_config.Grid(cl_config.validate(config))) if p.experiment == "nie2023"
    ]
    assert [(p.name, p.shared_with) for p in nie] == DEMO_NIE_POINTS
    assert nie[0].cell == cl_config.Cell("nie2023", "tiny-bert", "mpt", 42)
