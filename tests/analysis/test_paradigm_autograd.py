"""The autograd paradigm view (GD mass, W, R) equals the closed forms of paradigm_components, float64."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from contrastlab.analysis.paradigm import PARADIGM_LOSSES, paradigm_components, paradigm_gradient
from contrastlab.analysis.paradigm_autograd import paradigm_by_autograd, view_batch
from contrastlab.losses import build_loss
from contrastlab.losses._common import gated, same_view_gate
from contrastlab.losses.catalog import DEFAULTS
from contrastlab.losses.li2024 import (
    barlow_twins_view_term,
    mhe_view_term,
    mhs_view_term,
    paradigm_view_term,
    vicreg_view_term,
)

TOL = {"atol": 1e-9, "rtol": 1e-7}
N, D = 6, 16


def batch(seed):
    g = torch.Generator().manual_seed(seed)
    h1 = torch.randn(N, D, generator=g, dtype=torch.float64)
    h2 = h1 + 0.5 * torch.randn(N, D, generator=g, dtype=torch.float64)
    return F.normalize(h1, dim=-1), F.normalize(h2, dim=-1)


def _between(gaps):
    """A margin between the two middle gaps: half the anchors active, none on the edge."""
    ordered = gaps.sort().values
    return float(ordered[N // 2 - 1] + ordered[N // 2]) / 2


def hyper(name, z1, z2):
    """The catalog defaults, with a margin that leaves half the anchors active, and τ large enough
    that the weights are not all on one negative."""
    hp = dict(DEFAULTS[name])
    if "tau" in hp:
        hp["tau"] = 0.4
    eye = torch.eye(N, dtype=torch.bool)
    s = z1 @ z2.T
    if name in ("mpt", "paradigm"):
        hp["m"] = _between(s.diagonal() - s.masked_fill(eye, -2).amax(-1))
    if name == "met":
        d = (2 - 2 * s).clamp_min(1e-4).sqrt()
        hp["m"] = _between(d.masked_fill(eye, 9).amin(-1) - d.diagonal())
    if name in ("mmhe", "mmhs", "mvicreg", "mbarlow_twins"):
        q = (z1 @ z1.T).masked_fill(torch.eye(N, dtype=torch.bool), -2).amax(-1)
        hp["m"] = _between(1 - q)  # half the samples gated in
    return hp


def view1_term(name, hp):
    """The view-1 term of the symmetric losses, as Li Table 2 (and paradigm_components) describe it."""

    def term(z1, z2):
        if name == "paradigm":
            act = paradigm_components(z1, z2, losses=("paradigm",), hp={name: hp})[name].gd.bool()
            return paradigm_view_term(
                z1, z2, (z1 * z2).sum(-1), act, tau=hp["tau"], r=hp["r"], weight=hp["weight"]
            )
        u1 = gated(z1, same_view_gate(z1, hp["m"]))
        u2 = gated(z2, same_view_gate(z2, hp["m"]))
        a = 2 - 2 * (u1 * u2).sum(-1)
        if name == "mmhe":
            return mhe_view_term(u1, a, lam=hp["lam"], tau=hp["tau"], weight=hp["weight"], r=hp["r"])
        if name == "mmhs":
            return mhs_view_term(u1, u2, a, lam=hp["lam"], r=hp["r"])
        kind = vicreg_view_term if name == "mvicreg" else barlow_twins_view_term
        return kind(u1, u2, lam=hp["lam"], tau=hp["tau"], weight=hp["weight"], r=hp["r"])

    return term


ONE_WAY = ("infonce", "arccon", "mpt", "met")


#: Li Table 5's other weightings: MHE's and VICReg's own (r None: VICReg's ratio), the paradigm's uniform W.
OTHER_WEIGHTS = [
    ("mmhe", {"weight": "none"}),
    ("mvicreg", {"weight": "none", "r": None}),
    ("paradigm", {"weight": "uniform"}),
]


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("name,opts", [(name, {}) for name in PARADIGM_LOSSES] + OTHER_WEIGHTS)
def test_autograd_view_equals_the_closed_form(name, opts, seed):
    z1, z2 = batch(seed)
    hp = {**hyper(name, z1, z2), **opts}
    closed = paradigm_components(z1, z2, losses=(name,), hp={name: hp})[name]
    mass = closed.scale * closed.gd * closed.w.sum(-1)
    active = mass != 0  # negative with VICReg's own weights: G = (2/N²) q_ij can be < 0
    assert 0 < int(active.sum()) and (name in ("infonce", "arccon") or int(active.sum()) < N)
    registry = build_loss(name, **hp)
    term = registry.on_views if name in ONE_WAY else view1_term(name, hp)
    view = paradigm_by_autograd(term, z1, z2)
    torch.testing.assert_close(view.mass, mass, **TOL)
    w = closed.w / closed.w.sum(-1, keepdim=True).where(active[:, None], torch.ones(1, dtype=torch.float64))
    got, other = (view.w_cross, view.w_same) if closed.negatives == "cross" else (view.w_same, view.w_cross)
    torch.testing.assert_close(got[active], w[active], **TOL)
    assert other.abs().max() < 1e-9
    r = (closed.w * closed.r).sum(-1) / closed.w.sum(-1)
    torch.testing.assert_close(view.r[active], r[active], **TOL)
    assert torch.isnan(view.r[~active]).all()
    # the whole registry loss: its view-2 term pushes nothing onto z1's negatives (stop-gradients), so
    # GD mass and W are the view-1 term's; only the pull (R) also holds the view-2 term's
    whole = paradigm_by_autograd(registry.on_views, z1, z2)
    torch.testing.assert_close(whole.mass, mass, **TOL)
    torch.testing.assert_close(whole.w_cross, view.w_cross, **TOL)


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("name", ["mmhe", "mmhs", "mvicreg", "mbarlow_twins"])
def test_table2_components_reproduce_the_view_terms_gradient(name, seed):
    """GD · Σ_j W (n_j - R z'_i) with the Table 2 components equals the view-1 term's gradient for every
    anchor, the gated-out ones included (0), up to the radial part the normalisation's Jacobian removes."""
    z1, z2 = batch(seed)
    hp = {**hyper(name, z1, z2), "r": 1.5}
    a = z1.clone().requires_grad_()
    view1_term(name, hp)(a, z2).backward()
    terms = paradigm_components(z1, z2, losses=(name,), hp={name: hp})[name]
    assert terms.r.sub(1.5).abs().max() < 1e-12  # static ratio r (Table 2, lower half)
    diff = a.grad - paradigm_gradient(terms, z1, z2)
    torch.testing.assert_close(diff, (diff * z1).sum(-1, keepdim=True) * z1, **TOL)


def test_view_batch_realises_the_requested_angles():
    g = torch.Generator().manual_seed(0)
    z1, z2 = view_batch(0.3, 1.2, n=16, generator=g)
    assert z1.shape == (16, 33)
    cross = torch.arccos((z1 @ z2.T).clamp(-1, 1))
    eye = torch.eye(16, dtype=torch.bool)
    assert abs(cross.diagonal().mean().item() - 0.3) < 0.03
    assert abs(cross[~eye].mean().item() - 1.2) < 0.03
    assert torch.linalg.matrix_rank(torch.cat([z1, z2])) == 32  # independent, as the autograd view needs


def test_a_loss_with_a_non_finite_gradient_is_named_in_one_line():
    """A loss whose gradient is NaN on the figure's batch stops with one line, not torch's lstsq assert."""
    z1, z2 = batch(0)
    expected = r"^the loss's gradient is not finite on a batch of 6 x 16; "
    with pytest.raises(ValueError, match=expected) as error:
        paradigm_by_autograd(lambda a, b: (a * b).sum() * float("nan"), z1, z2)
    assert "\n" not in str(error.value)
