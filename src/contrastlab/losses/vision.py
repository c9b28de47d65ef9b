"""Vision losses of MACL's CIFAR-10 study (Huang et al. Table 9, App. B.3): NT-Xent, FlatNCE, DCL,
Dual temperature and MACL, over the symmetric 2N batch (Dual temperature by default as its released
code: other-view negatives only, see :func:`dualtemp`).

[0] Z. Huang, H. Chen, Z. Wen, C. Zhang, H. Li, B. Wang, C. Chen. "Model-Aware Contrastive
    Learning: Towards Escaping the Dilemmas." ICML 2023. Eq. (7), Eq. (11), §5.2, §7.2, Table 9,
    App. B.3. Reference function: github.com/chenhaoxing/MACL (``macl.py``).
[1] T. Chen, S. Kornblith, M. Norouzi, G. Hinton. "A Simple Framework for Contrastive Learning of
    Visual Representations." ICML 2020 (SimCLR, NT-Xent).
[2] J. Chen et al. "Simpler, Faster, Stronger: Breaking The log-K Curse On Contrastive Learners
    With FlatNCE." arXiv 2107.01152, 2021. Reference code: github.com/Junya-Chen/FlatCLR
    (``flatclr.py``).
[3] C.-H. Yeh et al. "Decoupled Contrastive Learning." ECCV 2022.
[4] C. Zhang, K. Zhang, T. X. Pham, A. Niu, Z. Qiao, C. D. Yoo, I. S. Kweon. "Dual Temperature
    Helps Contrastive Learning Without Many Negative Samples: Towards Understanding and Simplifying
    MoCo." CVPR 2022. Reference code: github.com/ChaoningZhang/Dual-temperature
    (``solo/losses/dual_temperature_loss.py``, ``bash_files/simco.sh``).

The 2N batch (protocol.md §3; App. B.3 "we make the loss symmetric"): ``z = cat(z1, z2)`` [2N, D],
``s_kj = z_k . z_j``; anchor k's positive is its other view p(k) = (k + N) mod 2N; its negatives are
the other 2N - 2 samples of *both* views (self and positive excluded; ``dualtemp``'s default keeps the
N - 1 of the other view, as the released SimCo loss). Every loss is a mean over the
2N anchors (SimCLR's TensorFlow code and the DCL reimplementation github.com/raminnakhli/
Decoupled-Contrastive-Learning sum the two directions' means instead, a constant factor 2).

Every loss is computed from v_k = LSE_{j neg}((s_kj - s_kp)/τ) (:func:`decoupled_logsumexp`; self
and positive masked with -inf, never multiplied by 0): -log P_k = log(1 + e^{v_k}), 1 - P_k =
sigmoid(v_k), DCL's term = v_k. No loop over the batch. ``align`` in the stats is mean_i
z1_i . z2_i (= the mean positive cosine over the 2N anchors). MACL App. B.3: temperature 0.1 for
every loss, MACL α 0.5, A0 0.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from .catalog import DUALTEMP_NEGATIVES  # which negatives dualtemp gives each anchor
from .macl import macl_temperature

__all__ = [
    "symmetric_similarity",
    "negatives_mask",
    "decoupled_logsumexp",
    "softplus",
    "ntxent_per_anchor",
    "ntxent",
    "flatnce",
    "dcl_vision",
    "DUALTEMP_NEGATIVES",
    "cross_view_logsumexp",
    "dualtemp_weight",
    "dualtemp",
    "macl_vision",
]

#: Cap on the Dual temperature weight's log (w <= e^80, finite in float32), as ``li2024`` caps its own.
LOG_WEIGHT_CAP = 80.0


# --------------------------------------------------------------------------- the 2N batch
def symmetric_similarity(z1: Tensor, z2: Tensor) -> tuple[Tensor, Tensor]:
    """(s [2N, 2N], p [2N]): cosines of ``z = cat(z1, z2)`` and each anchor's positive index (k + N) mod 2N.

    >>> import torch
    >>> s, p = symmetric_similarity(torch.eye(2), torch.eye(2))
    >>> s.tolist(), p.tolist()
    ([[1.0, 0.0, 1.0, 0.0], [0.0, 1.0, 0.0, 1.0], [1.0, 0.0, 1.0, 0.0], [0.0, 1.0, 0.0, 1.0]], [2, 3, 0, 1])
    """
    z = torch.cat([z1, z2])
    n2 = z.shape[0]
    return z @ z.T, torch.arange(n2, device=z.device).roll(n2 // 2)


def negatives_mask(positive: Tensor) -> Tensor:
    """Boolean [2N, 2N], True at anchor k's 2N - 2 negatives (neither k itself nor its positive)."""
    n2 = positive.shape[0]
    eye = torch.eye(n2, dtype=torch.bool, device=positive.device)
    return ~(eye | F.one_hot(positive, n2).bool())


