"""Li et al.'s unified gradient paradigm (Eq. 4) of *any* loss, read off its autograd gradient.

Li et al. 2024 write the gradient of every loss they study, for view-1 anchor z1_i, as

    dL/dz1_i = scale · GD_i · Σ_{j≠i} W_ij (n_j − R_ij z2_i),       n_j = z2_j or z1_j,

up to a component along z1_i (which the normalisation's Jacobian removes). Autograd gives dL/dz1_i;
its coordinates in the basis (z2_1 … z2_N, z1_1 … z1_N), unique when the 2N unit vectors are linearly
independent (D ≥ 2N, generic batches), are the paradigm's terms without knowing the loss's formula:
the coefficient of each negative n_j is scale·GD_i·W_ij, that of the positive z2_i is −scale·GD_i·Σ_j
W_ij R_ij, and that of z1_i itself is the radial part, dropped. So, per anchor,

- ``mass`` = Σ_{j≠i} (coefficient of z2_j + coefficient of z1_j) = scale·GD_i·Σ_j W_ij: the total push
  from the negatives; 0 once the gradient has dissipated (the GD of Li Fig. 2, in the loss's own units);
- ``w`` = the coefficients divided by ``mass``: where the push goes, a distribution over the N−1
  cross-view and N−1 same-view negatives (Li Fig. 3's concentration);
- ``r`` = −(coefficient of z2_i) / ``mass`` = the W-weighted ratio Σ_j W_ij R_ij / Σ_j W_ij (Li Fig. 4).

The split of ``mass`` into GD, W and ``scale`` is a convention of each closed form; the three quantities
above are what the gradient fixes (tests: :func:`contrastlab.analysis.paradigm.paradigm_components` for
every closed form). For a loss symmetric in the views, ``r`` is the whole loss's ratio (dL/dz1_i holds
the view-2 term's pull on z1_i as a positive too), not only the view-1 term's.

[0] M. Li, R. Zhang, Z. Nie. "Towards Better Understanding of Contrastive Sentence Representation
    Learning: A Unified Paradigm for Gradient." ACL 2024.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = ["AutogradParadigm", "paradigm_by_autograd", "view_batch"]


@dataclass(frozen=True)
class AutogradParadigm:
    """Per view-1 anchor: ``mass`` [N] (it can be negative: VICReg's own weights), ``w_cross`` / ``w_same``
    [N, N] (zero diagonals, rows sum to 1 together where ``mass`` is not 0), ``r`` [N] (NaN where ``mass``
    is 0), and the raw ``positive`` [N] coefficient of z2_i in dL/dz1_i."""

    mass: Tensor
    w_cross: Tensor
    w_same: Tensor
    r: Tensor
    positive: Tensor

    @property
    def hardest_share(self) -> Tensor:
        """max_j W_ij per anchor: 1 when one negative takes all the push (Li Fig. 3)."""
        return torch.cat([self.w_cross, self.w_same], dim=-1).abs().amax(-1)


def paradigm_by_autograd(
    loss: Callable[[Tensor, Tensor], Tensor], z1: Tensor, z2: Tensor
) -> AutogradParadigm:
    """GD mass, W and R of ``loss`` for the view-1 anchors of the batch (z1, z2), from autograd.

    ``loss(z1, z2) -> scalar`` is evaluated on exactly these tensors (give unit rows for a loss of
    normalised views; :meth:`contrastlab.losses.SentenceLoss.on_views` calls a registry loss without
    normalising again). ``z1``, ``z2``: [N, D] with D ≥ 2N. Computed in float64.

    >>> import torch, torch.nn.functional as F
    >>> z1, z2 = F.normalize(torch.randn(3, 8, dtype=torch.float64), dim=-1), None
    >>> z2 = F.normalize(z1 + 0.3 * torch.randn(3, 8, dtype=torch.float64), dim=-1)
    >>> view = paradigm_by_autograd(lambda a, b: -(a * b).sum(-1).mean(), z1, z2)   # alignment only
    >>> view.mass.abs().max().item() < 1e-12, [round(p, 12) for p in view.positive.tolist()]
    (True, [-0.333333333333, -0.333333333333, -0.333333333333])
    """
    n, d = z1.shape
    if d < 2 * n:
        raise ValueError(
            f"paradigm_by_autograd needs D >= 2N to separate the 2N directions, got N={n}, D={d}"
        )
    a = z1.detach().to(torch.float64).clone().requires_grad_()
    b = z2.detach().to(torch.float64)
    with torch.enable_grad():
        value = loss(a, b)
        (grad,) = torch.autograd.grad(value, a)
    if not torch.isfinite(grad).all():
        raise ValueError(
            f"the loss's gradient is not finite on a batch of {n} x {d}; make the loss finite for every "
            "batch (e.g. clamp before arccos or log)"
        )
    basis = torch.cat([b, a.detach()], dim=0)  # [2N, D]
    coef = torch.linalg.lstsq(basis.T, grad.T).solution.T  # grad_i = coef_i @ basis
    eye = torch.eye(n, dtype=torch.bool)
    cross = coef[:, :n].masked_fill(eye, 0.0)
    same = coef[:, n:].masked_fill(eye, 0.0)
    positive = coef[:, :n].diagonal()
    mass = cross.sum(-1) + same.sum(-1)
    tiny = 1e-12 * grad.norm(dim=-1).clamp_min(1e-300)
    active = mass.abs() > tiny
    safe = torch.where(active, mass, torch.ones_like(mass))[:, None]
    w_cross = torch.where(active[:, None], cross / safe, torch.zeros_like(cross))
    w_same = torch.where(active[:, None], same / safe, torch.zeros_like(same))
    r = torch.where(active, -positive / safe.squeeze(1), torch.full_like(mass, float("nan")))
    return AutogradParadigm(mass.where(active, torch.zeros_like(mass)), w_cross, w_same, r, positive)


def view_batch(
    mu_pos: float,
    mu_neg: float,
    *,
    n: int,
    sigma_pos: float = 0.05,
    sigma_neg: float = 0.10,
    generator: torch.Generator | None = None,
) -> tuple[Tensor, Tensor]:
    """Two views of N unit vectors in D = 2N + 1 dimensions whose anchor-positive angles are about
    N(mu_pos, sigma_pos²) and whose cross-view anchor-negative angles average about mu_neg.

    The anchors share a common direction: z1_i ∝ sqrt(1 - c) e_i + sqrt(c) e_0 + noise (Gaussian noise
    of norm about sigma_neg / sqrt(2) jitters the negatives' angles), and each positive leaves its
    anchor by θ_i ~ N(mu_pos, sigma_pos²) along a direction of its own,
    z2_i = cos θ_i z1_i + sin θ_i e_{N+i}; then z1_j · z2_i = cos θ_i (z1_j · z1_i), so
    c = cos(mu_neg) / cos(mu_pos) puts the cross-view negatives at mu_neg (same-view ones are nearer).
    That needs mu_pos <= mu_neg (the pairs that occur in training, Li Fig. 4); beyond it c is capped at
    0.95 and the realised angles differ: callers report them. The 2N vectors stay linearly
    independent, as :func:`paradigm_by_autograd` needs.
    """
    dim = 2 * n + 1
    spread = sigma_neg**2 / 2  # the noise's squared norm: shrinks every dot product by 1 / (1 + spread)
    c = min(max((1 + spread) * math.cos(mu_neg) / max(math.cos(mu_pos), 1e-6), 0.0), 0.95)
    base = torch.zeros(n, dim, dtype=torch.float64)
    base[:, 0] = math.sqrt(c)
    base[torch.arange(n), 1 + torch.arange(n)] = math.sqrt(1 - c)
    noise = torch.randn(n, n + 1, generator=generator, dtype=torch.float64)
    base[:, : n + 1] += noise * sigma_neg / math.sqrt(2 * (n + 1))
    z1 = F.normalize(base, dim=-1)
    theta = mu_pos + sigma_pos * torch.randn(n, generator=generator, dtype=torch.float64)
    theta = theta.clamp(0.0, math.pi)
    side = torch.zeros(n, dim, dtype=torch.float64)
    side[torch.arange(n), n + 1 + torch.arange(n)] = 1.0
    z2 = torch.cos(theta)[:, None] * z1 + torch.sin(theta)[:, None] * side
    return z1, F.normalize(z2, dim=-1)
