"""Model-Aware Contrastive Learning (MACL), sentence version.

[0] Z. Huang, H. Chen, Z. Wen, C. Zhang, H. Li, B. Wang, C. Chen. "Model-Aware Contrastive
    Learning: Towards Escaping the Dilemmas." ICML 2023. Eq. (7), Eq. (11), Algorithm 1, App. B.4.

Choices (protocol.md §1): A is the batch mean of the positive cosines s_ii (detached); the adaptive
temperature τ_a = τ0 (1 + α (A - A0)) is detached; negatives are the other view's other samples
(in-batch, cross view, not symmetrised: the SimCSE setting of App. B.4). V_i = sg(1/(1 - P_i + 1e-8))
where Algorithm 1 writes 1/(1 - P) (the 1e-8 keeps identical views finite), and 1 - P_i is computed
as exp(LSE_{j≠i} - LSE_j) rather than by subtraction. Not in the paper: τ_a is floored at τ0/100 so
that a batch with A <= A0 - 0.99/α (A < 0.305 with the sentence defaults, never seen with dropout
views) cannot divide by zero or flip the sign of the logits.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from ._common import offdiag_logsumexp

__all__ = ["macl", "macl_temperature"]


def macl_temperature(align: Tensor, *, tau0: float, alpha: float, a0: float) -> Tensor:
    """τ_a = τ0 (1 + α (A - A0)), detached, floored at τ0/100 (Huang Eq. 7).

    >>> import torch
    >>> round(macl_temperature(torch.tensor(0.9), tau0=0.05, alpha=2.0, a0=0.8).item(), 4)
    0.06
    """
    return (tau0 * (1.0 + alpha * (align.detach() - a0))).clamp_min(tau0 / 100.0)


def _macl_impl(z1: Tensor, z2: Tensor, *, tau0: float, alpha: float, a0: float, reweight: bool):
    sim = z1 @ z2.T
    pos = sim.diagonal()
    big_a = pos.detach().mean()
    tau_a = macl_temperature(big_a, tau0=tau0, alpha=alpha, a0=a0)
    logits = sim / tau_a
    target = torch.arange(sim.shape[0], device=sim.device)
    nll = F.cross_entropy(logits, target, reduction="none")  # -log P_i
    stats = {"align": big_a, "tau_a": tau_a}
    if reweight:
        with torch.no_grad():
            one_minus_p = (offdiag_logsumexp(logits, -1) - torch.logsumexp(logits, -1)).exp()
            v = 1.0 / (one_minus_p + 1e-8)
        nll = v * nll
        stats["weight_mean"] = v.mean()
    return nll.mean(), stats


def macl(z1: Tensor, z2: Tensor, *, tau0: float, alpha: float, a0: float, reweight: bool = False) -> Tensor:
    """MACL loss: mean_i -V_i log P_i, P_i = softmax(s_i. / τ_a)_i (Huang Eq. 11, Algorithm 1).

    Ranges: tau0 > 0, alpha >= 0, a0 finite. ``reweight=False`` (sentence setting) sets V ≡ 1.

    >>> import torch
    >>> round(macl(torch.eye(2), torch.eye(2), tau0=1.0, alpha=0.0, a0=0.0).item(), 4)
    0.3133
    """
    return _macl_impl(z1, z2, tau0=tau0, alpha=alpha, a0=a0, reweight=reweight)[0]


ENTRIES = {"macl": _macl_impl}