# --------------------------------------------------------------------------- v_k: every loss's building block
def decoupled_logsumexp(sim: Tensor, positive: Tensor, *, tau: float | Tensor) -> Tensor:
    """v_k = logsumexp over anchor k's 2N - 2 negatives of (s_kj - s_kp)/τ.

    Every loss of this module is a function of v_k: the per-anchor DCL term ([3]) and FlatNCE's
    statistic ([2]) are v_k itself; NT-Xent's term is -log P_k = log(1 + e^{v_k}) (softplus) and
    1 - P_k = sigmoid(v_k), where P_k = e^{s_kp/τ} / Σ_{j≠k} e^{s_kj/τ}. Working from v_k keeps the
    relative precision of -log P_k and 1 - P_k when P_k is close to 1, where ``cross_entropy``
    (LSE - s_kp/τ) and 1 - P by subtraction cancel; in float32 that error would be multiplied by
    the ~1/(1 - P_k) weights of Dual temperature and MACL.
    """
    logits = (sim - sim.gather(1, positive[:, None])) / tau
    return torch.logsumexp(logits.masked_fill(~negatives_mask(positive), float("-inf")), dim=-1)


def softplus(v: Tensor) -> Tensor:
    """log(1 + e^v) via ``logaddexp`` (exact for every v; ``F.softplus`` returns v itself above 20)."""
    return torch.logaddexp(v, torch.zeros_like(v))


def ntxent_per_anchor(sim: Tensor, positive: Tensor, *, tau: float | Tensor) -> Tensor:
    """-log P_k = -log softmax at the positive over anchor k's 2N - 1 others: the NT-Xent term."""
    return softplus(decoupled_logsumexp(sim, positive, tau=tau))


# --------------------------------------------------------------------------- NT-Xent
def ntxent(z1: Tensor, z2: Tensor, *, tau: float) -> Tensor:
    """SimCLR's NT-Xent over the 2N batch (Eq. 1 of [1]).

    mean over the 2N anchors k of -log e^{s_kp/τ} / Σ_{j≠k} e^{s_kj/τ}; the denominator holds the
    positive and the 2N - 2 negatives of both views (self excluded by -inf masking). Each term is
    computed as log(1 + e^{v_k}) (:func:`decoupled_logsumexp`), the same value as ``cross_entropy``
    on the logits, with full precision when P_k is near 1. Shapes: z1, z2 [N, D] unit rows, N >= 2.
    Range: tau > 0.

    >>> import torch
    >>> round(ntxent(torch.eye(2), torch.eye(2), tau=1.0).item(), 4)  # log(e + 2) - 1
    0.5514
    """
    sim, pos = symmetric_similarity(z1, z2)
    return ntxent_per_anchor(sim, pos, tau=tau).mean()


