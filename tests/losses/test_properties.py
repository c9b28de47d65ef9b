"""Properties: gradient dissipation past the margin, MACL's temperature and weight, paradigm ∥ InfoNCE."""

from __future__ import annotations

import functools

import pytest
import torch
import torch.nn.functional as F
from image_oracle import run, views

from contrastlab.losses import build_loss
from contrastlab.losses.li2024 import paradigm_view_term

batch = functools.partial(views, n=8, scale=1.0)
unit = functools.partial(F.normalize, dim=-1)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_dcl_plus_zero_gradient_where_dcl_nonpositive(seed):
    h1, h2 = batch(seed, noise=0.3)
    z1, z2 = unit(h1), unit(h2)
    s = z1 @ z2.T
    eye = torch.eye(8, dtype=torch.bool)
    for tau in (0.5, 0.3, 0.2, 0.1, 0.05):  # the first temperature that clips some anchors but not all
        dcl_i = -s.diagonal() / tau + torch.logsumexp(s.masked_fill(eye, float("-inf")) / tau, -1)
        if 0 < (dcl_i <= 0).sum() < 8:
            break
    out, g1, _ = run("dcl_plus", h1, h2, tau=tau)
    inactive = dcl_i <= 0
    assert 0 < inactive.sum() < 8
    assert torch.all(g1[inactive] == 0)
    assert torch.all(g1[~inactive].norm(dim=-1) > 0)
    assert out.stats["gd_active"] == pytest.approx(float((~inactive).double().mean()))


@pytest.mark.parametrize("name,m", [("mpt", 0.3), ("met", 0.4), ("mat", 0.15)])
def test_triplets_zero_gradient_once_margin_met(name, m):
    h1, h2 = batch(3)
    out, g1, g2 = run(name, h1, h2, m=m)
    inactive = g1.norm(dim=-1) == 0
    assert 0 < out.stats["gd_active"] < 1
    assert inactive.double().mean().item() == pytest.approx(1 - out.stats["gd_active"])
    # margin met by every anchor: loss and every gradient are exactly zero
    out, g1, g2 = run(name, h1, h2, m=-5.0)
    assert out.loss.item() == 0 and torch.all(g1 == 0) and torch.all(g2 == 0) and out.stats["gd_active"] == 0
    # margin never met: every anchor gets a gradient
    out, g1, _ = run(name, h1, h2, m=5.0)
    assert out.stats["gd_active"] == 1 and torch.all(g1.norm(dim=-1) > 0)


@pytest.mark.parametrize("name", ["paradigm", "mmhe", "mmhs", "mvicreg", "mbarlow_twins"])
def test_gd_active_is_the_share_of_both_views_anchors_gated_in(name):
    """paradigm: s_ii - max_{j≠i} s_ij < m (view 2 per column); modified losses: 1 - max_{j≠i} q_ij < m."""
    h1, h2 = batch(0, noise=0.3)
    z1, z2 = unit(h1), unit(h2)
    s, eye = z1 @ z2.T, torch.eye(8, dtype=torch.bool)
    if name == "paradigm":
        gaps = [s.diagonal() - s.masked_fill(eye, -9).amax(dim) for dim in (1, 0)]
    else:
        gaps = [1 - (z @ z.T).masked_fill(eye, -9).amax(1) for z in (z1, z2)]
    shares = [(g < 0.2).double().mean().item() for g in gaps]
    assert shares[0] != shares[1]
    assert run(name, h1, h2, m=0.2)[0].stats["gd_active"] == pytest.approx(sum(shares) / 2, abs=1e-12)


