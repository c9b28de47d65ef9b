"""Li Fig. 4 against its closed forms; the figures drawn from the trainer's geometry records (Li Fig. 5,
7, 8a-c, 9; Nie Fig. 3a-e) on logs written with the real statistics of known vectors, each by its
registered function as its job calls it; Li Fig. 6 and Nie Fig. 3a from their sweep cells' logs and
metrics."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F

from contrastlab.config import sweep_points
from contrastlab.figures import geometry_logs, li2024
from contrastlab.figures.catalog import RECORD_FIGURES
from contrastlab.figures.registry import drawing
from contrastlab.figures.sweeps import best_dev_frame, plot_sweep_panels, sweep_metrics_frame
from contrastlab.paths import Results
from contrastlab.training import geometry
from tests.images import assert_nontrivial_png


# ------------------------------------------------------------------------------------------- Li Fig. 4
def test_ratio_grid_equals_the_closed_forms_and_masks_what_does_not_occur():
    frame = li2024.ratio_grid(points=7)
    assert len(frame) == 3 * 7 * 7
    at = frame.set_index(["loss", "mu_pos", "mu_neg"])
    mu_pos = li2024.grid(li2024.MU_POS_RANGE, 7)
    mu_neg = li2024.grid(li2024.MU_NEG_RANGE, 7)
    p, n = mu_pos[3], mu_neg[3]  # 0.275π and 0.525π
    u = math.pi / 18
    assert at.loc[("arccon", p, n), "ratio"] == pytest.approx(math.sin(p + u) / math.sin(p), rel=1e-12)
    assert at.loc[("met", p, n), "ratio"] == pytest.approx(
        math.sqrt(2 - 2 * math.cos(n)) / math.sqrt(2 - 2 * math.cos(p)), rel=1e-12
    )
    assert at.loc[("mat", p, n), "ratio"] == pytest.approx(math.sin(n) / math.sin(p), rel=1e-12)
    # equal angles: MET's and MAT's ratios are 1 (same distance / same sine)
    assert at.loc[("met", mu_pos[0], mu_neg[0]), "ratio"] == pytest.approx(1.0)
    assert at.loc[("mat", mu_pos[0], mu_neg[0]), "ratio"] == pytest.approx(1.0)
    # μ_pos > μ_neg never occurs; a far negative has dissipated every loss's gradient
    assert not frame[(frame["mu_pos"] > frame["mu_neg"])]["occurs"].any()
    far = frame[(frame["mu_pos"] == mu_pos[0]) & (frame["mu_neg"] == mu_neg[-1])]
    assert not far["occurs"].any()
    # MET occurs exactly where its distance gap is below m = 0.45 (and μ_pos <= μ_neg)
    met = frame[frame["loss"] == "met"]
    gap = np.sqrt(2 - 2 * np.cos(met["mu_neg"])) - np.sqrt(2 - 2 * np.cos(met["mu_pos"]))
    assert (met["occurs"] == ((gap < 0.45) & (met["mu_pos"] <= met["mu_neg"]))).all()
    # ArcCon: GD of 127 negatives at μ_neg against cos(μ_pos + u), below 0.01 = dissipated
    arccon = frame[frame["loss"] == "arccon"]
    gd = 1 / (
        1 + np.exp(np.cos(arccon["mu_pos"] + u) / 0.05) / (127 * np.exp(np.cos(arccon["mu_neg"]) / 0.05))
    )
    assert (arccon["occurs"] == ((gd >= 0.01) & (arccon["mu_pos"] <= arccon["mu_neg"]))).all()


def test_ratio_grid_figure(tmp_path):
    written = li2024.plot_ratio_grid(li2024.ratio_grid(points=20), tmp_path / "fig4")
    assert_nontrivial_png(written[0])
    assert len(pd.read_csv(written[2])) == 3 * 400


# ------------------------------------------------------------------------------- log-based figures
CONFIG = {
    "experiments": {
        "li2024_conjectures": {"methods": {"baseline": {"loss": "paradigm"}, "no_gd": {"loss": "paradigm"}}},
        "li2024_fig6_r": {"sweep": {"hp.r": [0.25, 2.0]}, "methods": {"baseline": {"loss": "paradigm"}}},
        "li2024_fig6_tau": {"sweep": {"hp.tau": [0.05, 3.0]}, "methods": {"baseline": {"loss": "paradigm"}}},
        "nie2023": {"methods": {"cl": {"loss": "infonce"}, "dcl": {"loss": "dcl"}}},
        "nie2023_fig3": {"sweep": {"hp.m": [0.1, 0.8]}, "methods": {"mpt": {"loss": "mpt"}}},
    }
}


def _points(experiment: str) -> dict[str, tuple[str, float]]:
    return sweep_points(CONFIG["experiments"][experiment]) if experiment in CONFIG["experiments"] else {}


#: The figures drawn from the geometry records.
GEOMETRY_FIGURES = (
    "li2024/li2024_fig5",
    "li2024/li2024_fig7",
    "li2024/li2024_fig8a",
    "li2024/li2024_fig8b",
    "li2024/li2024_fig8c",
    "li2024/li2024_fig9",
    "nie2023/nie2023_fig3b",
    "nie2023/nie2023_fig3cde",
)


def _draw(name: str, results, stem):
    """The figure's registered function as scripts/figure_cells.py calls it: with its record's experiments
    and their sweep points."""
    experiments = RECORD_FIGURES[name].experiments
    points = {e: _points(e) for e in experiments}
    return drawing(name).draw(Results(results), stem, experiments=list(experiments), points=points)


CELLS = {
    "li2024_conjectures": ("baseline", "no_gd"),
    "li2024_fig6_r": ("baseline-r0.25", "baseline-r2.0"),
    "nie2023": ("cl", "dcl"),
    "nie2023_fig3": ("mpt-m0.1", "mpt-m0.8"),
}


def _record(step: int, spread: float) -> dict:
    """A geometry record of real statistics: the positives drift towards their anchors with the step."""
    gen = torch.Generator().manual_seed(step)
    z1 = F.normalize(torch.randn(32, 8, generator=gen, dtype=torch.float64), dim=-1)
    z2 = F.normalize(
        z1 + spread / (1 + step) * torch.randn(32, 8, generator=gen, dtype=torch.float64), dim=-1
    )
    stats = geometry.finalize(geometry.batch_sums(z1, z2), (z1, z2))
    return {"event": "geometry", "step": step, "probe_sentences": 32, "probe_heldout": True, **stats}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    root = tmp_path_factory.mktemp("results")
    for experiment, methods in CELLS.items():
        for k, method in enumerate(methods):
            log = root / "checkpoints" / experiment / "bert-base" / method / "seed42" / "train_log.jsonl"
            log.parent.mkdir(parents=True)
            records = [{"event": "start"}] + [_record(step, 0.8 + k) for step in (0, 10, 20)]
            log.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    return root


@pytest.mark.parametrize("name", GEOMETRY_FIGURES)
def test_every_log_figure_is_drawn_from_the_records(results, tmp_path, name):
    written = _draw(name, results, tmp_path / name.replace("/", "_"))
    assert [p.suffix for p in written] == [".png", ".pdf", ".csv"]
    assert_nontrivial_png(written[0])
    assert len(pd.read_csv(written[2])) > 0


def test_fig7_compares_the_backbone_with_the_trained_model(results, tmp_path):
    written = _draw("li2024/li2024_fig7", results, tmp_path / "fig7")
    data = pd.read_csv(written[2])
    assert set(data["when"]) == {"before training", "after training"}
    before = data[data["when"] == "before training"].set_index("tau")["share"]
    assert before[0.05] == pytest.approx(_record(0, 0.8)["hardest_share"]["0.05"])
    assert set(data["tau"]) == set(geometry.SHARE_TAUS)


def test_fig5_densities_integrate_to_one(results, tmp_path):
    written = _draw("li2024/li2024_fig5", results, tmp_path / "fig5")
    data = pd.read_csv(written[2])
    for _, curve in data.groupby(["method", "pair"]):
        assert curve["density"].sum() * (2.0 / geometry.HIST_BINS) == pytest.approx(1.0)


def test_fig8c_lines_are_named_by_the_swept_ratio(results, tmp_path):
    stem = tmp_path / "fig8c"
    _draw("li2024/li2024_fig8c", results, stem)
    data = pd.read_csv(f"{stem}.csv")
    assert set(data["method"]) == {"baseline-r0.25", "baseline-r2.0"} and set(data["key"]) == {"cos_pos"}


def _margin_sweep(metrics_root):
    """Nie Fig. 3's margin sweep's metrics under ``metrics_root`` (STS.Avg 74 at m 0.1, 71 at m 0.8), as
    :func:`sweep_metrics_frame` reads them."""
    for m, sts in ((0.1, 74.0), (0.8, 71.0)):
        path = metrics_root / "nie2023_fig3/bert-base" / f"mpt-m{m}" / "seed42/senteval.json"
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps({"sts_avg": sts, "tr_avg": 85.0, "tr_devacc_avg": 86.0}))
    return sweep_metrics_frame(metrics_root, "nie2023_fig3", _points("nie2023_fig3"))


def test_fig3a_gap_axis_is_each_cells_last_distance_gap(results, tmp_path):
    by_m = _margin_sweep(tmp_path / "metrics")
    by_gap = geometry_logs.with_gap(by_m, results / "checkpoints", "nie2023_fig3")
    assert len(by_gap) == len(by_m) == 4 and set(by_gap["param"]) == {"d_ij"}
    assert by_gap[by_gap["method"] == "mpt-m0.1"]["value"].iloc[0] == pytest.approx(_record(20, 0.8)["d_gap"])
    # the figure's TR.Avg is the transfer probes' devacc, which Nie's evaluation prints (Table 1's too)
    (tmp_path / "checkpoints").symlink_to(results / "checkpoints")
    _draw("nie2023/nie2023_fig3", tmp_path, tmp_path / "fig3")
    drawn = pd.read_csv(tmp_path / "fig3.csv")
    assert set(drawn["key"]) == {"sts_avg", "tr_devacc_avg"}
    assert set(drawn.loc[drawn["key"] == "tr_devacc_avg", "score"]) == {86.0}


# ------------------------------------------------------------------------------- sweep figures
def test_sweep_points_name_the_swept_value():
    assert sweep_points(CONFIG["experiments"]["li2024_fig6_tau"]) == {
        "baseline-tau0.05": ("tau", 0.05),
        "baseline-tau3.0": ("tau", 3.0),
    }


def test_best_dev_and_metrics_frames_and_the_plot(tmp_path):
    for tau, dev in ((0.05, [70.0, 81.5, 80.0]), (3.0, [70.0, 55.0])):
        log = tmp_path / f"checkpoints/li2024_fig6_tau/bert-base/baseline-tau{tau}/seed42/train_log.jsonl"
        log.parent.mkdir(parents=True)
        records = [{"event": "start"}] + [
            {"event": "eval", "step": 125 * i, "dev_spearman": s} for i, s in enumerate(dev)
        ]
        log.write_text("\n".join(map(json.dumps, records)))
    dev = best_dev_frame(tmp_path / "checkpoints", "li2024_fig6_tau", _points("li2024_fig6_tau"))
    assert dev.set_index("value")["score"].to_dict() == {0.05: 81.5, 3.0: 70.0}  # the best evaluation
    metrics = _margin_sweep(tmp_path / "metrics")
    assert len(metrics) == 4 and metrics[metrics["key"] == "sts_avg"]["score"].tolist() == [74.0, 71.0]
    written = plot_sweep_panels(
        {"weight τ": dev, "margin": metrics}, tmp_path / "fig", ylabel="score", log_x=["weight τ"]
    )
    plotted = pd.read_csv(written[2])
    assert set(plotted["panel"]) == {"weight τ", "margin"} and len(plotted) == 6
    assert written[0].stat().st_size > 10_000
    assert plotted[plotted["panel"] == "weight τ"]["score"].tolist() == pytest.approx([81.5, 70.0])


def test_fig3b_with_more_runs_than_colours_draws_each_run_apart(tmp_path, drawn):
    """Nie Fig. 3b in the full grid draws 28 runs (4 backbones x 7 losses) with a palette of 8 colours:
    each legend entry must still look unlike every other."""
    rows = [("bert-base", f"m{i}", 42, step, "d_gap", float(i + step)) for i in range(9) for step in (0, 10)]
    frame = pd.DataFrame(rows, columns=["backbone", "method", "seed", "step", "key", "value"])
    geometry_logs.plot_step_panels(frame, tmp_path / "fig3b", {"distance gap d_ij": {"d_gap": ""}})
    looks = [(h.get_color(), h.get_linestyle()) for h in drawn[0].axes[0].get_legend().legend_handles]
    assert len(looks) == 9 and len(set(looks)) == 9


def test_fig8a_legend_never_rounds_a_share_up_to_all(tmp_path, drawn):
    """r = 1 meets Lemma 1 for 99.6% of the anchors: the legend must not say 100% (the demo's did)."""
    rows = [(BASE, "before training", 0.1, r, 1.0, 0.996) for r in (0.5, 1.5)]
    frame = pd.DataFrame(rows, columns=["method", "when", "lam", "r", "density", "share_r1"])
    geometry_logs.plot_min_ratio(frame, tmp_path / "fig8a")
    (label,) = [t.get_text() for t in drawn[0].axes[0].get_legend().get_texts()]
    assert "100%" not in label and "99.6%" in label


BASE = geometry_logs.BASELINE
