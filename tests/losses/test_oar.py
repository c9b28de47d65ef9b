"""The OAR study's losses (contrastlab.losses.oar): barlow_twins and vicreg on raw embeddings against
float64 loop oracles (values; gradients against central differences of the oracle), closed forms,
invariances, finiteness on collapsed batches; the orthonormal anchors and the OAR term."""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest
import torch
from image_oracle import (
    finite_differences,
    gradient_matches_oracle,
    run,
    symmetric_in_the_views,
    value_matches_oracle,
    views,
)
from loss_oracle import barlow_twins as barlow_oracle
from loss_oracle import oar_terms, vicreg_terms

from contrastlab.losses import DEFAULTS, build_loss
from contrastlab.losses.oar import (
    RAW_INPUT,
    barlow_twins,
    nonnegative_reach,
    oar_loss,
    oar_term,
    orthonormal_anchors,
    vicreg,
)

NAMES = ["barlow_twins", "vicreg"]
# Per loss: the paper defaults and a second setting that moves every hyperparameter (γ 4 puts every
# dimension's std under the hinge, so the variance term and its gradient are active).
HP_SETS = {
    "barlow_twins": [{}, {"lam": 0.3}],
    "vicreg": [{}, {"lam": 2.0, "mu": 3.0, "nu": 0.5, "gamma": 4.0, "eps": 1e-3}],
}
#: (name, hyperparameters) of every set of :data:`HP_SETS`, over the defaults.
CASES = [(name, {**DEFAULTS[name], **hp}) for name in NAMES for hp in HP_SETS[name]]
TOL = {
    torch.float64: {"value": (1e-10, 1e-10), "grad": (1e-6, 1e-7)},
    torch.float32: {"value": (1e-5, 1e-5), "grad": (1e-4, 1e-4)},
}


# Raw embeddings with per-dimension offsets and scales (they are not normalised by the loss).
batch = functools.partial(views, offsets=True)


# ------------------------------------------------------------------ values and gradients vs oracle
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("n", [3, 8])
@pytest.mark.parametrize("name,hp", CASES)
def test_value_stats_and_gradient_match_oracle(name, hp, n, seed, dtype):
    """Value and statistics (dimension 5), both views' gradients by central differences (dimension 4)."""
    h1, h2 = batch(seed, n, dtype=dtype)
    out, x1, x2 = value_matches_oracle(name, hp, h1, h2, TOL[dtype]["value"])
    rtol, atol = TOL[dtype]["value"]
    cos = [np.dot(a, b) / np.linalg.norm(a) / np.linalg.norm(b) for a, b in zip(x1, x2, strict=True)]
    assert out.stats["align"] == pytest.approx(np.mean(cos), abs=1e-6)
    if name == "barlow_twins":
        on = barlow_oracle(x1, x2, lam=0.0)
        assert out.stats["on_diag"] == pytest.approx(on, rel=10 * rtol, abs=atol)
        assert out.stats["off_diag"] == pytest.approx(barlow_oracle(x1, x2, lam=1.0) - on, rel=10 * rtol)
    else:
        want = vicreg_terms(x1, x2, hp["gamma"], hp["eps"])
        got = (out.stats["invariance"], out.stats["variance"], out.stats["covariance"])
        assert got == pytest.approx(want, rel=10 * rtol, abs=atol)
    h1, h2 = batch(seed, n, d=4, dtype=dtype)
    g1 = gradient_matches_oracle(name, hp, h1, h2, TOL[dtype]["grad"], finite_differences)
    assert g1.abs().max() > 1e-3


def test_hand_computed_closed_forms():
    eps = 1e-5
    h = torch.tensor([[1.0], [-1.0]], dtype=torch.float64)  # standardised: ±1/sqrt(1 + eps), C = 1/(1+eps)
    assert build_loss("barlow_twins")(h, h).loss.item() == pytest.approx((eps / (1 + eps)) ** 2, rel=1e-9)
    assert barlow_twins(h, -h, lam=5e-3, eps=0.0).item() == pytest.approx(4.0)  # C = -1
    # VICReg: dim 0 has unbiased var 2 (std > γ: no hinge), dim 1 is constant (std sqrt(ε))
    h = torch.tensor([[1.0, 0.0], [-1.0, 0.0]], dtype=torch.float64)
    out = build_loss("vicreg")(h, h)
    assert out.loss.item() == pytest.approx(25.0 * (1 - math.sqrt(1e-4)) / 2, rel=1e-12)
    assert out.stats["covariance"] == 0.0 and out.stats["invariance"] == 0.0
    # covariance: cov = [[2, 2], [2, 2]] -> (2² + 2²)/D = 4 per view, two views; invariance (1/ND)Σ 1²
    h = torch.tensor([[1.0, 1.0], [-1.0, -1.0]], dtype=torch.float64)
    out = build_loss("vicreg")(h, h + 1.0)
    assert out.stats["covariance"] == pytest.approx(8.0) and out.stats["invariance"] == pytest.approx(1.0)
    assert out.loss.item() == pytest.approx(25.0 * 1.0 + 1.0 * 8.0)


