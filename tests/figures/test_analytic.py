"""Nie 2023 Fig. 2/4 and Li 2024 Fig. 2/3/10: the closed forms against autograd of the project's losses and
against hand-computed values, the Monte-Carlo estimates against closed forms and quadrature, determinism,
and non-trivial images."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from scipy.stats import norm

from contrastlab.analysis.paradigm import paradigm_components
from contrastlab.figures import li2024 as li
from contrastlab.figures import nie2023 as nie
from contrastlab.losses import nie2023 as nie_losses
from contrastlab.losses._common import offdiag_logsumexp
from contrastlab.losses.catalog import DEFAULTS
from tests.images import assert_written

PI = math.pi


# --------------------------------------------------------------------------- Nie: hand-computed values
def test_nie_closed_forms_at_hand_computed_angles():
    tp, tn, k = PI / 3, PI / 2, 64
    # InfoNCE (τ 0.05): negatives' softmax share K e^0 / (e^{0.5/τ} + K e^0).
    share = 64 / (math.exp(10.0) + 64)
    assert nie.alignment_gradient_norm("infonce", tp, tn, negatives=k) == pytest.approx(
        math.sin(tp) / 0.05 * share, rel=1e-12
    )
    assert nie.uniformity_gradient_norm("infonce", tp, tn, negatives=k) == pytest.approx(
        1.0 / 0.05 * share / 64, rel=1e-12
    )
    # Equal angles: the positive is one of K + 1 equal logits.
    assert nie.alignment_gradient_norm("infonce", tp, tp, negatives=k) == pytest.approx(
        math.sin(tp) / 0.05 * 64 / 65, rel=1e-12
    )
    assert nie.alignment_gradient_norm("align_uniform", tp, tn) == pytest.approx(2 * math.sin(tp))  # α = 2
    assert nie.alignment_gradient_norm("align_uniform", tp, tn, alpha=3.0) == pytest.approx(
        3 * (2 * math.sin(tp / 2)) * math.sin(tp)
    )
    assert nie.uniformity_gradient_norm("align_uniform", tp, tn, negatives=k) == pytest.approx(12 / (65 * 64))
    assert nie.alignment_gradient_norm("dcl", tp, tn) == pytest.approx(math.sin(tp) / 0.03)
    assert nie.uniformity_gradient_norm("dcl", tp, tn, negatives=k) == pytest.approx(1 / (64 * 0.03))
    # DCL+ (τ 0.17): -0.5/τ + log 64 = 1.22 > 0 -> active; θ_ij' = 2π/3: -1/τ + log 64 < 0 -> zero.
    assert nie.alignment_gradient_norm("dcl_plus", tp, tn, negatives=k) == pytest.approx(math.sin(tp) / 0.17)
    assert nie.alignment_gradient_norm("dcl_plus", tp, 2 * PI / 3, negatives=k) == 0.0
    # MPT (m 0.23): cos gap 0.5 -> dissipated; gap 0 -> sin θ_ii'.
    assert nie.alignment_gradient_norm("mpt", tp, tn) == 0.0
    assert nie.alignment_gradient_norm("mpt", tp, tp) == pytest.approx(math.sin(tp))
    # MET (m 0.45): chord gap 2 sin(π/4) - 1 = 0.414 < 0.45 -> cos(θ/2); MAT (m 0.15π): 30° gap > 27°.
    assert nie.alignment_gradient_norm("met", tp, tn) == pytest.approx(math.cos(tp / 2))
    assert nie.uniformity_gradient_norm("met", tp, tn) == pytest.approx(math.cos(tn / 2))
    assert nie.alignment_gradient_norm("mat", tp, tn) == 0.0
    assert nie.uniformity_gradient_norm("mat", tp, tp + 0.1 * PI) == 1.0
    with pytest.raises(ValueError, match="valid names"):
        nie.alignment_gradient_norm("simclr", tp, tn)


# --------------------------------------------------------------------------- Nie: autograd of the losses
NIE_POINTS = [(PI / 3, PI / 2), (PI / 4, PI / 4 + 0.1), (1.0, 2.5), (2.0, 1.0), (0.3, 0.5)]
PER_ANCHOR = {
    "infonce": lambda s, hp: nie_losses.info_nce_per_anchor(s, tau=hp["tau"]),
    "dcl": lambda s, hp: nie_losses.dcl_per_anchor(s, tau=hp["tau"]),
    "dcl_plus": lambda s, hp: nie_losses.dcl_per_anchor(s, tau=hp["tau"]).clamp_min(0.0),
    "mpt": lambda s, hp: nie_losses.mpt_margin(s, m=hp["m"]).clamp_min(0.0),
    "met": lambda s, hp: nie_losses.met_margin(s, m=hp["m"]).clamp_min(0.0),
    "mat": lambda s, hp: nie_losses.mat_margin(s, m=hp["m"]).clamp_min(0.0),
}


def anchor_configuration(theta_pos, theta_neg, k, h_norm):
    """One raw anchor of norm ``h_norm`` as K + 1 separate leaves (copy 0 meets the positive, copy j the
    negative j), the positive and K negatives at the given angles in orthogonal planes, and the
    anchor's row of cosines, differentiable through the copies."""
    basis = torch.eye(k + 2, dtype=torch.float64)
    h = (h_norm * basis[0]).repeat(k + 1, 1).requires_grad_()
    z = F.normalize(h, dim=-1)
    positive = math.cos(theta_pos) * basis[0] + math.sin(theta_pos) * basis[1]
    negatives = math.cos(theta_neg) * basis[0] + math.sin(theta_neg) * basis[2:]
    row = torch.cat([(z[0] * positive).sum()[None], (z[1:] * negatives).sum(-1)])
    return h, z, positive, row