@pytest.mark.parametrize("reweight", [False, True])
@pytest.mark.parametrize("alpha,a0", [(2.0, 0.8), (0.5, 0.0)])
def test_macl_temperature_and_weight(alpha, a0, reweight):
    h1, h2 = batch(4, noise=0.2)
    tau0 = 0.05
    z1, z2 = unit(h1), unit(h2)
    big_a = (z1 * z2).sum(-1).mean().item()
    tau_a = tau0 * (1 + alpha * (big_a - a0))
    out, g1, g2 = run("macl", h1, h2, tau0=tau0, alpha=alpha, a0=a0, reweight=reweight)
    assert out.stats["tau_a"] == pytest.approx(tau_a, rel=1e-12)
    # same loss value / gradient as InfoNCE at τ_a, each anchor scaled by V_i = 1/(1 - P_i)
    s = z1 @ z2.T
    p = torch.softmax(s / tau_a, -1).diagonal()
    # V = 1/(1 - P), with protocol.md's +1e-8 in the denominator
    v = 1 / (1 - p + 1e-8) if reweight else torch.ones_like(p)
    if reweight:
        torch.testing.assert_close(v, 1 / (1 - p), rtol=1e-2, atol=0)  # 1 - P is ~1e-5 here
    a, b = h1.clone().requires_grad_(), h2.clone().requires_grad_()  # both views: τ_a, V detached
    per = F.cross_entropy(unit(a) @ unit(b).T / tau_a, torch.arange(8), reduction="none")
    (per * v).mean().backward()
    torch.testing.assert_close(out.loss, (per * v).mean().detach(), atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(g1, a.grad, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(g2, b.grad, atol=1e-6, rtol=1e-6)
    if reweight:
        assert out.stats["weight_mean"] == pytest.approx(v.mean().item(), rel=1e-6)
        # the weight is detached: the gradient of anchor i is V_i × InfoNCE(τ_a)'s
        b = h1.clone().requires_grad_()
        F.cross_entropy(unit(b) @ z2.T / tau_a, torch.arange(8)).backward()
        torch.testing.assert_close(g1, v[:, None] * b.grad, atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("name,hp", [("macl", {}), ("macl_vision", {"alpha": 1.0, "a0": 0.5})])
def test_macl_temperature_floor(name, hp):
    """τ_a = τ0 (1 + α (A - A0)) would be <= 0 at A = -1 (antipodal views): floored at τ0/100 (macl.py)."""
    h1, _ = batch(3)
    out, g1, g2 = run(name, h1, -h1, **hp)
    assert out.stats["tau_a"] == pytest.approx(build_loss(name).hp["tau0"] / 100, rel=1e-12)
    assert torch.isfinite(out.loss) and torch.isfinite(g1).all() and torch.isfinite(g2).all()


@pytest.mark.parametrize("seed", [0, 1])
def test_paradigm_without_gd_parallel_to_infonce(seed):
    """paradigm(gd=False, weight="exp", r=1) and InfoNCE: per anchor, the gradients of the view-1
    anchor's own term are parallel (same direction, positive ratio (1 - P_ii) N / τ)."""
    h1, h2 = batch(seed)
    tau = 0.3
    g_info = run("infonce", h1, h2, tau=tau)[1]
    a = h1.clone().requires_grad_()
    z1, z2 = F.normalize(a, dim=-1), F.normalize(h2, dim=-1)
    ones = torch.ones(8, dtype=torch.bool)
    paradigm_view_term(z1, z2, (z1 * z2).sum(-1), ones, tau=tau, r=1.0, weight="exp").backward()
    cos = F.cosine_similarity(g_info, a.grad, dim=-1)
    torch.testing.assert_close(cos, torch.ones_like(cos), atol=1e-10, rtol=0)
    s = F.normalize(h1, dim=-1) @ z2.T
    ratio = (1 - torch.softmax(s / tau, -1).diagonal()) * 8 / tau
    torch.testing.assert_close(g_info.norm(dim=-1) / a.grad.norm(dim=-1), ratio, atol=1e-8, rtol=1e-8)


def test_paradigm_no_active_anchor_is_zero_not_nan():
    h = torch.eye(4, dtype=torch.float64)
    a = h.clone().requires_grad_()
    out = build_loss("paradigm", m=-5.0)(a, h)
    out.loss.backward()
    assert out.loss.item() == 0 and torch.all(a.grad == 0) and out.stats["gd_active"] == 0


#: Losses of unit rows, the sentence ones and every MACL Table 9 loss (the OAR study's take raw rows).
SENTENCE = ["infonce", "mpt", "mmhe", "mbarlow_twins", "macl"]


@pytest.mark.parametrize("name", [*SENTENCE, "ntxent", "flatnce", "dcl_vision", "dualtemp", "macl_vision"])
def test_invariant_to_scaling_of_h(name):
    h1, h2 = batch(5)
    l1 = build_loss(name)(h1, h2).loss
    l2 = build_loss(name)(7.0 * h1, 0.01 * h2).loss
    torch.testing.assert_close(l1, l2, atol=1e-9, rtol=1e-9)
