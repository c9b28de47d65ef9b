"""The comparison verdict's direction by hand: "above" and "below", not only "within noise", in the
user-loss comparison table and in the seed-noise verdict behind it."""

from __future__ import annotations

import math

import pytest
from tables_synthetic import scores_frame

from contrastlab.config import Grid
from contrastlab.stats import half_width
from contrastlab.tables.comparison import build_comparison
from contrastlab.tables.verdicts import cell_verdict, seed_noise_verdict

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
    frame = scores_frame(rows)
    table = build_comparison(Grid(margin_loss_config), frame, "nie2023").set_index("method")
    column = "STS.Avg vs yours"
    assert table.loc["cl", column] == "above"  # 81 − 78 = +3 > 2.372
    assert table.loc["dcl", column] == "below"  # 75 − 78 = −3
    assert table.loc["au", column] == "within noise"  # 76 − 78 = −2
    assert table.loc["mpt", column] == "—" and table.loc["margin_nce", column] == ""
    assert table.loc["cl", "STS.Avg"] == "81.00 ± 1.00 (n=3)"