# --------------------------------------------------------------------------- FlatNCE, DCL
def flatnce(z1: Tensor, z2: Tensor, *, tau: float) -> Tensor:
    """FlatNCE over the 2N batch (the FlatNCE objective of [2], as its released code computes it).

    Per anchor v_k = LSE_{j neg}((s_kj - s_kp)/τ) (:func:`decoupled_logsumexp`); the loss is
    mean_k e^{v_k - sg(v_k)} - 1 + sg(NT-Xent): the first part has value exactly 0 and gradient
    mean_k ∇v_k, the same gradient as DCL's (Huang et al. §5.2). The constant is the released
    ``flatclr.py``'s choice (its ``loss_vec.mean() - 1 + CE(dummy_logits).detach()``), so the
    reported value is the NT-Xent value at the same τ; the paper writes e^{v - sg(v)} alone (value 1).
    NT-Xent = mean_k log(1 + e^{v_k}), also in the stats as ``ntxent``. Range: tau > 0.

    >>> import torch
    >>> round(flatnce(torch.eye(2), torch.eye(2), tau=1.0).item(), 4)  # = NT-Xent
    0.5514
    """
    return _flatnce_impl(z1, z2, tau=tau)[0]


def _flatnce_impl(z1: Tensor, z2: Tensor, *, tau: float):
    sim, pos = symmetric_similarity(z1, z2)
    v = decoupled_logsumexp(sim, pos, tau=tau)
    nt_xent = softplus(v.detach()).mean()
    loss = torch.exp(v - v.detach()).mean() - 1.0 + nt_xent
    return loss, {"align": (z1 * z2).sum(-1).mean(), "ntxent": nt_xent}


def dcl_vision(z1: Tensor, z2: Tensor, *, tau: float) -> Tensor:
    """Decoupled contrastive loss over the 2N batch ([3]): NT-Xent without the positive in its denominator.

    mean_k -s_kp/τ + log Σ_{j neg} e^{s_kj/τ} = mean_k v_k over the 2N anchors and their 2N - 2
    negatives (same-view and cross-view), as in DCL's SimCLR setting; no weighting function (plain
    DCL, not DCLW). The sentence ``dcl`` (Nie et al.) keeps cross-view negatives and view-1 anchors
    only. Range: tau > 0.

    >>> import torch
    >>> round(dcl_vision(torch.eye(2), torch.eye(2), tau=1.0).item(), 4)  # log 2 - 1
    -0.3069
    """
    sim, pos = symmetric_similarity(z1, z2)
    return decoupled_logsumexp(sim, pos, tau=tau).mean()


# --------------------------------------------------------------------------- Dual temperature


def cross_view_logsumexp(z1: Tensor, z2: Tensor, *, tau: float | Tensor) -> Tensor:
    """v_k [2N] = logsumexp over anchor k's N - 1 *other-view* negatives of (s_kj - s_kk)/τ.

    Anchors 0..N-1 are view 1 (row i of S = z1 z2ᵀ: positive S_ii, negatives S_ij, j ≠ i), anchors
    N..2N-1 view 2 (row i of Sᵀ): the two directions of the released SimCo loss ([4]), stacked. The
    diagonal is masked with -inf, never multiplied by 0.
    """
    s = z1 @ z2.T
    both = torch.cat([s, s.T])  # [2N, N]: view-1 anchors, then view-2 anchors
    n = s.shape[0]
    positive = torch.diagonal(s).repeat(2)
    eye = torch.eye(n, dtype=torch.bool, device=s.device).repeat(2, 1)
    logits = (both - positive[:, None]) / tau
    return torch.logsumexp(logits.masked_fill(eye, float("-inf")), dim=-1)


