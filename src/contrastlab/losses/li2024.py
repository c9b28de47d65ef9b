"""Losses of Li, Zhang & Nie 2024: ArcCon, the GD/W/R paradigm baseline, MHE, MHS, VICReg, Barlow Twins
and their modified versions, with the step-by-step variants of Li Table 5 as options.

[0] M. Li, R. Zhang, Z. Nie. "Towards Better Understanding of Contrastive Sentence Representation
    Learning: A Unified Paradigm for Gradient." ACL 2024 (arXiv full version for Tables 5-7).
    Reference code: github.com/BDBC-KG-NLP/UnderstandingCSE (``isotropy/models.py``).
[1] Y. Zhang et al. "A Contrastive Framework for Learning Sentence Representations from Pairwise
    and Triple-wise Perspective in Angular Space." ACL 2022 (ArcCon).

Conventions as in :mod:`contrastlab.losses.nie2023`; ``a_i = 2 - 2 z1_i . z2_i`` = ||z1_i - z2_i||^2,
``q_ij = z_i . z_j`` (same view). The paper writes the losses for one view of anchors; the reference
code (followed here, protocol.md §1) sums the two views' terms, and every alignment term carries
gradient to *both* views, so the full gradient w.r.t. z1_i is the paper's per-view gradient plus the
partner view's alignment pull (see the ``*_view_term`` helpers, whose gradient w.r.t. their first
argument is exactly the paper's equation).

Li Table 5 (original -> +GD -> +W -> +R) as options of the modified losses. ``gd`` switches the
gradient-dissipation gate, ``weight`` picks the negatives' weight ("none" = the original loss's
weight, "exp" = the modified exponential weight with temperature ``tau``), ``r`` the static ratio
(``None`` = the original loss's own ratio, i.e. no ratio modification). The paper sets λ = 1 at the
+W step (§4 and App. E: "we first set ν = 1"); λ stays the original's before it.

=============  =====================================  ===========================================
Table 5 row    column                                  loss and options
=============  =====================================  ===========================================
MHE            original                                ``mmhe`` gd=False weight="none" r=None lam=10
               +GD                                     ``mmhe`` gd=True  weight="none" r=None lam=10
               +W                                      ``mmhe`` gd=True  weight="exp"  r=None lam=1
               +R                                      ``mmhe`` defaults (gd=True weight="exp" r=1.75 lam=1)
MHS            original                                ``mmhs`` gd=False r=None (lam=1)
               +GD                                     ``mmhs`` gd=True  r=None
               +W                                      (none: MHS's weight already fits, Table 5 "-*")
               +R                                      ``mmhs`` defaults (gd=True r=1.75)
Barlow Twins   original                                ``mbarlow_twins`` gd=False weight="none" r=None lam=30
               +GD                                     ``mbarlow_twins`` gd=True  weight="none" r=None lam=30
               +W                                      ``mbarlow_twins`` gd=True  weight="exp"  r=None lam=1
               +R                                      ``mbarlow_twins`` defaults (r=1.50 lam=1)
VICReg         same four rows with ``mvicreg`` (lam 30 for the original and +GD, 1 from +W on)
=============  =====================================  ===========================================

The "original" options give exactly ``mhe`` / ``mhs`` / ``barlow_twins_li`` / ``vicreg_li``.
m = 0.30, τ = 0.05 throughout (Li Table 6).

Choices where paper and reference code differ (reference followed, protocol.md §1):

- GD gate of the modified losses: the paper (§4, App. E) gates on cross-view similarities
  (s_ii - max_{k≠i} s_ik < m); the reference gates each view on *same-view* similarities
  (1 - max_{j≠i} q_ij < m) and detaches an inactive sample's embedding everywhere it appears,
  rather than multiplying a per-anchor loss by d_i.
- MHS: the paper's uniformity uses same-view distances ||h_i - h_j||; the reference uses cross-view
  distances to a detached other view, sqrt(||z_i - sg(z'_j)||^2 + 1e-4), and mean-reduces.
- MHE: the reference has no temperature or log-mean constant in the original uniformity,
  U = LSE_{k<l} q_kl, and weights the modified alignment by w_i = exp(LSE_{j≠i} q_ij/τ - U)/τ
  (App. E writes 1/(2τ) with an r inside; the two agree up to that factor 1/2 per view, which the
  reference applies as "halved per view").
- Barlow Twins / VICReg: gradient-equivalent forms on L2-normalised embeddings (Tao et al. 2022),
  not the vision losses; G keeps its diagonal in the negative sum, which carries no gradient w.r.t.
  the raw embeddings once the normalisation's Jacobian is applied (its log-weight is capped at 80
  so a near-orthogonal batch with a tiny τ stays finite). App. E Eq. 18 prints the Barlow Twins
  weight as e^{h_i.h'_j/τ} / Σ_{k≠i} e^{h_k.h'_i/τ}; Eq. 6 and the reference use
  e^{h'_i.h'_j/τ} / Σ_{k≠l} e^{h'_k.h'_l/τ}, as here.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from ._common import (
    fill_diagonal,
    gated,
    hardest_similarity,
    nearest_distance,
    offdiag_logsumexp,
    safe_arccos,
    same_view_gate,
)

__all__ = [
    "arccon",
    "arccon_per_anchor",
    "paradigm",
    "paradigm_view_term",
    "mhe",
    "mmhe",
    "mhe_view_term",
    "mhs",
    "mmhs",
    "mhs_view_term",
    "vicreg_li",
    "mvicreg",
    "vicreg_view_term",
    "barlow_twins_li",
    "mbarlow_twins",
    "barlow_twins_view_term",
]

_LOG_WEIGHT_CAP = 80.0


# --------------------------------------------------------------------------- ArcCon
def arccon_per_anchor(sim: Tensor, *, tau: float, u: float) -> Tensor:
    """Per-anchor ArcCon loss from the cross-view cosines: positive logit cos(θ_ii + u)/τ."""
    theta = safe_arccos(sim.diagonal())
    logits = torch.diagonal_scatter(sim, torch.cos(theta + u)) / tau
    return F.cross_entropy(logits, torch.arange(sim.shape[0], device=sim.device), reduction="none")


def arccon(z1: Tensor, z2: Tensor, *, tau: float, u: float) -> Tensor:
    """ArcCon [1]: InfoNCE whose positive logit is cos(arccos(s_ii) + u)/τ (L^arc of [0], Eq. 2).

    The cosine is clamped to [-1+1e-6, 1-1e-6] before ``arccos`` (the reference does not clamp and
    returns NaN for identical views). Ranges: tau > 0, 0 <= u < π (radians; default 10° = π/18).

    >>> import torch
    >>> round(arccon(torch.eye(2), torch.eye(2), tau=1.0, u=0.0).item(), 4)
    0.3133
    """
    return arccon_per_anchor(z1 @ z2.T, tau=tau, u=u).mean()


# --------------------------------------------------------------------------- paradigm (Eq. 5)
def _cross_view_gate(sim: Tensor, m: float, dim: int) -> Tensor:
    """GD of the paradigm baseline: s_ii - max_{j≠i} s_ij < m per row (dim=-1) or column (dim=0)."""
    hardest, _ = hardest_similarity(sim, dim=dim)
    return (sim.diagonal() - hardest) < m


def paradigm_view_term(
    anchor: Tensor, other: Tensor, pos: Tensor, active: Tensor, *, tau: float, r: float, weight: str
) -> Tensor:
    """One view's term of Li Eq. 5 as the reference reduces it.

    Σ_{i active} Σ_{j≠i} W_ij (anchor_i . sg(other_j) - r · pos_i) / (N · |active|), with W the
    detached softmax over j≠i of anchor_i.other_j/τ (``weight="exp"``) or 1/(N-1) (``"uniform"``)
    and ``pos`` the positive cosines (gradient to both views). Zero when no anchor is active.
    Its gradient w.r.t. anchor_i is GD_i Σ_j W_ij (other_j - r · other_i) / (N |active|) (Li Eq. 4).
    """
    n = anchor.shape[0]
    sim = anchor @ other.detach().T
    with torch.no_grad():
        if weight == "exp":
            w = torch.softmax(fill_diagonal(sim / tau, float("-inf")), dim=-1)
        else:
            w = fill_diagonal(torch.full_like(sim, 1.0 / (n - 1)), 0.0)
    per_anchor = (w * fill_diagonal(sim, 0.0)).sum(-1) - r * pos
    count = active.sum().clamp_min(1)
    return (per_anchor * active).sum() / (n * count)


def _paradigm_impl(z1, z2, *, m, tau, r, gd, weight):
    pos = (z1 * z2).sum(-1)
    n = z1.shape[0]
    with torch.no_grad():
        sim = z1 @ z2.T
        if gd:
            act1, act2 = _cross_view_gate(sim, m, -1), _cross_view_gate(sim, m, 0)
        else:
            act1 = act2 = torch.ones(n, dtype=torch.bool, device=z1.device)
    loss = paradigm_view_term(z1, z2, pos, act1, tau=tau, r=r, weight=weight) + paradigm_view_term(
        z2, z1, pos, act2, tau=tau, r=r, weight=weight
    )
    stats = {"align": pos.mean(), "gd_active": torch.cat([act1, act2]).to(z1.dtype).mean()}
    return loss, stats


def paradigm(
    z1: Tensor, z2: Tensor, *, m: float, tau: float, r: float, gd: bool = True, weight: str = "exp"
) -> Tensor:
    """The empirical paradigm baseline of [0] §3.2, Eq. 5, symmetrised as in the reference (``sg``).

    GD_i = 1[s_ii - max_{j≠i} s_ij < m] (view 2: per column), W = softmax_{j≠i}(s_ij/τ), R = r, all
    detached; loss = term(view 1 anchors) + term(view 2 anchors), each reduced by N·|active|.
    ``gd=False`` sets GD ≡ 1; ``weight="uniform"`` sets W = 1/(N-1).

    >>> import torch
    >>> round(paradigm(torch.eye(2), torch.eye(2), m=0.3, tau=1.0, r=1.0, gd=False).item(), 4)
    -1.0
    """
    return _paradigm_impl(z1, z2, m=m, tau=tau, r=r, gd=gd, weight=weight)[0]


# --------------------------------------------------------------------------- shared pieces
def _gate_views(z1: Tensor, z2: Tensor, gd: bool, m: float):
    if not gd:
        ones = torch.ones(z1.shape[0], dtype=torch.bool, device=z1.device)
        return z1, z2, ones, ones
    act1, act2 = same_view_gate(z1, m), same_view_gate(z2, m)
    return gated(z1, act1), gated(z2, act2), act1, act2


def _stats(z1, z2, act1, act2, gd):
    stats = {"align": (z1.detach() * z2.detach()).sum(-1).mean()}
    if gd:
        stats["gd_active"] = torch.cat([act1, act2]).to(z1.dtype).mean()
    return stats


# --------------------------------------------------------------------------- MHE
def mhe_view_term(u: Tensor, a: Tensor, *, lam: float, tau: float, weight: str, r: float | None) -> Tensor:
    """One view's MHE term: λ·U + Σ_i a_i·w_i·(r or 1)/2 (reference ``mhe`` branch).

    ``weight="none"``: U = LSE_{k<l} q_kl, w_i = 1/N. ``weight="exp"``: U = LSE_{k<l} q_kl/τ,
    w_i = exp(LSE_{j≠i} q_ij/τ - U)/τ (detached). ``a`` = a_i (gradient to both views). With
    λ = 1 and weight "exp", the gradient w.r.t. u_i is Σ_{j≠i} e^{q_ij/τ}(u_j - r u'_i) /
    (τ Σ_{k<l} e^{q_kl/τ}) (Li Eq. 16).
    """
    n = u.shape[0]
    q = u @ u.T
    if weight == "exp":
        q = q / tau
    lower = torch.ones(n, n, dtype=torch.bool, device=u.device).tril(-1)
    uni = torch.logsumexp(q.masked_fill(~lower, float("-inf")).reshape(-1), dim=0)
    if weight == "exp":
        w = (offdiag_logsumexp(q.detach(), -1) - uni.detach()).exp() / tau
    else:
        w = torch.full((n,), 1.0 / n, dtype=u.dtype, device=u.device)
    align = a * w / 2
    if r is not None:
        align = align * r
    return lam * uni + align.sum()


def _mhe_impl(z1, z2, *, lam, m=0.3, tau=0.05, r=None, gd=False, weight="none"):
    u1, u2, act1, act2 = _gate_views(z1, z2, gd, m)
    a = 2.0 - 2.0 * (u1 * u2).sum(-1)
    loss = mhe_view_term(u1, a, lam=lam, tau=tau, weight=weight, r=r) + mhe_view_term(
        u2, a, lam=lam, tau=tau, weight=weight, r=r
    )
    return loss, _stats(z1, z2, act1, act2, gd)


def mhe(z1: Tensor, z2: Tensor, *, lam: float) -> Tensor:
    """Alignment + Minimum Hyperspherical Energy, the "ineffective" original of [0] §4.

    mean_i a_i + λ (LSE_{k<l} q_kl + LSE_{k<l} q'_kl): one ``logsumexp`` over the N(N-1)/2
    same-view pairs of each view, no temperature, no log-mean constant (reference code; the paper
    writes log (2/N(N-1)) Σ e^{-||h_k-h_l||^2}, which differs by constants and a factor 2 in the
    exponent). Range: lam >= 0.

    >>> import torch
    >>> round(mhe(torch.eye(2), torch.eye(2), lam=1.0).item(), 4)
    0.0
    """
    return _mhe_impl(z1, z2, lam=lam)[0]


def mmhe(
    z1: Tensor,
    z2: Tensor,
    *,
    lam: float,
    m: float,
    tau: float,
    r: float | None,
    gd: bool = True,
    weight: str = "exp",
) -> Tensor:
    """Modified MHE, Li Eq. 14 / Eq. 16 in the reference's form (see module docstring).

    loss = λ(U + U') + Σ_i a_i · r · (w_i + w'_i)/2 with U = LSE_{k<l} q_kl/τ and
    w_i = exp(LSE_{j≠i} q_ij/τ - U)/τ (detached), each view gated by the same-view GD gate.
    Ranges: lam >= 0, tau > 0, r > 0 or None.

    >>> import torch
    >>> round(mmhe(torch.eye(2), torch.eye(2), lam=1.0, m=2.0, tau=1.0, r=1.0).item(), 4)
    0.0
    """
    return _mhe_impl(z1, z2, lam=lam, m=m, tau=tau, r=r, gd=gd, weight=weight)[0]


# --------------------------------------------------------------------------- MHS
def mhs_view_term(u: Tensor, v: Tensor, a: Tensor, *, lam: float, r: float | None) -> Tensor:
    """One view's MHS term: λ·mean_i(-d_i) + mean_i a_i·c_i, d_i = min_{j≠i} sqrt(||u_i - sg(v_j)||^2 + 1e-4).

    c_i = 1/2 (original) or r / (2 sg(d_i)) (modified ratio). With λ = 1 and a ratio the gradient
    w.r.t. u_i is, up to a radial term, (v_j - r v_i) / (N d_i) with j the nearest (Li Eq. 17).
    """
    dist = ((2.0 - 2.0 * (u @ v.detach().T)).clamp_min(0.0) + 1e-4).sqrt()
    nearest, _ = nearest_distance(dist)
    coef = 0.5 if r is None else r / (2.0 * nearest.detach())
    return lam * (-nearest).mean() + (a * coef).mean()


def _mhs_impl(z1, z2, *, lam, m=0.3, r=None, gd=False):
    u1, u2, act1, act2 = _gate_views(z1, z2, gd, m)
    a = 2.0 - 2.0 * (u1 * u2).sum(-1)
    loss = mhs_view_term(u1, u2, a, lam=lam, r=r) + mhs_view_term(u2, u1, a, lam=lam, r=r)
    return loss, _stats(z1, z2, act1, act2, gd)


def mhs(z1: Tensor, z2: Tensor, *, lam: float) -> Tensor:
    """Alignment + Maximum Hyperspherical Separation, the original of [0] §4 (reference form).

    mean_i a_i + λ(U + U'), U = -mean_i min_{j≠i} sqrt(||z_i - sg(z'_j)||^2 + 1e-4) (cross-view,
    detached other view; the paper writes same-view distances). Range: lam >= 0.

    >>> import torch
    >>> round(mhs(torch.eye(2), torch.eye(2), lam=1.0).item(), 4)
    -2.8285
    """
    return _mhs_impl(z1, z2, lam=lam)[0]


def mmhs(z1: Tensor, z2: Tensor, *, lam: float, m: float, r: float | None, gd: bool = True) -> Tensor:
    """Modified MHS (Li Eq. 15 / 17): same-view GD gate; alignment of i weighted by r / d_i, halved per view.

    >>> import torch
    >>> round(mmhs(torch.eye(2), torch.eye(2), lam=1.0, m=2.0, r=1.0).item(), 4)
    -2.8285
    """
    return _mhs_impl(z1, z2, lam=lam, m=m, r=r, gd=gd)[0]


# --------------------------------------------------------------------------- VICReg / Barlow Twins
def _gram_weight(g: Tensor, *, weight: str, tau: float) -> Tensor:
    """G of the gradient-equivalent forms: (2/N^2) sg(g g^T) or exp(sg(g g^T)/τ) / Σ_{k≠l}."""
    n = g.shape[0]
    gram = (g @ g.T).detach()
    if weight == "exp":
        logits = gram / tau
        return (logits - offdiag_logsumexp(logits, None)).clamp_max(_LOG_WEIGHT_CAP).exp()
    return gram * (2.0 / (n * n))


def _siamese_view_term(u1, u2, *, lam, tau, weight, r, kind):
    n = u1.shape[0]
    g = _gram_weight(u1 if kind == "vicreg" else u2, weight=weight, tau=tau)
    neg = (g * (u1 @ u1.detach().T)).sum(-1)
    if r is not None:
        pos = lam * r * fill_diagonal(g, 0.0).sum(-1) * (-(u1 * u2).sum(-1))
    elif kind == "vicreg":
        pos = -(u1 * u2.detach()).sum(-1) * (2.0 / n)
    else:
        c_diag = (u1.detach() * u2.detach()).sum(0) / n
        coef = (1.0 - (1.0 - lam) * c_diag) * (2.0 / n)
        pos = (coef * (-u1 * u2.detach())).sum(-1)
    return (pos + lam * neg).sum()


def vicreg_view_term(
    u1: Tensor, u2: Tensor, *, lam: float, tau: float = 0.05, weight: str = "none", r: float | None = None
) -> Tensor:
    """One direction of the VICReg gradient-equivalent form (Li App. E, reference ``_vicreg_loss``).

    Σ_i [pos_i + λ Σ_j G_ij u1_i.sg(u1_j)], G = (2/N^2) sg(u1 u1^T) or exp(sg(u1 u1^T)/τ)/Σ_{k≠l};
    pos_i = -(2/N) u1_i.sg(u2_i), or λ r (Σ_{j≠i} G_ij)(-u1_i.u2_i) with a ratio. With λ = 1,
    weight "exp" and ratio r its gradient w.r.t. u1_i is Σ_{j≠i} G_ij (u1_j - r u2_i) + G_ii u1_i
    (the last term radial): Li Eq. 19.
    """
    return _siamese_view_term(u1, u2, lam=lam, tau=tau, weight=weight, r=r, kind="vicreg")


def barlow_twins_view_term(
    u1: Tensor, u2: Tensor, *, lam: float, tau: float = 0.05, weight: str = "none", r: float | None = None
) -> Tensor:
    """One direction of the Barlow Twins gradient-equivalent form (Li §4 Eq. 6, reference ``_bt_loss``).

    Σ_i [-Σ_k (2/N)(1 - (1-λ) C_kk) u1_ik sg(u2_ik) + λ Σ_j G_ij u1_i.sg(u1_j)],
    G = (2/N^2) sg(u2 u2^T) or exp(sg(u2 u2^T)/τ)/Σ_{k≠l}, C = sg(u1^T u2)/N; with a ratio the
    positive becomes λ r (Σ_{j≠i} G_ij)(-u1_i.u2_i) (Li Eq. 6 / 18).
    """
    return _siamese_view_term(u1, u2, lam=lam, tau=tau, weight=weight, r=r, kind="bt")


def _siamese_impl(z1, z2, *, kind, lam, m=0.3, tau=0.05, r=None, gd=False, weight="none"):
    u1, u2, act1, act2 = _gate_views(z1, z2, gd, m)
    kw = {"lam": lam, "tau": tau, "weight": weight, "r": r, "kind": kind}
    loss = _siamese_view_term(u1, u2, **kw) + _siamese_view_term(u2, u1, **kw)
    return loss, _stats(z1, z2, act1, act2, gd)


def vicreg_li(z1: Tensor, z2: Tensor, *, lam: float) -> Tensor:
    """VICReg in Li et al.'s gradient-equivalent form on unit vectors (Li Eq. 11; Tao et al. 2022).

    Sum of :func:`vicreg_view_term` over (z1, z2) and (z2, z1). Range: lam >= 0.

    >>> import torch
    >>> round(vicreg_li(torch.eye(2), torch.eye(2), lam=1.0).item(), 4)
    -2.0
    """
    return _siamese_impl(z1, z2, kind="vicreg", lam=lam)[0]


def mvicreg(
    z1: Tensor,
    z2: Tensor,
    *,
    lam: float,
    m: float,
    tau: float,
    r: float | None,
    gd: bool = True,
    weight: str = "exp",
) -> Tensor:
    """Modified VICReg (Li App. E Eq. 13 / 19), reference form, same-view GD gate.

    >>> import torch
    >>> round(mvicreg(torch.eye(2), torch.eye(2), lam=1.0, m=2.0, tau=1.0, r=1.0).item(), 4)
    3.4366
    """
    return _siamese_impl(z1, z2, kind="vicreg", lam=lam, m=m, tau=tau, r=r, gd=gd, weight=weight)[0]


def barlow_twins_li(z1: Tensor, z2: Tensor, *, lam: float) -> Tensor:
    """Barlow Twins in Li et al.'s gradient-equivalent form on unit vectors (Li Eq. 10; Tao et al. 2022).

    >>> import torch
    >>> round(barlow_twins_li(torch.eye(2), torch.eye(2), lam=1.0).item(), 4)
    -2.0
    """
    return _siamese_impl(z1, z2, kind="bt", lam=lam)[0]


def mbarlow_twins(
    z1: Tensor,
    z2: Tensor,
    *,
    lam: float,
    m: float,
    tau: float,
    r: float | None,
    gd: bool = True,
    weight: str = "exp",
) -> Tensor:
    """Modified Barlow Twins (Li §4 Eq. 6 / 18), reference form, same-view GD gate.

    >>> import torch
    >>> round(mbarlow_twins(torch.eye(2), torch.eye(2), lam=1.0, m=2.0, tau=1.0, r=1.0).item(), 4)
    3.4366
    """
    return _siamese_impl(z1, z2, kind="bt", lam=lam, m=m, tau=tau, r=r, gd=gd, weight=weight)[0]


# --------------------------------------------------------------------------- registry entries
def _entry_arccon(z1, z2, *, tau, u):
    sim = z1 @ z2.T
    return arccon_per_anchor(sim, tau=tau, u=u).mean(), {"align": sim.diagonal().mean()}


ENTRIES = {
    "arccon": _entry_arccon,
    "paradigm": _paradigm_impl,
    "mhe": _mhe_impl,
    "mmhe": _mhe_impl,
    "mhs": _mhs_impl,
    "mmhs": _mhs_impl,
    "vicreg_li": lambda z1, z2, **hp: _siamese_impl(z1, z2, kind="vicreg", **hp),
    "mvicreg": lambda z1, z2, **hp: _siamese_impl(z1, z2, kind="vicreg", **hp),
    "barlow_twins_li": lambda z1, z2, **hp: _siamese_impl(z1, z2, kind="bt", **hp),
    "mbarlow_twins": lambda z1, z2, **hp: _siamese_impl(z1, z2, kind="bt", **hp),
}
