"""Autograd gradients vs the papers' analytic gradients, float64, 1e-5.

Li et al. 2024 write gradients w.r.t. the unit vector z_i; Nie et al. 2023 w.r.t. the raw h_i. Both
are compared through the chain rule of the normalisation, dL/dh_i = (I - z_i z_i^T) dL/dz_i / ||h_i||,
against autograd of the public ``build_loss`` path on raw embeddings.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from image_oracle import run, views

from contrastlab.analysis.paradigm import paradigm_components, paradigm_gradient
from contrastlab.losses._common import same_view_gate
from contrastlab.losses.li2024 import paradigm_view_term

TOL = {"atol": 1e-5, "rtol": 1e-5}
SEEDS = [0, 1]


N = 6


def unit(h):
    return F.normalize(h, dim=-1)


def batch(seed):
    """Two views of N embeddings of dimension 4 (raw) and their unit rows."""
    h1, h2 = views(seed, n=N, d=4, noise=0.6)
    return h1, h2, unit(h1), unit(h2)


def to_h(h, gz):
    """Chain rule through z = h / ||h||."""
    z = unit(h)
    return (gz - (gz * z).sum(-1, keepdim=True) * z) / h.norm(dim=-1, keepdim=True)


def offdiag(m):
    return m.masked_fill(torch.eye(m.shape[0], dtype=torch.bool), 0.0)


def tangent_unit(z, v):
    """unit((I - z z^T) v) per row."""
    return F.normalize(v - (v * z).sum(-1, keepdim=True) * z, dim=-1)


def sin_between(z, v):
    return (v - (v * z).sum(-1, keepdim=True) * z).norm(dim=-1)


# ------------------------------------------------------------------ Li Eq. 1-3 (and App. D.1)
@pytest.mark.parametrize("seed", SEEDS)
def test_li_eq1_infonce(seed):
    h1, h2, z1, z2 = batch(seed)
    tau = 0.4
    e = torch.exp(z1 @ z2.T / tau)
    eo = offdiag(e)
    gz = (eo @ z2 - eo.sum(-1, keepdim=True) * z2) / (tau * e.sum(-1, keepdim=True))
    torch.testing.assert_close(run("infonce", h1, h2, tau=tau)[1], to_h(h1, gz / N), **TOL)


@pytest.mark.parametrize("seed", SEEDS)
def test_li_eq2_arccon(seed):
    h1, h2, z1, z2 = batch(seed)
    tau, u = 0.4, 0.3
    s = z1 @ z2.T
    theta = torch.arccos(s.diagonal())
    ratio = (torch.sin(theta + u) / torch.sin(theta))[:, None]
    eo = offdiag(torch.exp(s / tau))
    den = (torch.exp(torch.cos(theta + u) / tau) + eo.sum(-1))[:, None]
    gz = (eo @ z2 - eo.sum(-1, keepdim=True) * ratio * z2) / (tau * den)
    torch.testing.assert_close(run("arccon", h1, h2, tau=tau, u=u)[1], to_h(h1, gz / N), **TOL)


@pytest.mark.parametrize("seed", SEEDS)
def test_li_eq3_mpt_met(seed):
    h1, h2, z1, z2 = batch(seed)
    s = z1 @ z2.T
    eye = torch.eye(N, dtype=torch.bool)
    # MPT: I (z'_j - z'_i), j = argmax_{k≠i} s_ik
    m = 0.5
    j = s.masked_fill(eye, -2).argmax(-1)
    ind = ((s.diagonal() - s[torch.arange(N), j]) < m).double()[:, None]
    assert 0 < ind.sum() < N
    gz = ind * (z2[j] - z2)
    torch.testing.assert_close(run("mpt", h1, h2, m=m)[1], to_h(h1, gz / N), **TOL)
    # MET: I (z'_j / d_ij - z'_i / d_ii), j = argmin_{k≠i} d_ik
    d = torch.sqrt(2 - 2 * s)
    j = d.masked_fill(eye, 9).argmin(-1)
    dj = d[torch.arange(N), j][:, None]
    ind = ((dj.squeeze(1) - d.diagonal()) < m).double()[:, None]
    assert 0 < ind.sum() < N
    gz = ind * (z2[j] / dj - z2 / d.diagonal()[:, None])
    torch.testing.assert_close(run("met", h1, h2, m=m)[1], to_h(h1, gz / N), **TOL)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(
    "name,hp",
    [("infonce", {"tau": 0.4}), ("arccon", {"tau": 0.4, "u": 0.3}), ("mpt", {"m": 0.5}), ("met", {"m": 0.5})],
)
def test_li_eq4_table1_components_reproduce_gradient(name, hp, seed):
    """GD · Σ_j W (z'_j - R z'_i) with the Table 1 components equals the loss's gradient."""
    h1, h2, z1, z2 = batch(seed)
    terms = paradigm_components(h1, h2, losses=(name,), hp={name: hp})[name]
    gz = paradigm_gradient(terms, z1, z2)
    torch.testing.assert_close(run(name, h1, h2, **hp)[1], to_h(h1, gz), **TOL)