def dualtemp_weight(sim: Tensor, positive: Tensor, *, tau: float, tau_beta: float) -> Tensor:
    """The detached inter-anchor factor w_k = (1 - P_k(τ_β)) / (1 - P_k(τ)) of [4], 2N - 2 negatives.

    log(1 - P_k) = logsigmoid(v_k) at each temperature; log w is capped at 80 (w finite in float32).
    """
    with torch.no_grad():
        v_alpha = decoupled_logsumexp(sim, positive, tau=tau)
        v_beta = decoupled_logsumexp(sim, positive, tau=tau_beta)
        return _capped_weight(v_alpha, v_beta)


def _capped_weight(v_alpha: Tensor, v_beta: Tensor) -> Tensor:
    log_w = F.logsigmoid(v_beta.detach()) - F.logsigmoid(v_alpha.detach())
    return log_w.clamp_max(LOG_WEIGHT_CAP).exp()


def dualtemp(z1: Tensor, z2: Tensor, *, tau: float, tau_beta: float, negatives: str = "other_view") -> Tensor:
    """Dual temperature InfoNCE as the released SimCo loss computes it ([4]; MACL Table 9's "Dual").

    mean_k -sg(w_k) log P_k(τ), w_k = (1 - P_k(τ_β)) / (1 - P_k(τ)): the InfoNCE term at the
    intra-anchor temperature τ (which sets the relative weights of an anchor's negatives), rescaled
    per anchor so that the anchor's overall gradient magnitude, ∝ 1 - P_k, follows the inter-anchor
    temperature τ_β instead. With τ_β = τ, w ≡ 1 and this is InfoNCE.

    Negatives (``negatives``): ``"other_view"`` (default) follows the released code: each anchor's
    softmax holds its positive and the N - 1 other samples of the *other* view, and the loss is the
    mean of the two directions (view 1 anchoring on view 2 and the reverse), i.e. the mean over the 2N
    anchors; MACL App. B.3 names Dual temperature among its baselines without saying otherwise, and
    Table 9 is a batch-size sweep, where the number of negatives is what it studies. ``"both_views"``
    gives each anchor the 2N - 2 negatives of both views, as the other Table 9 losses (NT-Xent, DCL,
    FlatNCE, MACL) over the symmetric 2N batch: with N - 1 more negatives in every softmax its value is
    larger, by an amount that depends on N (e.g. 14% at N = 8, 4% at N = 64 for noisy Gaussian pairs).

    Facts of the released code (``solo/losses/dual_temperature_loss.py``,
    ``solo/methods/simco_dual_temperature.py``, ``bash_files/simco.sh``): ``(loss(q1, q2) + loss(q2,
    q1)) / 2`` on normalised projections, each ``loss`` with logits [q_i·k_i, q_i·k_j (j ≠ i)];
    ``temperature`` = τ = 0.1 (intra-anchor), ``dt_m`` = 10, and the inter-anchor temperature is
    ``dt_m * temperature`` = τ_β = 1.0 (our default); the weight is
    ``(1 - prob_inter[:, 0]) / (1 - prob_intra[:, 0])``, detached, times
    ``-log_softmax(logits / temperature)[:, 0]``, mean over anchors. Here τ_β is an absolute
    temperature (changing τ does not move it, unlike ``dt_m``).

    Not in the released code: 1 - P and -log P are computed from v_k (:func:`cross_view_logsumexp`,
    :func:`decoupled_logsumexp`) rather than by subtraction, which divides by 0 once P(τ) rounds to 1;
    log w is capped at 80 (reached only when 1 - P(τ) < e^{-80}(1 - P(τ_β)), e.g. τ ≲ 0.025 with
    perfectly aligned views), so that w stays finite in float32. Ranges: tau > 0, tau_beta > 0.

    >>> import torch
    >>> round(dualtemp(torch.eye(2), torch.eye(2), tau=1.0, tau_beta=1.0).item(), 4)  # log(e + 1) - 1
    0.3133
    """
    return _dualtemp_impl(z1, z2, tau=tau, tau_beta=tau_beta, negatives=negatives)[0]


