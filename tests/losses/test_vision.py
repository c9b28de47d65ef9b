"""Vision losses of MACL Table 9 (ntxent, flatnce, dcl_vision, dualtemp, macl_vision) against float64
loop oracles: values, gradients, the relations between the losses, the released MACL function's
semantics, symmetry, scale invariance and finiteness."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from image_oracle import (
    as_lists,
    finite_differences,
    gradient_matches_oracle,
    run,
    symmetric_in_the_views,
    value_matches_oracle,
)
from image_oracle import views as batch
from loss_oracle import (
    dualtemp_weights,
    macl_vision_tau,
    macl_vision_weights,
    positive_prob,
    two_n,
    value,
)

from contrastlab.losses import DEFAULTS, build_loss
from contrastlab.losses.vision import negatives_mask, symmetric_similarity

NAMES = ["ntxent", "flatnce", "dcl_vision", "dualtemp", "macl_vision"]
# Per loss: the paper defaults (App. B.3) and a second setting that moves every hyperparameter.
HP_SETS = {
    "ntxent": [{}, {"tau": 0.5}],
    "flatnce": [{}, {"tau": 0.5}],
    "dcl_vision": [{}, {"tau": 0.5}],
    "dualtemp": [{}, {"tau": 0.2, "tau_beta": 0.7}, {"tau": 0.2, "tau_beta": 0.7, "negatives": "both_views"}],
    "macl_vision": [{}, {"tau0": 0.2, "alpha": 1.0, "a0": 0.3, "reweight": False}],
}
#: (name, hyperparameters) of every set of :data:`HP_SETS`, over the defaults.
CASES = [(name, {**DEFAULTS[name], **hp}) for name in NAMES for hp in HP_SETS[name]]
TOL = {
    torch.float64: {"value": (1e-10, 1e-10), "grad": (1e-9, 1e-8)},
    torch.float32: {"value": (2e-5, 2e-5), "grad": (2e-4, 2e-4)},
}


# ------------------------------------------------------------------ oracle gradients
def oracle_similarity_grad(name, h1, h2, hp):
    """G[k][j] = dL/ds_kj with the stop-gradients of each loss (weights and τ_a are constants)."""
    _, s, pos, negs = two_n(h1, h2)
    n2 = len(s)
    g = np.zeros((n2, n2))
    # The softmax of anchor k runs over j != k (2N - 1 others), over its 2N - 2 negatives only (DCL, and
    # FlatNCE, whose gradient is DCL's), or over the other view only (dualtemp's released form: the
    # positive and N - 1 negatives).
    others = [[j for j in range(n2) if j != k] for k in range(n2)]
    if name in ("dcl_vision", "flatnce"):
        tau, coef, others = hp["tau"], [1.0] * n2, negs
    elif name == "ntxent":
        tau, coef = hp["tau"], [1.0] * n2
    elif name == "dualtemp":
        tau, coef = hp["tau"], dualtemp_weights(h1, h2, hp["tau"], hp["tau_beta"], hp["negatives"])
        if hp["negatives"] == "other_view":
            others = [[j for j in range(n2) if (j < n2 // 2) != (k < n2 // 2)] for k in range(n2)]
    else:
        args = (hp["tau0"], hp["alpha"], hp["a0"])
        tau, coef = macl_vision_tau(h1, h2, *args), macl_vision_weights(h1, h2, *args, hp["reweight"])
    for k in range(n2):
        den = sum(math.exp(s[k][j] / tau) for j in others[k])
        for j in others[k]:
            p_kj = math.exp(s[k][j] / tau) / den
            g[k][j] = coef[k] * (p_kj - (1.0 if j == pos[k] else 0.0)) / (tau * n2)
        if pos[k] not in others[k]:  # DCL: the positive's logit is outside the softmax
            g[k][pos[k]] = -coef[k] / (tau * n2)
    return g


def oracle_grad(name, h1, h2, hp):
    """dL/dh1, dL/dh2 from G: dL/dz_m = Σ_j G_mj z_j + Σ_k G_km z_k, then through z = h/||h||."""
    z, _, _, _ = two_n(h1, h2)
    g = oracle_similarity_grad(name, h1, h2, hp)
    rows = [np.asarray(r, dtype=np.float64) for r in list(h1) + list(h2)]
    out = []
    for m in range(len(z)):
        gz = sum(g[m][j] * z[j] for j in range(len(z))) + sum(g[k][m] * z[k] for k in range(len(z)))
        out.append((gz - (gz @ z[m]) * z[m]) / np.linalg.norm(rows[m]))
    n = len(h1)
    return np.array(out[:n]), np.array(out[n:])


# ------------------------------------------------------------------ values and gradients vs oracle
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("n", [2, 3, 8])
@pytest.mark.parametrize("name,hp", CASES)
def test_value_stats_and_gradient_match_oracle(name, hp, n, seed, dtype):
    h1, h2 = batch(seed, n, dtype=dtype)
    out, x1, x2 = value_matches_oracle(name, hp, h1, h2, TOL[dtype]["value"])
    rtol, atol = TOL[dtype]["value"]
    z, s, pos, _ = two_n(x1, x2)
    assert out.stats["align"] == pytest.approx(sum(s[k][pos[k]] for k in range(2 * n)) / (2 * n), abs=1e-6)
    if name == "flatnce":
        assert out.stats["ntxent"] == pytest.approx(value("ntxent", x1, x2, hp), rel=rtol, abs=atol)
    if name == "dualtemp":
        w = dualtemp_weights(x1, x2, hp["tau"], hp["tau_beta"], hp["negatives"])
        assert out.stats["weight_mean"] == pytest.approx(np.mean(w), rel=10 * rtol)
    if name == "macl_vision":
        tau_a = macl_vision_tau(x1, x2, hp["tau0"], hp["alpha"], hp["a0"])
        assert out.stats["tau_a"] == pytest.approx(tau_a, rel=1e-6)
        if hp["reweight"]:
            v = macl_vision_weights(x1, x2, hp["tau0"], hp["alpha"], hp["a0"], True)
            assert out.stats["weight_mean"] == pytest.approx(np.mean(v), rel=10 * rtol)
    gradient_matches_oracle(name, hp, h1, h2, TOL[dtype]["grad"], oracle_grad)


@pytest.mark.parametrize("n", [2, 3])
@pytest.mark.parametrize("name", ["ntxent", "dcl_vision"])
def test_oracle_gradient_is_the_finite_difference_of_the_oracle(name, n):
    """The analytic oracle gradient against central differences (the two losses without stop-gradients)."""
    h1, h2 = batch(3, n, d=3)
    hp = {**DEFAULTS[name], **HP_SETS[name][1]}
    x1, x2 = as_lists(h1), as_lists(h2)
    want = np.concatenate(oracle_grad(name, x1, x2, hp))
    fd = np.concatenate(finite_differences(name, x1, x2, hp))
    np.testing.assert_allclose(fd, want, rtol=0, atol=1e-7)


def test_hand_computed_closed_forms():
    """z1 = z2 = {e1, e2}: each anchor sees its positive at cosine 1 and two negatives at cosine 0."""
    eye = torch.eye(2, dtype=torch.float64)
    tau, tau_b = 0.5, 2.0
    ntx = math.log(math.exp(1 / tau) + 2) - 1 / tau
    assert build_loss("ntxent", tau=tau)(eye, eye).loss.item() == pytest.approx(ntx, abs=1e-12)
    assert build_loss("flatnce", tau=tau)(eye, eye).loss.item() == pytest.approx(ntx, abs=1e-12)
    assert build_loss("dcl_vision", tau=tau)(eye, eye).loss.item() == pytest.approx(
        math.log(2) - 1 / tau, abs=1e-12
    )
    w = (math.exp(1 / tau) + 2) / (math.exp(1 / tau_b) + 2)  # (1 - P(τ_β)) / (1 - P(τ))
    out = build_loss("dualtemp", tau=tau, tau_beta=tau_b, negatives="both_views")(eye, eye)
    assert out.loss.item() == pytest.approx(w * ntx, abs=1e-12)
    assert out.stats["weight_mean"] == pytest.approx(w, abs=1e-12)
    # The released form: one negative per anchor (the other view's other sample, cosine 0).
    w = (math.exp(1 / tau) + 1) / (math.exp(1 / tau_b) + 1)
    out = build_loss("dualtemp", tau=tau, tau_beta=tau_b)(eye, eye)
    assert out.loss.item() == pytest.approx(w * (math.log(math.exp(1 / tau) + 1) - 1 / tau), abs=1e-12)
    assert out.stats["weight_mean"] == pytest.approx(w, abs=1e-12)
    # MACL: A = 1, τ_a = τ0 (1 + α (1 - A0)), V = 1 / (1 - P + 1e-8)
    tau_a = 0.2 * (1 + 0.5 * (1 - 0.25))
    p = math.exp(1 / tau_a) / (math.exp(1 / tau_a) + 2)
    want = -math.log(p) / (1 - p + 1e-8)
    out = build_loss("macl_vision", tau0=0.2, alpha=0.5, a0=0.25)(eye, eye)
    assert out.loss.item() == pytest.approx(want, abs=1e-12)
    assert out.stats["tau_a"] == pytest.approx(tau_a, abs=1e-15)


# ------------------------------------------------------------------ relations between the losses
@pytest.mark.parametrize("tau", [0.1, 0.5])
@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("n", [2, 3, 8])
def test_flatnce_and_dcl_have_the_same_gradient(n, seed, tau):
    """MACL §5.2: FlatNCE has exactly DCL's gradient; FlatNCE's value is NT-Xent's."""
    h1, h2 = batch(seed, n)
    flat, f1, f2 = run("flatnce", h1, h2, tau=tau)
    dcl, d1, d2 = run("dcl_vision", h1, h2, tau=tau)
    torch.testing.assert_close(f1, d1, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(f2, d2, rtol=1e-12, atol=1e-12)
    assert torch.all(f1.norm(dim=-1) > 0)
    ntx = build_loss("ntxent", tau=tau)(h1, h2).loss
    torch.testing.assert_close(flat.loss.detach(), ntx, rtol=1e-12, atol=1e-12)
    assert flat.stats["ntxent"] == pytest.approx(ntx.item(), rel=1e-12)
    assert abs(flat.loss.item() - dcl.loss.item()) > 1e-3  # the values differ, only the gradients agree


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("tau", [0.1, 0.3])
@pytest.mark.parametrize("n", [2, 3, 8])
def test_dualtemp_with_equal_temperatures_is_ntxent_exactly(n, tau, dtype):
    h1, h2 = batch(n, n, dtype=dtype)
    dual, a1, a2 = run("dualtemp", h1, h2, tau=tau, tau_beta=tau, negatives="both_views")
    ntx, b1, b2 = run("ntxent", h1, h2, tau=tau)
    assert torch.equal(dual.loss, ntx.loss) and torch.equal(a1, b1) and torch.equal(a2, b2)
    assert dual.stats["weight_mean"] == 1.0


@pytest.mark.parametrize("tau0", [0.1, 0.4])
@pytest.mark.parametrize("n", [2, 3, 8])
def test_macl_vision_without_adaptation_or_reweighting_is_ntxent(n, tau0):
    h1, h2 = batch(n + 10, n)
    macl, a1, a2 = run("macl_vision", h1, h2, tau0=tau0, alpha=0.0, a0=0.7, reweight=False)
    ntx, b1, b2 = run("ntxent", h1, h2, tau=tau0)
    for x, y in ((macl.loss, ntx.loss), (a1, b1), (a2, b2)):
        torch.testing.assert_close(x, y, rtol=1e-14, atol=1e-14)
    assert macl.stats["tau_a"] == tau0


def released_macl_semantics(pos, neg, tau_0, alpha, a0, eps=0.0):
    """The released ``MACL(pos, neg, tau_0, alpha, A0)`` (github.com/chenhaoxing/MACL, macl.py) as
    its semantics: A = mean of the detached positive cosines, τ = τ0 (1 + α (A - A0)), P = softmax of
    [pos, neg]/τ at the positive, loss = mean of -sg(1 / (1 - P)) log P. ``eps`` (0 in the release)
    is added to 1 - P, as protocol.md's V does."""
    tau = tau_0 * (1.0 + alpha * (pos.detach().mean() - a0))
    log_p = pos[:, 0] / tau - torch.logsumexp(torch.cat([pos, neg], dim=1) / tau, dim=1)
    weight = (1.0 - log_p.exp() + eps).reciprocal().detach()
    return (weight * -log_p).mean(), tau


@pytest.mark.parametrize("alpha,a0", [(0.5, 0.0), (1.0, 0.3)])
@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("n", [2, 3, 8])
def test_macl_vision_is_the_released_function_on_the_2n_batch(n, seed, alpha, a0):
    """The release fed, for each of the 2N anchors, its positive cosine (pos, 2N x 1) and its 2N - 2
    negative cosines (neg, 2N x (2N - 2)): equal up to our documented +1e-8 in V's denominator."""
    h1, h2 = batch(seed, n, noise=1.0)
    ours, g1, g2 = run("macl_vision", h1, h2, tau0=0.1, alpha=alpha, a0=a0, reweight=True)
    for eps in (1e-8, 0.0):
        a, b = h1.clone().requires_grad_(), h2.clone().requires_grad_()
        sim, positive = symmetric_similarity(F.normalize(a, dim=-1), F.normalize(b, dim=-1))
        pos = sim.gather(1, positive[:, None])
        neg = sim[negatives_mask(positive)].reshape(2 * n, 2 * n - 2)
        ref, tau = released_macl_semantics(pos, neg, 0.1, alpha, a0, eps=eps)
        ref.backward()
        assert ours.stats["tau_a"] == pytest.approx(tau.item(), rel=1e-12)
        if eps:  # with the same V: equal to rounding
            rtol, atol = 1e-9, 1e-12
        else:  # the release's V = 1/(1 - P): each anchor's term differs by at most 1e-8 / (1 - P_k)
            one_minus_p = torch.softmax(torch.cat([pos, neg], 1).detach() / tau, 1)[:, 1:].sum(1)
            rtol = 2e-8 / one_minus_p.min().item()
            atol = rtol * max(a.grad.abs().max().item(), b.grad.abs().max().item())
            assert rtol < 1e-3
        torch.testing.assert_close(ours.loss, ref.detach(), rtol=rtol, atol=0)
        torch.testing.assert_close(g1, a.grad, rtol=rtol, atol=atol)
        torch.testing.assert_close(g2, b.grad, rtol=rtol, atol=atol)


# ------------------------------------------------------------------ properties
@pytest.mark.parametrize("n", [2, 3, 8])
@pytest.mark.parametrize("name", NAMES)
def test_symmetric_in_the_two_views(name, n):
    symmetric_in_the_views(name, *batch(4, n))


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("kind", ["identical", "antipodal", "pairs_antipodal"])
@pytest.mark.parametrize("n", [2, 8])
@pytest.mark.parametrize("name", NAMES)
def test_finite_for_identical_and_antipodal_views(name, n, kind, dtype):
    """identical: h2 = h1; antipodal: h2 = -h1 (every positive at cosine -1); pairs_antipodal: h2 = h1
    with the samples in +-pairs, so every anchor's positive is at cosine 1 and a negative at -1."""
    h1, _ = batch(6, n, dtype=dtype)
    if kind == "pairs_antipodal":
        h1 = torch.cat([h1[: n // 2], -h1[: n // 2]])
    h2 = -h1 if kind == "antipodal" else h1.clone()
    hps = [{}] + ([{"tau": 0.01}] if name != "macl_vision" else [{"tau0": 0.01}])
    for hp in hps:
        out, g1, g2 = run(name, h1, h2, **hp)
        assert torch.isfinite(out.loss) and torch.isfinite(g1).all() and torch.isfinite(g2).all()
        assert all(math.isfinite(v) for v in out.stats.values())
        want = -1.0 if kind == "antipodal" else 1.0
        assert out.stats["align"] == pytest.approx(want, abs=1e-6)


def test_dualtemp_weight_cap_keeps_float32_finite():
    """Perfectly aligned views whose only negatives are antipodal: 1 - P(τ) ~ e^{-2/τ} underflows any
    float at τ = 0.005; the capped log-weight keeps loss and gradient finite (and the oracle's weight
    is then astronomically large: the cap is active)."""
    h = torch.tensor([[1.0, 0.2], [-1.0, -0.2]])
    for dtype in (torch.float32, torch.float64):
        out, g1, g2 = run("dualtemp", h.to(dtype), h.to(dtype), tau=0.005, tau_beta=1.0)
        assert torch.isfinite(out.loss) and torch.isfinite(g1).all() and torch.isfinite(g2).all()
        assert out.stats["weight_mean"] == pytest.approx(math.exp(80.0), rel=1e-5)
    _, s, pos, _ = two_n(h.tolist(), h.tolist())
    assert 1 - positive_prob(s, 0, pos[0], 0.005) == 0.0  # the oracle's own 1 - P underflows to 0


@pytest.mark.parametrize("n", [2, 5, 16])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_dualtemp_default_is_the_released_simco_loss(n, seed):
    """MACL Table 9's Dual row follows the released SimCo loss (Dual-temperature,
    ``dual_temperature_loss_func`` averaged over (q1, q2) and (q2, q1)): each anchor's softmax holds its
    positive and the N - 1 other samples of the other view. Value and gradient equal a float64 loop of
    that form; the 2N - 2 form of the other Table 9 losses is the ``both_views`` option and differs."""
    h1, h2 = batch(seed + 20, n)
    hp = {"tau": 0.1, "tau_beta": 1.0}
    out, g1, g2 = run("dualtemp", h1, h2, **hp)
    x1, x2 = as_lists(h1), as_lists(h2)
    from loss_oracle import dualtemp as oracle

    assert out.loss.item() == pytest.approx(oracle(x1, x2, 0.1, 1.0, "other_view"), rel=1e-11, abs=1e-12)
    want1, want2 = oracle_grad("dualtemp", x1, x2, {**hp, "negatives": "other_view"})
    np.testing.assert_allclose(g1.numpy(), want1, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(g2.numpy(), want2, rtol=1e-8, atol=1e-10)
    both = build_loss("dualtemp", negatives="both_views", **hp)(h1, h2).loss.item()
    assert both == pytest.approx(oracle(x1, x2, 0.1, 1.0, "both_views"), rel=1e-11)
    assert abs(both - out.loss.item()) > 1e-6