# ------------------------------------------------------------------ paradigm identity (Li Eq. 4-5)
def _cross_gate(s, m, dim):
    hardest = s.masked_fill(torch.eye(s.shape[0], dtype=torch.bool), -2).amax(dim)
    return (s.diagonal() - hardest) < m


def _paradigm_w(s, tau, weight):
    n = s.shape[0]
    if weight == "exp":
        return torch.softmax(s.masked_fill(torch.eye(n, dtype=torch.bool), float("-inf")) / tau, -1)
    return offdiag(torch.full_like(s, 1.0 / (n - 1)))


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("weight", ["exp", "uniform"])
def test_paradigm_identity_view_term(weight, seed):
    """dL/dz_i = GD_i Σ_j W_ij (z'_j - R z'_i) / (N |active|) for the view-1 anchors' term."""
    h1, h2, _, zz2 = batch(seed)
    tau, r, m = 0.4, 1.3, 0.5
    a = h1.clone().requires_grad_()
    z1, z2 = unit(a), unit(h2)
    s = (z1 @ z2.T).detach()
    act = _cross_gate(s, m, -1)
    assert 0 < act.sum() < N
    paradigm_view_term(z1, z2, (z1 * z2).sum(-1), act, tau=tau, r=r, weight=weight).backward()
    w = _paradigm_w(s, tau, weight)
    gz = act.double()[:, None] * (w @ zz2 - r * w.sum(-1, keepdim=True) * zz2) / (N * act.sum())
    torch.testing.assert_close(a.grad, to_h(h1, gz), **TOL)


@pytest.mark.parametrize("seed", SEEDS)
def test_paradigm_full_loss_gradient(seed):
    """Full (symmetrised, reference) loss: view-1 identity + the view-2 term's pull through s_ii."""
    h1, h2, z1, z2 = batch(seed)
    tau, r, m = 0.4, 1.3, 0.5
    s = z1 @ z2.T
    act1, act2 = _cross_gate(s, m, -1), _cross_gate(s, m, 0)
    w = _paradigm_w(s, tau, "exp")
    gz = act1.double()[:, None] * (w @ z2 - r * z2) / (N * act1.sum())
    gz = gz - r * act2.double()[:, None] * z2 / (N * act2.sum())
    got = run("paradigm", h1, h2, tau=tau, r=r, m=m)[1]
    torch.testing.assert_close(got, to_h(h1, gz), **TOL)


# ------------------------------------------------------------------ Li Eq. 16-19 (modified losses)
def _mixed_m(z):
    gap = 1 - (z @ z.T).masked_fill(torch.eye(z.shape[0], dtype=torch.bool), -2).amax(-1)
    return float(gap.median()) + 1e-3


def _exp_weights(q, tau):
    e = torch.exp(q / tau)
    return e / offdiag(e).sum()


