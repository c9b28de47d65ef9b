"""Comparison tables of a user loss: ours (mean ± std, n) beside the papers' losses and published numbers."""

from __future__ import annotations

from tables_synthetic import scores_frame as metrics

from contrastlab import config as cl_config
from contrastlab.config import Grid
from contrastlab.paths import REPO_ROOT
from contrastlab.tables.comparison import build_comparison, build_summary, comparison_tables, untabled_methods


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