def split_norms(h):
    """(‖grad of copy 0‖, largest ‖grad of a negative's copy‖): the alignment and one-negative parts."""
    norms = h.grad.norm(dim=-1)
    return norms[0].item(), norms[1:].max().item(), norms[1:]


@pytest.mark.parametrize("loss", list(PER_ANCHOR))
@pytest.mark.parametrize("theta_pos,theta_neg", NIE_POINTS)
def test_nie_norms_match_autograd_of_the_project_losses(loss, theta_pos, theta_neg):
    k, h_norm = 5, 2.0
    hp = DEFAULTS[loss]
    h, _, _, row = anchor_configuration(theta_pos, theta_neg, k, h_norm)
    # Rows of the other anchors are constants: only anchor 0's loss is differentiated.
    others = torch.eye(k + 1, dtype=torch.float64)[1:]
    PER_ANCHOR[loss](torch.cat([row[None], others]), hp)[0].backward()
    align, one_negative, all_negatives = split_norms(h)
    expected_align = nie.alignment_gradient_norm(loss, theta_pos, theta_neg, negatives=k) / h_norm
    expected_neg = nie.uniformity_gradient_norm(loss, theta_pos, theta_neg, negatives=k) / h_norm
    assert align == pytest.approx(float(expected_align), rel=1e-7, abs=1e-10)
    assert one_negative == pytest.approx(float(expected_neg), rel=1e-7, abs=1e-10)
    if loss in ("infonce", "dcl", "dcl_plus"):  # softmax weights: every equal negative pushes equally
        assert torch.allclose(all_negatives, all_negatives[0].expand_as(all_negatives), rtol=1e-10)


def test_hinge_cases_cover_both_sides_of_the_margin():
    for loss in ("dcl_plus", "mpt", "met", "mat"):
        values = [nie.alignment_gradient_norm(loss, tp, tn, negatives=5) for tp, tn in NIE_POINTS]
        assert min(values) == 0.0 and max(values) > 0.1, loss


@pytest.mark.parametrize("alpha", [2.0, 3.0])
@pytest.mark.parametrize("theta_pos,theta_neg", NIE_POINTS[:3])
def test_nie_align_norm_matches_autograd_of_the_project_alignment(alpha, theta_pos, theta_neg):
    h, z, positive, _ = anchor_configuration(theta_pos, theta_neg, 1, 2.0)
    nie_losses.alignment(z[0:1], positive[None], alpha=alpha).backward()
    expected = nie.alignment_gradient_norm("align_uniform", theta_pos, theta_neg, alpha=alpha) / 2.0
    assert h.grad[0].norm().item() == pytest.approx(float(expected), rel=1e-7)