def _dualtemp_impl(z1: Tensor, z2: Tensor, *, tau: float, tau_beta: float, negatives: str = "other_view"):
    if negatives == "other_view":
        v_alpha = cross_view_logsumexp(z1, z2, tau=tau)
        with torch.no_grad():
            w = _capped_weight(v_alpha, cross_view_logsumexp(z1, z2, tau=tau_beta))
    elif negatives == "both_views":
        sim, pos = symmetric_similarity(z1, z2)
        v_alpha = decoupled_logsumexp(sim, pos, tau=tau)
        w = dualtemp_weight(sim, pos, tau=tau, tau_beta=tau_beta)
    else:
        raise ValueError(f"negatives must be one of {', '.join(DUALTEMP_NEGATIVES)}, got {negatives!r}")
    loss = (w * softplus(v_alpha)).mean()
    return loss, {"align": (z1 * z2).sum(-1).mean(), "weight_mean": w.mean()}


# --------------------------------------------------------------------------- MACL
def macl_vision(
    z1: Tensor, z2: Tensor, *, tau0: float, alpha: float, a0: float, reweight: bool = True
) -> Tensor:
    """MACL over the symmetric 2N batch (Eq. 7 and Eq. 11 of [0], App. B.3).

    A = mean positive cosine (detached); τ_a = τ0 (1 + α (A - A0)) (detached, floored at τ0/100 by
    :func:`contrastlab.losses.macl.macl_temperature`); P_k = softmax of s_kj/τ_a over anchor k's
    2N - 1 others at the positive; loss = mean_k -V_k log P_k, V_k = sg(1/(1 - P_k + 1e-8)) when
    ``reweight`` (the vision default), else 1. This is the released ``MACL(pos, neg, ...)`` fed
    pos = [s_kp] (2N x 1) and neg = the 2N - 2 negatives per anchor, except for the +1e-8 (which
    keeps identical views finite; the release writes 1/(1 - P)) and the temperature floor. -log P_k
    and 1 - P_k are computed from v_k (:func:`decoupled_logsumexp`). With α = 0 and
    ``reweight=False`` it is NT-Xent at τ0. Ranges: tau0 > 0, alpha >= 0, a0 finite.

    >>> import torch
    >>> round(macl_vision(torch.eye(2), torch.eye(2), tau0=1.0, alpha=0.0, a0=0.0, reweight=False).item(), 4)
    0.5514
    """
    return _macl_vision_impl(z1, z2, tau0=tau0, alpha=alpha, a0=a0, reweight=reweight)[0]


def _macl_vision_impl(z1: Tensor, z2: Tensor, *, tau0: float, alpha: float, a0: float, reweight: bool):
    sim, pos = symmetric_similarity(z1, z2)
    big_a = (z1 * z2).sum(-1).detach().mean()
    tau_a = macl_temperature(big_a, tau0=tau0, alpha=alpha, a0=a0)
    v = decoupled_logsumexp(sim, pos, tau=tau_a)
    nll = softplus(v)
    stats = {"align": big_a, "tau_a": tau_a}
    if reweight:
        weight = 1.0 / (torch.sigmoid(v.detach()) + 1e-8)
        nll = weight * nll
        stats["weight_mean"] = weight.mean()
    return nll.mean(), stats


# --------------------------------------------------------------------------- registry entries
def _entry_ntxent(z1: Tensor, z2: Tensor, *, tau: float):
    return ntxent(z1, z2, tau=tau), {"align": (z1 * z2).sum(-1).mean()}


def _entry_dcl_vision(z1: Tensor, z2: Tensor, *, tau: float):
    return dcl_vision(z1, z2, tau=tau), {"align": (z1 * z2).sum(-1).mean()}


ENTRIES = {
    "ntxent": _entry_ntxent,
    "flatnce": _flatnce_impl,
    "dcl_vision": _entry_dcl_vision,
    "dualtemp": _dualtemp_impl,
    "macl_vision": _macl_vision_impl,
}
