"""Two runs side by side (``make compare``; contrastlab.report.compare): differences the seeds explain
are within noise, a mutated loss's cells are flagged, the claims' verdicts sit side by side."""

from __future__ import annotations

import json
import runpy
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from contrastlab.paths import REPO_ROOT
from contrastlab.report.compare import DIFFERS, NO_NOISE, ONLY_A, WITHIN, cell_table, compare_runs
from tests.tables.tables_synthetic import scores_frame

METHODS = ["cl", "mpt", "met", "au", "mat", "mmhe", "mhs", "baseline"]
TASKS = ["STS12", "STS13", "STS14", "STS15", "STS16", "sts_avg"]


def scores(seeds, rng, shift=None) -> pd.DataFrame:
    """scores.csv of one run: every method and task of nie2023 on tiny-bert, a true score per cell plus
    seed noise (σ 0.5); ``shift``: method -> points added to that method's cells (a mutated loss)."""
    truth = {(m, t): 60 + 3 * i + j for i, m in enumerate(METHODS) for j, t in enumerate(TASKS)}
    return scores_frame(
        ("nie2023", "tiny-bert", m, seed, t, truth[(m, t)] + rng.normal(0, 0.5) + (shift or {}).get(m, 0.0))
        for seed in seeds
        for (m, t) in truth
    )


def write_run(root, frame: pd.DataFrame, verdicts: dict[str, str]):
    (root / "tables").mkdir(parents=True)
    frame.to_csv(root / "tables" / "scores.csv", index=False)
    claims = pd.DataFrame(
        [dict(id=i, experiment="nie2023", verdict=v, parts_run=1, parts=1) for i, v in verdicts.items()]
    )
    claims.to_csv(root / "tables" / "claims.csv", index=False)
    return root


def test_one_seed_per_cell_within_noise_and_a_mutated_loss_flagged(tmp_path):
    """Two demo-like runs of one seed each (42 against 43): every difference is seed noise; then run B's
    mpt cells moved by 10 points (20 σ of a single score): those six cells, and only those, differ."""
    rng = np.random.default_rng(0)
    a = write_run(tmp_path / "a", scores([42], rng), {"nie-x": "undecided", "nie-y": "not run"})
    b = write_run(tmp_path / "b", scores([43], rng), {"nie-x": "undecided", "nie-y": "not run"})
    assert compare_runs(a, b, tmp_path) == tmp_path / "compare.md"  # OUT=<a folder>: was IsADirectoryError
    report = compare_runs(a, b).read_text()
    assert "48 table cells: 48 within noise, 0 differs" in report and "0 of 2 claims change" in report
    assert "None: the seeds' noise explains every difference." in report
    mutated = write_run(
        tmp_path / "m", scores([43], np.random.default_rng(1), {"mpt": 10.0}), {"nie-x": "reproduced"}
    )
    report = compare_runs(a, mutated, tmp_path / "out.md").read_text()
    cells = pd.read_csv(tmp_path / "out.csv")
    assert set(cells[cells.verdict == DIFFERS].method) == {"mpt"} and (cells.verdict == DIFFERS).sum() == 6
    assert "| nie2023 | tiny-bert | mpt | STS12 |" in report
    assert "| nie-x | undecided | reproduced | **no** |" in report
    assert "| nie-y | not run | — | **no** |" in report


def test_several_seeds_use_the_pooled_seed_noise():
    """Three seeds per cell: σ pooled over the cells of the task in both runs (STS12: 8 methods × 2 runs ×
    2 df = 32), the difference's half-width t · σ · √(2/3), Bonferroni over the 47 cells both runs have;
    a cell B lacks is "only in A"."""
    rng = np.random.default_rng(2)
    a, b = scores([1, 2, 3], rng), scores([4, 5, 6], rng)
    cells = cell_table(a, b[~((b.method == "au") & (b.task == "STS16"))])
    assert cells.set_index(["method", "task"]).loc[("au", "STS16"), "verdict"] == ONLY_A
    both = cells[cells.verdict != ONLY_A]
    assert set(both.verdict) == {WITHIN}
    row = both[both.task == "STS12"].iloc[0]
    assert row.noise == "seeds pooled over 8 cells (df 32)"
    variances = [f[f.task == "STS12"].groupby("method").score.var().sum() for f in (a, b)]
    q = stats.t.ppf(1 - 0.05 / (2 * 47), 32)
    assert row.half_width == pytest.approx(q * np.sqrt(2 * sum(variances) / 32) * np.sqrt(2 / 3), rel=1e-9)


def test_too_few_cells_have_no_noise_estimate():
    rng = np.random.default_rng(3)
    a, b = scores([42], rng), scores([43], rng)
    keep = a.method.isin(["cl", "mpt"])  # two cells per task, one seed each: fewer than 6
    assert set(cell_table(a[keep], b[keep]).verdict) == {NO_NOISE}
    # the same number twice needs no estimate
    assert set(cell_table(a[keep], a[keep]).verdict) == {WITHIN}