@pytest.mark.parametrize("theta_pos,theta_neg", NIE_POINTS[:3])
def test_nie_uniform_norm_matches_autograd_of_eq29(theta_pos, theta_neg):
    """Nie Eq. 29 (cross-view pairs, log of the mean over N(N-1)) with every pair at θ_ij'. The project's
    ``uniformity`` uses same-view pairs k < l (protocol.md §1), so it is not the equation plotted."""
    k, t = 5, 6.0
    h, _, _, row = anchor_configuration(theta_pos, theta_neg, k, 2.0)
    n = k + 1
    others = torch.full((k, n), math.cos(theta_neg), dtype=torch.float64)
    sim = torch.cat([row[None], others])  # the diagonal (the positives) is left out below
    loss = offdiag_logsumexp(-t * (2.0 - 2.0 * sim), None) - math.log(n * (n - 1))
    loss.backward()
    _, one_negative, _ = split_norms(h)
    expected = nie.uniformity_gradient_norm("align_uniform", theta_pos, theta_neg, negatives=k, t=t) / 2.0
    assert one_negative == pytest.approx(float(expected), rel=1e-7)


def test_nie_figure_frames_and_plots(tmp_path, drawn):
    frame = nie.figure_frame("2a", points=15)
    assert len(frame) == 6 * 15 * 15 and frame["grad_norm"].notna().all() and (frame["grad_norm"] >= 0).all()
    assert list(frame.drop_duplicates("panel")["negatives"]) == [64, 128, 256, 512, 64, 64]
    assert frame["theta_pos"].min() == 0.0 and frame["theta_neg"].max() == pytest.approx(PI)
    # More negatives, less dissipation: the InfoNCE norm grows with K wherever θ_ij' > θ_ii'.
    infonce = frame[frame["loss"] == "infonce"].pivot_table(
        index=["theta_pos", "theta_neg"], columns="negatives", values="grad_norm"
    )
    assert (infonce[512] >= infonce[64]).all()
    # L_align and DCL do not vary along θ_ij' (the horizontal axis).
    assert frame[frame["loss"] == "dcl"].groupby("theta_pos")["grad_norm"].nunique().max() == 1
    for name in ("2a", "2b", "4"):
        frame = nie.figure_frame(name, points=15)
        assert_written(nie.plot_gradient_norms(frame, tmp_path / f"fig{name}"), frame)
    heatmaps = [ax for ax in drawn[0].axes if ax.get_xlabel() == r"$\theta_{ij'}$"]
    assert len(heatmaps) == 6 and len(drawn[0].axes) == 12  # each with its colour bar
    assert heatmaps[0].get_ylabel() == r"$\theta_{ii'}$" and "InfoNCE" in heatmaps[0].get_title()
    with pytest.raises(ValueError, match="valid names"):
        nie.figure_frame("3")


# --------------------------------------------------------------------------- Li Table 1
def test_li_table1_matches_the_paradigm_view_of_the_losses():
    g = torch.Generator().manual_seed(0)
    h1 = torch.randn(8, 6, generator=g, dtype=torch.float64)
    h2 = h1 + 0.5 * torch.randn(8, 6, generator=g, dtype=torch.float64)
    sim = (F.normalize(h1, dim=-1) @ F.normalize(h2, dim=-1).T).numpy()
    off = ~np.eye(8, dtype=bool)
    cos_pos, cos_neg = np.diag(sim), sim[off].reshape(8, 7)
    terms = paradigm_components(h1, h2, losses=li.TABLE1_LOSSES)
    gates = set()
    for loss in li.TABLE1_LOSSES:
        t = terms[loss]
        np.testing.assert_allclose(li.gradient_dissipation(loss, cos_pos, cos_neg), t.gd.numpy(), rtol=1e-9)
        np.testing.assert_allclose(
            li.weight(loss, cos_pos, cos_neg), t.w.numpy()[off].reshape(8, 7), rtol=1e-9
        )
        np.testing.assert_allclose(
            li.ratio(loss, cos_pos, cos_neg), t.r.numpy()[off].reshape(8, 7), rtol=1e-9
        )
        if loss in ("mpt", "met"):
            gates |= set(t.gd.tolist())
    assert gates == {0.0, 1.0}  # both sides of the margins are exercised


