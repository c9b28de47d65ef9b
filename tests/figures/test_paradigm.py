"""The gradient-paradigm figure of any loss (figures.paradigm): InfoNCE's known R, files, determinism."""

from __future__ import annotations

import numpy as np

from contrastlab.figures.paradigm import GD_THRESHOLD, paradigm_grid, plot_paradigm, write_paradigm_figure
from contrastlab.losses import build_loss


def test_infonce_ratio_is_one_and_its_gd_falls_as_the_positive_nears():
    """Li Table 1: InfoNCE's R is 1 for every anchor; its GD 1 / (1 + e^{s_ii/τ} / Σ e^{s_ij/τ}) falls
    as μ_pos moves below μ_neg."""
    loss = build_loss("infonce", tau=0.2)
    frame = paradigm_grid(loss.on_views, points=3, batches=2, n=8, seed=1)
    active = frame[frame["gd"] >= GD_THRESHOLD]
    assert len(active) > 3 and np.allclose(active["r"], 1.0, atol=1e-9)
    assert ((frame["hardest_share"] > 0) & (frame["hardest_share"] <= 1)).all()
    row = frame[np.isclose(frame["mu_neg"], frame["mu_neg"].max())].sort_values("mu_pos")
    assert row["gd"].is_monotonic_increasing and row["gd"].iloc[0] < 0.2 * row["gd"].iloc[-1]
    again = paradigm_grid(loss.on_views, points=3, batches=2, n=8, seed=1)
    assert again.equals(frame)


def test_the_figure_is_written_with_its_numbers(tmp_path):
    written = write_paradigm_figure("mpt", {"m": 0.23}, tmp_path / "mpt", label="mpt", points=3, batches=1)
    assert sorted(p.suffix for p in written) == [".csv", ".pdf", ".png"]
    assert (tmp_path / "mpt.png").stat().st_size > 5000


def test_a_constant_ratio_is_drawn_as_one_colour_not_as_its_rounding_noise(tmp_path, drawn):
    """InfoNCE's R is 1 up to autograd's last digits: its panel's colour scale must not stretch those
    digits over the whole colour map (one cell bright, a colour bar reading 1.0000000000000)."""
    frame = paradigm_grid(build_loss("infonce", tau=0.2).on_views, points=3, batches=1, n=8, seed=1)
    frame["r"] = 1.0 + 1e-10 * np.arange(len(frame))
    plot_paradigm(frame, tmp_path / "p", "infonce")
    low, high = drawn[0].axes[2].collections[0].get_clim()
    assert high - low > 0.1 and low < 1.0 < high