def test_the_script_takes_the_two_folders_and_names_a_missing_file(tmp_path, capsys, monkeypatch):
    rng = np.random.default_rng(0)
    a = write_run(tmp_path / "a", scores([42], rng), {"nie-x": "undecided"})
    b = write_run(tmp_path / "b", scores([43], rng), {"nie-x": "undecided"})
    monkeypatch.setattr(sys, "argv", ["compare.py", str(a), str(b)])
    with pytest.raises(SystemExit) as done:
        runpy.run_path(str(REPO_ROOT / "scripts" / "compare.py"), run_name="__main__")
    assert done.value.code == 0 and f"wrote {b / 'compare.md'}" in capsys.readouterr().out
    (b / "tables" / "claims.csv").unlink()  # the same command again
    with pytest.raises(SystemExit) as done:
        runpy.run_path(str(REPO_ROOT / "scripts" / "compare.py"), run_name="__main__")
    err = capsys.readouterr().err
    assert done.value.code == 1 and err.startswith("contrastlab: ")
    assert "claims.csv is missing: run the tables job" in err
    with pytest.raises(FileNotFoundError, match=r"^/no/run is not a folder: name a run's results folder"):
        compare_runs("/no/run", b)  # a typo in A=: no tables job makes that folder
    with pytest.raises(ValueError, match=r"needs two results folders: make compare A=<results> B=<results>"):
        compare_runs("", b)  # `make compare B=<run>`: A="" would read the working directory's tables


DEMO_SCORES = Path(__file__).parent / "data" / "demo-scores.csv.gz"
#: Each demo's search winners, per stage (results/<run>/search/<experiment>/tiny-bert/<method>/stage<k>.json):
#: under seed 43 both searches picked lr 1e-4 where seed 42 picked 3e-5.
DEMO_WINNERS = {
    "demo": {
        ("nie2023", "mpt"): [{"lr": 3e-05, "hp.m": 0.23}],
        ("li2024", "mmhe"): [{"lr": 3e-05}, {"hp.r": 1.25}],
    },
    "demo43": {
        ("nie2023", "mpt"): [{"lr": 0.0001, "hp.m": 0.23}],
        ("li2024", "mmhe"): [{"lr": 0.0001}, {"hp.r": 1.25}],
    },
}


def demo_run(root, run: str, shift: float = 0.0):
    """A results folder with the scores of ``make demo`` ("demo", seed 42) or with seeds [43] ("demo43"),
    from tests/report/data/demo-scores.csv.gz, their searches' winners and one claim; ``shift``: points
    added to every score of nie2023's L_mpt on tiny-bert, a mutated loss."""
    frame = pd.read_csv(DEMO_SCORES)
    frame = frame[frame.run == run].drop(columns="run")
    mutated = (frame.experiment == "nie2023") & (frame.backbone == "tiny-bert") & (frame.method == "mpt")
    frame.loc[mutated & (frame.task != "dev_uniformity_rebound"), "score"] += shift
    write_run(root, frame, {"nie-x": "undecided"})
    for (experiment, method), stages in DEMO_WINNERS[run].items():
        for k, grid in enumerate(stages, 1):
            name = f"{method}~s{k}-" + "-".join(f"{a}{v}" for a, v in grid.items())
            path = root / "search" / experiment / "tiny-bert" / method / f"stage{k}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(
                json.dumps({"winner": name, "points": [{"name": name, "grid": grid, "around": {}}]})
            )
    return root


def test_the_two_demos_differ_within_noise_and_in_the_searches_choices(tmp_path):
    """The demo against its seed-43 twin: all 299 tested cells within noise, 38 searched ones a setting."""
    report = compare_runs(demo_run(tmp_path / "a", "demo"), demo_run(tmp_path / "b", "demo43")).read_text()
    assert (
        "397 table cells: 345 within noise, 0 differs, 38 different setting, 14 no noise estimate, "
        "0 only in A, 0 only in B." in report
    )
    assert "B − A tested against the seeds' noise in 299 cells, decided over the family: Bonferroni" in report
    assert "None: the seeds' noise explains every difference." in report
    assert (
        "- nie2023 / tiny-bert / mpt~searched (19 cells): the search chose lr 3e-05, hp.m 0.23 in A, "
        "lr 0.0001, hp.m 0.23 in B." in report
    )
    assert (
        "- li2024 / tiny-bert / mmhe~searched (19 cells): the search chose lr 3e-05, hp.r 1.25 in A" in report
    )


def test_a_loss_moved_2_5_points_on_the_demo_is_flagged_and_only_it(tmp_path):
    """The seed-43 demo with L_mpt's 18 scores on tiny-bert moved by 2.5 points: only L_mpt's cells differ,
    those whose task's one-seed noise is under ~2 points (6 of 18; STS12's ±4.7 hides such a shift, one
    seed per cell cannot tell it)."""
    a, b = demo_run(tmp_path / "a", "demo"), demo_run(tmp_path / "b", "demo43", shift=2.5)
    compare_runs(a, b, tmp_path / "out.md")
    cells = pd.read_csv(tmp_path / "out.csv")
    flagged = cells[cells.verdict == DIFFERS]
    losses = set(zip(flagged.experiment, flagged.backbone, flagged.method, strict=True))
    assert losses == {("nie2023", "tiny-bert", "mpt")}
    assert sorted(flagged.task) == ["MPQA", "MRPC", "SICKRelatedness", "STS14", "STS16", "sts_avg"]
    assert (flagged["diff"] - flagged.half_width > 0).all()


def test_a_broken_search_selection_is_named_with_its_fix(tmp_path):
    a, b = demo_run(tmp_path / "a", "demo"), demo_run(tmp_path / "b", "demo43")
    broken = b / "search" / "nie2023" / "tiny-bert" / "mpt" / "stage1.json"
    broken.write_text('{"winner": ')  # a selection cut short
    with pytest.raises(
        ValueError, match=r"stage1.json is not JSON .*: run that run's search_select job again"
    ):
        compare_runs(a, b)
    assert not (b / "compare.md").exists()