def test_li_table1_at_hand_computed_points():
    k = 127
    equal = np.full(k, math.cos(0.7))
    assert li.gradient_dissipation("infonce", math.cos(0.7), equal) == pytest.approx(k / (k + 1), rel=1e-12)
    # ArcCon with u = 0 is InfoNCE, and its ratio is 1.
    pos, neg = math.cos(0.4), np.cos(np.linspace(0.5, 2.0, k))
    assert li.gradient_dissipation("arccon", pos, neg, u=0.0) == pytest.approx(
        float(li.gradient_dissipation("infonce", pos, neg)), rel=1e-12
    )
    np.testing.assert_allclose(li.ratio("arccon", pos, neg, u=0.0), 1.0, rtol=1e-12)
    assert li.ratio("arccon", 0.0, neg)[0] == pytest.approx(math.cos(PI / 18))  # sin(90° + 10°) / sin 90°
    assert li.ratio("met", math.cos(PI / 3), np.array([0.0]))[0] == pytest.approx(math.sqrt(2))
    w = li.weight("infonce", pos, neg)
    assert w.sum() == pytest.approx(1 / 0.05) and w.argmax() == 0  # Σ_j W_ij = 1/τ, largest at the hardest
    np.testing.assert_array_equal(li.weight("met", pos, neg)[1:], 0.0)
    assert li.weight("met", pos, neg)[0] == pytest.approx(1 / math.sqrt(2 - 2 * math.cos(0.5)))
    # MPT gate: cos gap 0.22 < 0.23 -> 1, 0.24 -> 0; MET gate on chords (m 0.45).
    assert li.gradient_dissipation("mpt", 0.9, np.array([0.68, 0.1])) == 1.0
    assert li.gradient_dissipation("mpt", 0.9, np.array([0.66, 0.1])) == 0.0
    d_pos = math.sqrt(2 - 2 * 0.9)
    assert li.gradient_dissipation("met", 0.9, np.array([1 - (d_pos + 0.44) ** 2 / 2])) == 1.0
    assert li.gradient_dissipation("met", 0.9, np.array([1 - (d_pos + 0.46) ** 2 / 2])) == 0.0
    with pytest.raises(ValueError, match="no hyperparameter"):
        li.gradient_dissipation("mpt", 0.9, neg, tau=0.1)


# --------------------------------------------------------------------------- Li Fig. 2 / 10
def test_li_gd_without_spread_is_the_closed_form():
    """σ = 0: every batch is the same, the mean is Table 1's GD with K equal negatives, e.g. K/(K+1) for
    InfoNCE where μ_pos = μ_neg."""
    frame = li.gd_monte_carlo(points=4, batches=3, negatives=127, sigma_pos=0.0, sigma_neg=0.0)
    for loss in li.TABLE1_LOSSES:
        rows = frame[frame["loss"] == loss]
        closed = li.gradient_dissipation(
            loss, np.cos(rows["mu_pos"].to_numpy()), np.cos(rows["mu_neg"].to_numpy())[:, None].repeat(127, 1)
        )
        np.testing.assert_allclose(rows["gd"], closed, rtol=1e-12, atol=1e-15)
    diagonal = li.gd_monte_carlo(
        ("infonce",),
        points=3,
        batches=2,
        mu_pos_range=(0.3, 1.5),
        mu_neg_range=(0.3, 1.5),
        sigma_pos=0,
        sigma_neg=0,
    )
    same = diagonal[diagonal["mu_pos"] == diagonal["mu_neg"]]
    assert len(same) == 3 and np.allclose(same["gd"], 127 / 128, rtol=1e-12)


def _cos_cdf(x, mu, sigma):
    """P(cos θ <= x) for θ ~ N(mu, σ²): θ in [a, 2π - a] (mod 2π) with a = arccos x."""
    a = np.arccos(np.clip(x, -1.0, 1.0))
    prob = sum(
        norm.cdf((2 * PI * s + 2 * PI - a - mu) / sigma) - norm.cdf((2 * PI * s + a - mu) / sigma)
        for s in (-1, 0)
    )
    return np.where(x >= 1.0, 1.0, np.where(x < -1.0, 0.0, prob))


@pytest.mark.parametrize("loss,mu_neg_range", [("mpt", (1.25, 1.35)), ("met", (1.5, 1.6))])
def test_li_gd_monte_carlo_matches_quadrature_with_spread(loss, mu_neg_range):
    """GD of MPT/MET = 1 - E_θii'[P(every negative beyond the margin)] = 1 - E[F(x(θ_ii'))^K], at three
    μ_neg across the transition from 1 to 0."""
    mu_pos, k, m = PI / 4, 127, DEFAULTS[loss]["m"]
    mu_neg = np.linspace(*mu_neg_range, 3)
    frame = li.gd_monte_carlo(
        (loss,), points=(1, 3), batches=4000, mu_pos_range=(mu_pos, mu_pos), mu_neg_range=mu_neg_range, seed=3
    )
    nodes, weights = np.polynomial.hermite_e.hermegauss(80)
    theta_pos = mu_pos + li.SIGMA_POS * nodes
    if loss == "mpt":
        threshold = np.cos(theta_pos) - m  # every cos θ_ij' <= cos θ_ii' - m
    else:
        threshold = 1.0 - (2 * np.sin(np.abs(theta_pos) / 2) + m) ** 2 / 2  # every chord >= d_ii' + m
    for mu, estimate in zip(mu_neg, frame["gd"], strict=True):
        expected = 1.0 - (weights * _cos_cdf(threshold, mu, li.SIGMA_NEG) ** k).sum() / weights.sum()
        assert 0.05 < expected < 0.95  # a point inside the transition, where the check has teeth
        assert estimate == pytest.approx(expected, abs=0.035)  # >= 4.4 standard errors of a 4000-batch mean