@pytest.mark.parametrize("seed", SEEDS)
def test_li_eq17_mmhs(seed):
    h1, h2, z1, z2 = batch(seed)
    r, m = 1.75, _mixed_m(z1)
    act1 = same_view_gate(z1, m)
    s = z1 @ z2.T
    eye = torch.eye(N, dtype=torch.bool)
    d1 = torch.sqrt(2 - 2 * s + 1e-4).masked_fill(eye, 9)
    d2 = torch.sqrt(2 - 2 * s.T + 1e-4).masked_fill(eye, 9)
    dm1, j = d1.min(-1)
    dm2 = d2.min(-1).values
    gz = (z2[j] - r * z2) / (N * dm1[:, None]) - r * z2 / (N * dm2[:, None])
    gz = act1.double()[:, None] * gz
    got = run("mmhs", h1, h2, lam=1.0, r=r, m=m)[1]
    torch.testing.assert_close(got, to_h(h1, gz), **TOL)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("name,r", [("mmhe", 1.75), ("mvicreg", 1.5), ("mbarlow_twins", 1.5)])
def test_li_eq16_18_19_mmhe_mvicreg_mbarlow(name, r, seed):
    """Gated Σ_{j≠i} G_ij (z_j - r z'_i) - r Σ_{j≠i} G'_ij z'_i, G of view 1 and G' of view 2."""
    h1, h2, z1, z2 = batch(seed)
    tau, m = 0.4, _mixed_m(z1)
    act1 = same_view_gate(z1, m)
    assert 0 < act1.sum() < N
    q1, q2 = z1 @ z1.T, z2 @ z2.T
    if name == "mmhe":  # Eq. 16: each view's own e^{q_ij/τ} / (τ Σ_{k<l} e^{q_kl/τ})
        lower = torch.ones(N, N, dtype=torch.bool).tril(-1)
        g1, g2 = (offdiag(torch.exp(q / tau)) / (tau * torch.exp(q / tau)[lower].sum()) for q in (q1, q2))
    else:  # view 1: G from z1 z1^T (VICReg, Eq. 19) or z2 z2^T (Barlow Twins, Eq. 6/18); view 2 the other way
        g1 = offdiag(_exp_weights(q1 if name == "mvicreg" else q2, tau))
        g2 = offdiag(_exp_weights(q2 if name == "mvicreg" else q1, tau))
    gz = (g1 @ z1 - r * g1.sum(-1, keepdim=True) * z2) - r * g2.sum(-1, keepdim=True) * z2
    got = run(name, h1, h2, lam=1.0, tau=tau, r=r, m=m)[1]
    torch.testing.assert_close(got, to_h(h1, act1.double()[:, None] * gz), **TOL)


# ------------------------------------------------------------------ Li App. D.2 Eq. 7-11 (originals)
@pytest.mark.parametrize("seed", SEEDS)
def test_li_appd_originals(seed):
    h1, h2, z1, z2 = batch(seed)
    lam = 3.0
    q1, s = z1 @ z1.T, z1 @ z2.T
    eye = torch.eye(N, dtype=torch.bool)
    # alignment Eq. 7 (-2/N z'_i) + MHE uniformity Eq. 8 in the reference's form (exponent q, not 2q)
    lower = torch.ones(N, N, dtype=torch.bool).tril(-1)
    e = offdiag(torch.exp(q1))
    gz = -2 * z2 / N + lam * (e @ z1) / torch.exp(q1)[lower].sum()
    torch.testing.assert_close(run("mhe", h1, h2, lam=lam)[1], to_h(h1, gz), **TOL)
    # MHS Eq. 9 with the reference's cross-view, mean-reduced distance
    d = torch.sqrt(2 - 2 * s + 1e-4).masked_fill(eye, 9)
    dm, j = d.min(-1)
    gz = -2 * z2 / N + lam * z2[j] / (N * dm[:, None])
    torch.testing.assert_close(run("mhs", h1, h2, lam=lam)[1], to_h(h1, gz), **TOL)
    # VICReg Eq. 11: (2/N)(-z'_i + ν Σ_j (z_i.z_j / N) z_j), ν = λ
    gz = (2 / N) * (-z2 + lam * (q1 @ z1) / N)
    torch.testing.assert_close(run("vicreg_li", h1, h2, lam=lam)[1], to_h(h1, gz), **TOL)
    # Barlow Twins Eq. 10 with Table 2's weight z'_i.z'_j: (2/N)(-A z'_i + ν Σ_j (z'_i.z'_j / N) z_j)
    c_diag = (z1 * z2).sum(0) / N
    gz = (2 / N) * (-(1 - (1 - lam) * c_diag) * z2 + lam * ((z2 @ z2.T) @ z1) / N)
    torch.testing.assert_close(run("barlow_twins_li", h1, h2, lam=lam)[1], to_h(h1, gz), **TOL)


