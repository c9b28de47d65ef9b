"""Comparison tables of a user loss: ours (mean ± std, n) beside the papers' losses and published numbers,
and the seed-noise verdict's direction against it by hand ("above" and "below", not only "within noise")."""

from __future__ import annotations

import math

import pytest
from tables_synthetic import scores_frame as metrics

from contrastlab import config as cl_config
from contrastlab.config import Grid
from contrastlab.paths import REPO_ROOT
from contrastlab.stats import half_width
from contrastlab.tables.comparison import build_comparison, build_summary, comparison_tables, untabled_methods
from contrastlab.tables.verdicts import cell_verdict, seed_noise_verdict


def test_the_user_loss_sits_beside_the_papers_losses_with_published_numbers(margin_loss_config):
    assert comparison_tables(Grid(margin_loss_config)) == ["compare_nie2023", "compare_summary"]
    frame = metrics(
        [("nie2023", "bert-base", "cl", s, "sts_avg", v) for s, v in ((42, 75.0), (43, 77.0), (44, 76.0))]
        + [("nie2023", "bert-base", "margin_nce", s, "sts_avg", v) for s, v in ((42, 78.0), (43, 78.0))]
        + [("nie2023", "bert-base", "margin_nce", 7, "sts_avg", 10.0)]  # a seed outside the config: ignored
    )
    table = build_comparison(Grid(margin_loss_config), frame, "nie2023").set_index("method")
    assert list(table.index) == ["cl", "au", "dcl", "dcl_plus", "mpt", "met", "mat", "margin_nce"]
    assert table.loc["cl", "STS.Avg"] == "76.00 ± 1.00 (n=3)"
    assert table.loc["cl", "STS.Avg published"] == "76.04"  # Nie Table 1, BERT-base
    assert (
        table.loc["cl", "TR.Avg (dev acc.) published"] == "86.38" and table.loc["cl", "TR.Avg"] == "not run"
    )
    assert table.loc["margin_nce", "STS.Avg"] == "78.00 ± 0.00 (n=2)"
    assert table.loc["margin_nce", "STS.Avg published"] == "n/a" and table.loc["margin_nce", "yours"] == "yes"
    # tables.verdicts.seed_noise_verdict: 76 - 78 = -2 against t_3 * sqrt(2/3) * sqrt(1/3 + 1/2) = 2.37
    assert table.loc["cl", "STS.Avg vs yours"] == "within noise"
    summary = build_summary(Grid(margin_loss_config), frame).set_index("method")
    column = "nie2023 bert-base STS.Avg"
    assert summary.loc["margin_nce", column] == "78.00 (#1 of 2)"
    assert summary.loc["cl", column] == "76.00 (#2 of 2)" and summary.loc["mpt", column] == "not run"


def test_a_built_in_loss_no_paper_table_lists_gets_a_comparison_table():
    """Every configured method reaches a table: the demo's are all in their papers' tables or figures (no
    comparison table); ArcCon in Nie's experiment gets a comparison table beside Nie's losses."""
    config = cl_config.load(REPO_ROOT / "config" / "demo.yaml")
    assert comparison_tables(Grid(config)) == []
    config["experiments"]["nie2023"]["methods"]["arccon"] = {"loss": "arccon", "hp": {"tau": 0.05}}
    grid = Grid(cl_config.validate(config))
    assert untabled_methods(grid, "nie2023") == ["arccon"] and untabled_methods(grid, "li2024") == []
    assert comparison_tables(grid) == ["compare_nie2023", "compare_summary"]
    frame = metrics([("nie2023", "tiny-bert", "arccon", 42, "sts_avg", 70.0)])
    table = build_comparison(grid, frame, "nie2023").set_index(["backbone", "method"])
    assert table.loc[("tiny-bert", "arccon"), "STS.Avg"] == "70.00 (n=1)"
    assert table.loc[("tiny-bert", "arccon"), "yours"] == ""


#: The user's loss at 78, 78 and another method's three seeds 3 points away: s_p² = (0 + 2) / (1 + 2),
#: ν = 3, h = t_{3, 0.975} · sqrt(2/3) · sqrt(1/3 + 1/2) = 3.1824 · 0.8165 · 0.9129 = 2.372 < 3.
HALF_WIDTH = 2.372


def test_the_seed_noise_verdict_says_which_side():
    assert half_width(math.sqrt(2 / 3), 3, 3, 2) == pytest.approx(HALF_WIDTH, abs=5e-4)
    # other − user: +3 (the other method above the user's loss), −3 below, −2 within
    assert seed_noise_verdict([78.0, 78.0], [80.0, 81.0, 82.0]) == "above"
    assert seed_noise_verdict([78.0, 78.0], [74.0, 75.0, 76.0]) == "below"
    assert seed_noise_verdict([78.0, 78.0], [75.0, 77.0, 76.0]) == "within noise"
    # +2.25 is within 2.372 but past the half-width of 3 against 3 seeds (2.122): n_user is 2, not 3
    assert seed_noise_verdict([78.0, 78.0], [79.25, 80.25, 81.25]) == "within noise"
    assert seed_noise_verdict([78.0, 78.0], [79.5, 80.5, 81.5]) == "above"  # +2.5
    # the edge counts as within; just past it, the side
    assert cell_verdict(HALF_WIDTH, HALF_WIDTH, 3) == "within noise"
    assert cell_verdict(2.4, HALF_WIDTH, 3) == "above" and cell_verdict(-2.4, HALF_WIDTH, 3) == "below"


def test_the_comparison_table_prints_above_and_below_against_the_users_loss(margin_loss_config):
    rows = [("nie2023", "bert-base", "margin_nce", s, "sts_avg", 78.0) for s in (42, 43)]
    others = {"cl": (80.0, 81.0, 82.0), "dcl": (74.0, 75.0, 76.0), "au": (75.0, 77.0, 76.0)}
    for method, scores in others.items():
        rows += [
            ("nie2023", "bert-base", method, s, "sts_avg", v)
            for s, v in zip((42, 43, 44), scores, strict=True)
        ]
    frame = metrics(rows)
    table = build_comparison(Grid(margin_loss_config), frame, "nie2023").set_index("method")
    column = "STS.Avg vs yours"
    assert table.loc["cl", column] == "above"  # 81 − 78 = +3 > 2.372
    assert table.loc["dcl", column] == "below"  # 75 − 78 = −3
    assert table.loc["au", column] == "within noise"  # 76 − 78 = −2
    assert table.loc["mpt", column] == "—" and table.loc["margin_nce", column] == ""
    assert table.loc["cl", "STS.Avg"] == "81.00 ± 1.00 (n=3)"


def test_a_failed_cell_says_failed_in_the_comparison_table(margin_loss_config):
    """A cell whose training failed (its failed.json: metrics.collect_failures) reads "failed", as in the
    paper tables (docs/reproduction.md), not "not run"."""
    frame = metrics([("nie2023", "bert-base", "cl", 42, "sts_avg", 75.0)])
    failed = {("nie2023", "bert-base", "margin_nce")}
    table = build_comparison(Grid(margin_loss_config), frame, "nie2023", failed).set_index("method")
    assert table.loc["margin_nce", "STS.Avg"] == "failed" and table.loc["mpt", "STS.Avg"] == "not run"