def test_li_gd_monte_carlo_is_deterministic_and_seeded():
    kwargs = {"points": (3, 5), "batches": 50, "negatives": 31}
    first = li.gd_monte_carlo(**kwargs)
    pd.testing.assert_frame_equal(first, li.gd_monte_carlo(**kwargs), check_exact=True)
    pd.testing.assert_frame_equal(first, li.gd_monte_carlo(**kwargs, chunk=2), check_exact=True)
    assert not first["gd"].equals(li.gd_monte_carlo(**kwargs, seed=1)["gd"])
    assert len(first) == 4 * 15 and first["gd"].between(0.0, 1.0).all()
    assert set(first["mu_neg"].round(12)) == set(np.round(np.linspace(PI / 20, PI, 5), 12))


def test_li_gd_plots(tmp_path, drawn):
    frame = li.gd_monte_carlo(points=8, batches=20, negatives=15)
    for stem, losses in (("fig2", li.FIG2_LOSSES), ("fig10", li.FIG10_LOSSES)):
        paths = li.plot_gd_heatmaps(frame, tmp_path / stem, losses)
        assert_written(paths, frame[frame["loss"].isin(losses)])
        assert set(pd.read_csv(paths[2])["loss"]) == set(losses)
    maps = [ax for ax in drawn[0].axes if ax.get_xlabel() == r"$\mu_{\mathrm{neg}}$"]
    assert len(maps) == 2 and maps[0].get_ylabel() == r"$\mu_{\mathrm{pos}}$"
    assert "ArcCon" in maps[0].get_title() and len(drawn[0].axes) == 3  # one shared colour bar


# --------------------------------------------------------------------------- Li Fig. 3
def test_hardest_negative_share_limits_and_monotonicity():
    taus = [1e-5, 0.01, 0.05, 0.3, 1e3]
    frame = li.hardest_negative_share(
        taus, points=3, batches=200, mu_neg_range=(PI / 4, PI / 2), gd_threshold=None, seed=1
    )
    by_tau = frame.pivot(index="mu_neg", columns="tau", values="share_all")
    assert (by_tau[1e-5] > 0.99).all()
    np.testing.assert_allclose(by_tau[1e3], 1 / 127, rtol=2e-3)
    assert (by_tau.diff(axis=1).iloc[:, 1:] < 0).all().all()  # the softmax's top share falls as τ grows
    assert (frame["kept"] == 1.0).all() and frame["share"].equals(frame["share_all"])


def test_hardest_negative_share_gd_filter_and_determinism(tmp_path, drawn):
    kwargs = {"points": 6, "batches": 100, "negatives": 63}
    frame = li.hardest_negative_share(li.FIG3_TAUS, **kwargs)
    pd.testing.assert_frame_equal(frame, li.hardest_negative_share(li.FIG3_TAUS, **kwargs), check_exact=True)
    assert len(frame) == 6 * 6 and frame["mu_pos"].eq(PI / 6).all()
    # Far negatives at τ 0.005: InfoNCE's GD is ~e^{-370}, every batch is filtered out.
    far = frame[(frame["tau"] == 0.005) & (frame["mu_neg"] == frame["mu_neg"].max())].iloc[0]
    assert far["kept"] == 0.0 and np.isnan(far["share"]) and 0 < far["share_all"] <= 1
    # Negatives as close as the positive: nothing is dissipated.
    assert frame[frame["mu_neg"] == frame["mu_neg"].min()]["kept"].eq(1.0).all()
    assert_written(li.plot_hardest_negative_share(frame, tmp_path / "fig3", negatives=63), frame)
    (fig,) = drawn
    assert fig.axes[0].get_xlabel() == r"$\mu_{\mathrm{neg}}$" and fig.axes[1].get_xscale() == "log"
    assert len(fig.axes[0].get_lines()) == 2 * len(li.FIG3_TAUS)