# ------------------------------------------------------------------ raw inputs and invariances
def test_registry_passes_raw_embeddings_only_to_raw_losses():
    assert RAW_INPUT == {"barlow_twins", "vicreg"}
    h1, h2 = batch(2, 8)
    registered = build_loss("vicreg")(h1, h2).loss
    torch.testing.assert_close(registered, vicreg(h1, h2, lam=25.0, mu=25.0, nu=1.0), rtol=1e-14, atol=0)
    bt = build_loss("barlow_twins")(h1, h2).loss
    torch.testing.assert_close(bt, barlow_twins(h1, h2, lam=5e-3), rtol=1e-14, atol=0)
    # VICReg is not scale invariant: the registry did not normalise the rows
    scaled = build_loss("vicreg")(3.0 * h1, 3.0 * h2).loss.item()
    assert scaled != pytest.approx(registered.item(), rel=1e-3)


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("n", [3, 8])
def test_barlow_twins_per_dimension_affine_invariance(n, seed):
    """Each view's dimensions may be rescaled by a positive factor and shifted independently, and a
    dimension's sign flipped in both views: exactly invariant with eps = 0, up to the eps 1e-5 else."""
    h1, h2 = batch(seed, n)
    g = torch.Generator().manual_seed(100 + seed)
    d = h1.shape[1]
    a1, a2 = [torch.exp(torch.randn(d, generator=g, dtype=torch.float64)) for _ in range(2)]
    b1, b2 = [3 * torch.randn(d, generator=g, dtype=torch.float64) for _ in range(2)]
    sign = torch.where(torch.randn(d, generator=g) < 0, -1.0, 1.0).double()
    t1, t2 = sign * (a1 * h1 + b1), sign * (a2 * h2 + b2)
    for lam in (5e-3, 0.7):
        moved, still = barlow_twins(t1, t2, lam=lam, eps=0.0), barlow_twins(h1, h2, lam=lam, eps=0.0)
        torch.testing.assert_close(moved, still, rtol=1e-10, atol=1e-12)
    # with the registry's eps 1e-5 the invariance is approximate: each C_ij moves by O(eps / var)
    m1, m2 = a1.clamp(0.5, 2.0), a2.clamp(0.5, 2.0)
    t1, t2 = sign * (m1 * h1 + b1), sign * (m2 * h2 + b2)
    moved, still = build_loss("barlow_twins")(t1, t2).loss, build_loss("barlow_twins")(h1, h2).loss
    torch.testing.assert_close(moved, still, rtol=0, atol=5e-4)