# ------------------------------------------------------------------ Nie Eq. 7-9, 11 (+ 16, 18, 19, 39-40)
@pytest.mark.parametrize("seed", SEEDS)
def test_nie_eq7_16_infonce_norms(seed):
    h1, h2, z1, z2 = batch(seed)
    tau = 0.4
    s = z1 @ z2.T
    e, hn = torch.exp(s / tau), h1.norm(dim=-1)
    total = e.sum(-1)
    pos_norm = offdiag(e).sum(-1) * torch.sin(torch.arccos(s.diagonal())) / (tau * total * hn)  # Eq. 7
    g = -pos_norm[:, None] * tangent_unit(z1, z2)
    for j in range(N):
        neg_norm = e[:, j] * torch.sin(torch.arccos(s[:, j])) / (tau * total * hn)  # Eq. 16
        contrib = neg_norm[:, None] * tangent_unit(z1, z2[j].expand_as(z2))
        g = g + torch.where(torch.arange(N)[:, None] == j, 0.0, contrib)
    torch.testing.assert_close(run("infonce", h1, h2, tau=tau)[1], g / N, **TOL)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("name", ["dcl", "dcl_plus"])
def test_nie_eq9_11_18_19_dcl(name, seed):
    """Eq. 9/18 (DCL) and Eq. 11/19 (DCL+: the same, or 0 where DCL_i <= 0). Eq. 11 prints
    sin θ_ij' for the positive part; the derivation (App. C.4, Eq. 33) gives sin θ_ii', used here."""
    h1, h2, z1, z2 = batch(seed)
    tau = 0.6
    s = z1 @ z2.T
    eo, hn = offdiag(torch.exp(s / tau)), h1.norm(dim=-1)
    g = -(torch.sin(torch.arccos(s.diagonal())) / (tau * hn))[:, None] * tangent_unit(z1, z2)  # Eq. 9
    for j in range(N):
        neg_norm = eo[:, j] * sin_between(z1, z2[j].expand_as(z2)) / (tau * eo.sum(-1) * hn)  # Eq. 18
        g = g + neg_norm[:, None] * tangent_unit(z1, z2[j].expand_as(z2))
    if name == "dcl_plus":
        dcl_i = -s.diagonal() / tau + torch.log(eo.sum(-1))
        assert 0 < (dcl_i > 0).sum() < N
        g = g * (dcl_i > 0).double()[:, None]  # Eq. 11 / 19
    torch.testing.assert_close(run(name, h1, h2, tau=tau)[1], g / N, **TOL)


@pytest.mark.parametrize("alpha", [2.0, 3.0])
def test_nie_eq8_alignment(alpha):
    h1, h2, z1, z2 = batch(3)
    theta = torch.arccos((z1 * z2).sum(-1))
    norm = alpha * (2 * torch.sin(theta / 2)) ** (alpha - 2) * torch.sin(theta) / h1.norm(dim=-1)  # Eq. 8
    g = -norm[:, None] * tangent_unit(z1, z2)
    got = run("align_uniform", h1, h2, lam=0.0, alpha=alpha)[1]
    torch.testing.assert_close(got, g / N, **TOL)


@pytest.mark.parametrize("seed", SEEDS)
def test_nie_eq39_40_mat(seed):
    """ρ = angle: ||∇pos|| = ||∇neg|| = 1/||h_i|| while the margin is not met (Nie App. C.6)."""
    h1, h2, z1, z2 = batch(seed)
    m = 0.15
    th = torch.arccos(z1 @ z2.T)
    j = th.masked_fill(torch.eye(N, dtype=torch.bool), 9).argmin(-1)
    active = (th.diagonal() - th[torch.arange(N), j] + m * torch.pi) > 0
    assert 0 < active.sum() < N
    g = (tangent_unit(z1, z2[j]) - tangent_unit(z1, z2)) / h1.norm(dim=-1, keepdim=True)
    g = g * active.double()[:, None]
    torch.testing.assert_close(run("mat", h1, h2, m=m)[1], g / N, **TOL)
