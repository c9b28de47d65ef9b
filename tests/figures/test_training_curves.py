"""Nie Fig. 1 from the cells' metrics files and training logs."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from contrastlab.figures.training_curves import (
    CURVE_SERIES,
    alignment_uniformity_frame,
    cell_files,
    curves_frame,
    plot_alignment_uniformity,
    plot_training_curves,
)
from tests.images import assert_nontrivial_png

DEV = {"alignment_split": "dev"}  # a record since alignment/uniformity moved to STS-B dev


@pytest.fixture
def results(tmp_path):
    for method, (align, uniform, sts) in {"cl": (0.2, -2.3, 76.0), "dcl": (0.25, -2.5, 72.0)}.items():
        for seed in (42, 43):
            cell = f"nie2023/bert-base/{method}/seed{seed}"
            metrics = tmp_path / "metrics" / cell / "senteval.json"
            metrics.parent.mkdir(parents=True)
            metrics.write_text(
                json.dumps({"alignment": align, "uniformity": uniform, "sts_avg": sts + seed - 42} | DEV)
            )
            log = tmp_path / "checkpoints" / cell / "train_log.jsonl"
            log.parent.mkdir(parents=True)
            records = [{"event": "start", "settings": {}}]
            for step in (10, 20):
                records.append({"event": "train", "step": step, "loss": 3.0 - step / 10 + seed - 42})
                dev = {"dev_spearman": 70.0 + step, "dev_align": align, "dev_uniformity": uniform}
                records.append({"event": "eval", "step": step, **dev})
            log.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    skipped = tmp_path / "metrics" / "nie2023" / "bert-base" / "au" / "seed42" / "senteval.json"
    skipped.parent.mkdir(parents=True)
    skipped.write_text(json.dumps({"alignment": None, "uniformity": -1.0, "sts_avg": 70.0}))
    on_test = tmp_path / "metrics" / "nie2023" / "bert-base" / "mpt" / "seed42" / "senteval.json"
    on_test.parent.mkdir(parents=True)  # evaluated before alignment/uniformity moved to STS-B dev
    on_test.write_text(json.dumps({"alignment": 0.3, "uniformity": -2.0, "sts_avg": 75.0}))
    return tmp_path


def test_alignment_uniformity_points_per_checkpoint(results, tmp_path, capsys):
    frame = alignment_uniformity_frame(results / "metrics", "nie2023")
    assert len(frame) == 5 and set(frame["method"]) == {"cl", "dcl", "mpt"}  # the cell without measures: out
    assert frame.set_index(["method", "seed"]).loc[("cl", 43), "sts_avg"] == 77.0
    assert frame.loc[frame["split"] != "dev", "method"].tolist() == ["mpt"]  # evaluated before the move
    written = plot_alignment_uniformity(frame, tmp_path / "au")
    assert_nontrivial_png(written[0])
    left_out = "1 cell(s) left out, measured on STS-B test: rerun them with --forcerun evaluate:"
    assert f"Fig. 1a: {left_out} bert-base/mpt/seed42" in capsys.readouterr().out


def test_training_curves_average_seeds_per_step(results, tmp_path):
    frame = curves_frame(results / "checkpoints", "nie2023")
    assert len(frame) == 2 * 2 * 2 * 4  # methods x seeds x steps x series (no geometry records here)
    written = plot_training_curves(frame, tmp_path / "curves")
    assert_nontrivial_png(written[0])
    plotted = pd.read_csv(written[2])
    loss = plotted[(plotted["method"] == "cl") & (plotted["series"] == "training loss (batch)")]
    assert loss["value"].tolist() == pytest.approx([2.5, 1.5])  # mean of seeds 42 and 43 at steps 10, 20


def test_each_training_curve_panel_is_titled_by_its_series_and_each_line_by_its_run(results, tmp_path, drawn):
    plot_training_curves(curves_frame(results / "checkpoints", "nie2023"), tmp_path / "c")
    (fig,) = drawn
    assert [ax.get_title() for ax in fig.axes] == list(CURVE_SERIES.values())
    assert [text.get_text() for text in fig.legends[0].get_texts()] == ["cl (bert-base)", "dcl (bert-base)"]


def test_paper_figures_read_configured_cells_never_search_points(tmp_path):
    """The log figures read only their experiments' cells, never the MPT search points or its winner."""
    for method in ("cl", "mpt", "mpt~s1-lr3e-05-m0.3", "mpt~searched"):
        path = tmp_path / "nie2023" / "tiny-bert" / method / "seed42" / "train_log.jsonl"
        path.parent.mkdir(parents=True)
        path.write_text("")
    assert [method for _, method, _, _ in cell_files(tmp_path, "nie2023", "train_log.jsonl")] == ["cl", "mpt"]


CURVE_COLUMNS = ["backbone", "method", "seed", "step", "series", "value"]


def test_more_runs_than_colours_still_draw_each_run_apart(tmp_path, drawn):
    """Nie's grid has 28 runs (4 backbones x 7 losses), the palette 8 colours: a run past the eighth
    takes another line style, so no two legend entries look alike."""
    rows = [
        ("bert-base", f"m{i}", 42, step, "training loss (batch)", float(i + step))
        for i in range(9)
        for step in (1, 2)
    ]
    plot_training_curves(pd.DataFrame(rows, columns=CURVE_COLUMNS), tmp_path / "c")
    looks = [(h.get_color(), h.get_linestyle()) for h in drawn[0].legends[0].legend_handles]
    assert len(looks) == 9 and len(set(looks)) == 9


def test_a_dev_panel_left_empty_with_the_probe_on_names_the_dev_split_not_analysis_every(tmp_path, drawn):
    """The demo logs the training probe (analysis_every on) but its STS-B dev fixture has fewer sentences
    than one analysis_batch, so no dev L_cl: its panel must not blame analysis_every."""
    rows = [
        ("tiny-bert", "cl", 42, 0, series, 1.0) for series in ("training loss (batch)", "train L_cl (probe)")
    ]
    plot_training_curves(pd.DataFrame(rows, columns=CURVE_COLUMNS), tmp_path / "c")
    notes = {ax.get_title(): " ".join(t.get_text() for t in ax.texts) for ax in drawn[0].axes}
    assert "analysis_every off" not in notes["dev L_cl (dropout views)"]
    assert "analysis_batch" in notes["dev L_cl (dropout views)"]
    assert notes["dev ℓ_align"] == "not logged"  # an eval series: analysis_every has no say in it


def test_fig1a_legend_names_the_backbones_by_marker_in_no_score_colour(results, tmp_path, drawn):
    """Colour is STS.Avg: a backbone's legend marker drawn in its first point's score colour reads as a
    colour per backbone, and, with one point, as a second point beside it."""
    plot_alignment_uniformity(alignment_uniformity_frame(results / "metrics", "nie2023"), tmp_path / "au")
    (handle,) = drawn[0].axes[0].get_legend().legend_handles
    assert handle.get_array() is None and len({tuple(c) for c in handle.get_facecolor()}) == 1