@pytest.mark.parametrize("name", NAMES)
def test_symmetric_in_views_and_permutation_invariant(name):
    h1, h2 = batch(4, 8)
    out = symmetric_in_the_views(name, h1, h2)
    perm = torch.randperm(8, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(build_loss(name)(h1[perm], h2[perm]).loss, out.loss, rtol=1e-12, atol=1e-12)


def test_vicreg_invariant_to_a_common_shift():
    h1, h2 = batch(5, 8)
    shift = torch.tensor([3.0, -2.0, 0.5, 7.0, -1.0], dtype=torch.float64)
    shifted = build_loss("vicreg")(h1 + shift, h2 + shift).loss
    torch.testing.assert_close(shifted, build_loss("vicreg")(h1, h2).loss, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("kind", ["identical", "collapsed", "collapsed_apart"])
@pytest.mark.parametrize("n", [2, 8])
@pytest.mark.parametrize("name", NAMES)
def test_finite_for_identical_views_and_collapsed_batches(name, n, kind, dtype):
    """identical: h2 = h1; collapsed: every row of both views equal (std 0: eps keeps it finite);
    collapsed_apart: each view constant, the two constants different."""
    h1, h2 = batch(6, n, dtype=dtype)
    if kind == "identical":
        h2 = h1.clone()
    elif kind == "collapsed":
        h1 = h1[:1].expand(n, -1).clone()
        h2 = h1.clone()
    else:
        h1, h2 = h1[:1].expand(n, -1).clone(), h2[1:2].expand(n, -1).clone()
    out, g1, g2 = run(name, h1, h2)
    assert torch.isfinite(out.loss) and torch.isfinite(g1).all() and torch.isfinite(g2).all()
    assert all(math.isfinite(v) for v in out.stats.values())
    if kind == "collapsed":  # C = 0: every diagonal term is 1; VICReg: only the variance hinge remains
        d = h1.shape[1]
        want = float(d) if name == "barlow_twins" else 25.0 * (1 - math.sqrt(1e-4))
        assert out.loss.item() == pytest.approx(want, rel=1e-5)


# ------------------------------------------------------------------ orthonormal anchors
@pytest.mark.parametrize("k,d", [(1, 1), (3, 3), (10, 128), (100, 512)])
def test_anchors_are_orthonormal_and_reproducible(k, d):
    c = orthonormal_anchors(k, d, generator=torch.Generator().manual_seed(42))
    assert c.shape == (k, d) and c.dtype == torch.float32
    torch.testing.assert_close(
        c.double() @ c.double().T, torch.eye(k, dtype=torch.float64), rtol=0, atol=1e-6
    )
    again = orthonormal_anchors(k, d, generator=torch.Generator().manual_seed(42))
    assert torch.equal(c, again)
    if d > 1:
        other = orthonormal_anchors(k, d, generator=torch.Generator().manual_seed(43))
        assert not torch.allclose(c, other)


def test_anchors_are_the_sign_fixed_qr_of_the_seeded_gaussian():
    """Oracle: NumPy's QR of the same Gaussian draw, columns signed so that diag(R) > 0."""
    gauss = torch.randn(16, 5, generator=torch.Generator().manual_seed(7), dtype=torch.float64).numpy()
    q, r = np.linalg.qr(gauss)
    want = (q * np.sign(np.diag(r))).T
    got = anchors64(5, 16, seed=7)
    np.testing.assert_allclose(got.numpy(), want, rtol=0, atol=1e-12)


@pytest.mark.parametrize(
    "k,d,generator,match",
    [
        (6, 5, True, "num_classes must be <= dim"),
        (0, 5, True, "num_classes must be a positive integer"),
        (2, 0, True, "dim must be a positive integer"),
        (2.0, 5, True, "num_classes must be a positive integer"),
        (2, 5, False, "generator must be a torch.Generator"),
    ],
)
def test_anchor_arguments_are_validated(k, d, generator, match):
    gen = torch.Generator().manual_seed(0) if generator else 0
    with pytest.raises(ValueError, match=match):
        orthonormal_anchors(k, d, generator=gen)


# ------------------------------------------------------------------ the OAR term
def anchors64(k=4, d=6, seed=0):
    return orthonormal_anchors(k, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def test_oar_term_closed_forms():
    c = anchors64()
    labels = torch.tensor([0, 1, 2, 3, 1])
    scales = torch.tensor([0.5, 1.0, 2.0, 7.0, 3.0], dtype=torch.float64)[:, None]
    aligned = scales * c[labels]
    assert oar_term(aligned, labels, c).item() == pytest.approx(0.0, abs=1e-12)
    assert oar_term(-aligned, labels, c, reduction="sum").item() == pytest.approx(2.0 * 5, abs=1e-12)
    assert oar_term(-aligned, labels, c).item() == pytest.approx(2.0, abs=1e-12)
    other = c[(labels + 1) % 4]  # orthogonal to the own anchor: 1 per sample
    assert oar_term(other, labels, c, reduction="sum").item() == pytest.approx(5.0, abs=1e-12)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("reduction", ["mean", "sum"])
@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("n", [3, 8])
def test_oar_term_value_and_gradient_match_oracle(n, seed, masked, reduction, dtype):
    g = torch.Generator().manual_seed(seed)
    c = anchors64(seed=seed)
    z = (2.0 * torch.randn(n, 6, generator=g, dtype=torch.float64)).to(dtype).requires_grad_()
    labels = torch.randint(0, 4, (n,), generator=g)
    mask = torch.arange(n) % 2 == 0 if masked else None
    if masked:
        labels = labels.masked_fill(~mask, -1)  # unlabelled rows carry no valid label
    loss = oar_term(z, labels, c.to(dtype), labelled_mask=mask, reduction=reduction)
    loss.backward()
    assert loss.dtype == dtype
    terms = oar_terms(
        z.detach().double().tolist(), labels.tolist(), c.tolist(), mask.tolist() if masked else None
    )
    want = sum(terms) / (len(terms) if reduction == "mean" else 1)
    tol = 1e-12 if dtype == torch.float64 else 1e-5
    assert loss.item() == pytest.approx(want, rel=tol, abs=tol)
    # d/dz_i (1 - ẑ_i·c) = -(c - (ẑ_i·c) ẑ_i) / ||z_i||, times 1/|S| for the mean; 0 if unlabelled
    zz = z.detach().double()
    norm = zz.norm(dim=-1, keepdim=True)
    zh, a = zz / norm, c[labels.clamp_min(0)]
    want_grad = -(a - (zh * a).sum(-1, keepdim=True) * zh) / norm / (len(terms) if reduction == "mean" else 1)
    if masked:
        want_grad[~mask] = 0.0
    torch.testing.assert_close(z.grad.double(), want_grad, rtol=10 * tol, atol=10 * tol)


def test_oar_loss_is_the_authors_two_view_reduction():
    """The authors' quantity (OAR_model_SimCLR.py, as its semantics): -[Σ_i c_{y_i}·ẑ1_i + Σ_i
    c_{y_i}·ẑ2_i] / (2B). ``oar_loss`` is the paper's 1 - cos form: the same plus 1, same gradient."""
    c = anchors64(k=3, d=5, seed=3)
    g = torch.Generator().manual_seed(3)
    z1, z2 = [torch.randn(6, 5, generator=g, dtype=torch.float64).requires_grad_() for _ in range(2)]
    labels = torch.randint(0, 3, (6,), generator=g)
    ours = oar_loss(z1, z2, labels, c)
    ours.backward()
    g1, g2 = z1.grad.clone(), z2.grad.clone()
    z1.grad = z2.grad = None
    unit1, unit2 = (torch.nn.functional.normalize(z, dim=-1) for z in (z1, z2))
    ref = -((unit1 * c[labels]).sum() + (unit2 * c[labels]).sum()) / 2 / len(labels)
    ref.backward()
    assert ours.item() == pytest.approx(ref.item() + 1.0, abs=1e-12)
    torch.testing.assert_close(g1, z1.grad, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(g2, z2.grad, rtol=1e-12, atol=1e-14)


def test_oar_term_edge_cases_and_validation():
    c = anchors64()
    z = torch.randn(4, 6, dtype=torch.float64, requires_grad=True)
    none = torch.zeros(4, dtype=torch.bool)
    loss = oar_term(z, torch.full((4,), -1), c, labelled_mask=none)
    loss.backward()
    assert loss.item() == 0.0 and torch.equal(z.grad, torch.zeros_like(z))
    zero = oar_term(torch.zeros(2, 6), torch.tensor([0, 1]), c.float())  # zero vectors: cos 0, finite
    assert zero.item() == pytest.approx(1.0)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = oar_term(z.detach().bfloat16(), torch.tensor([0, 1, 2, 3]), c)
    assert out.dtype == torch.float32
    with pytest.raises(ValueError, match="labels of labelled samples must be in"):
        oar_term(z, torch.tensor([0, 1, 2, 4]), c)
    with pytest.raises(ValueError, match="labels of labelled samples must be in"):
        oar_term(z, torch.tensor([0, -1, 2, 3]), c, labelled_mask=torch.tensor([True, True, False, True]))
    with pytest.raises(ValueError, match="reduction must be one of mean, sum"):
        oar_term(z, torch.tensor([0, 1, 2, 3]), c, reduction="none")
    with pytest.raises(ValueError, match="labels must be an integer tensor"):
        oar_term(z, torch.zeros(4), c)
    with pytest.raises(ValueError, match="labelled_mask must be a bool tensor"):
        oar_term(z, torch.tensor([0, 1, 2, 3]), c, labelled_mask=torch.ones(4))
    with pytest.raises(ValueError, match="anchors"):
        oar_term(z, torch.tensor([0, 1, 2, 3]), torch.eye(4, 5))


def test_nonnegative_embeddings_reach_an_anchor_only_up_to_its_positive_part():
    """Without a projection head the ResNet-18's pooled ReLU output is non-negative: the best cosine
    to anchor c is ||c+|| (attained at x = c+, never exceeded by any x >= 0), about sqrt(1/2) = 0.71
    for random anchors in 512-d (E||c+||^2 = 1/2 by symmetry)."""
    anchors = anchors64(10, 512)
    reach = nonnegative_reach(anchors)
    best = torch.nn.functional.cosine_similarity(anchors, anchors.clamp_min(0), dim=1)
    torch.testing.assert_close(reach, best, rtol=1e-12, atol=0)
    x = torch.rand(2000, 512, generator=torch.Generator().manual_seed(1), dtype=torch.float64) ** 4
    cos = torch.nn.functional.normalize(x, dim=1) @ anchors.T
    assert (cos <= reach + 1e-12).all()
    many = nonnegative_reach(anchors64(512, 512, seed=2))
    assert abs(float((many**2).mean()) - 0.5) < 0.01 and 0.6 < float(many.min()) < float(many.max()) < 0.8
