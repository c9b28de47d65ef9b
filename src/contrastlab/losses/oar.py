"""Losses of the OAR study (OAR Tables 2-4, Fig. 2): Barlow Twins and VICReg in their original vision
forms, and the Orthonormal Anchor Regression term with its fixed anchors.

[0] "Stable Contrastive Learning with Orthonormal Anchors Regression" (OAR), 2024, §4 (the OAR loss
    L = Σ_i (1 - s(z_i, c_{y_i})) over the labelled set S), §5 (CIFAR-10/100). Authors' code:
    github.com/HuanranLi/ContrastiveLearning_V2 (``src/OAR_model_SimCLR.py``, ``src/OAR_main.py``).
[1] J. Zbontar, L. Jing, I. Misra, Y. LeCun, S. Deny. "Barlow Twins: Self-Supervised Learning via
    Redundancy Reduction." ICML 2021. Eq. (1)-(2). Reference code: github.com/facebookresearch/
    barlowtwins (``main.py``).
[2] A. Bardes, J. Ponce, Y. LeCun. "VICReg: Variance-Invariance-Covariance Regularization for
    Self-Supervised Learning." ICLR 2022. Eq. (1)-(6). Reference code: github.com/facebookresearch/
    vicreg (``main_vicreg.py``).

What the OAR authors' code contains (facts; the rest of their pipeline is not released): only the
SimCLR run, with lightly's ``NTXentLoss`` (mean over the 2N anchors of the symmetric batch, positive
plus 2N - 2 same- and cross-view negatives in the denominator: the registry's ``ntxent``) and the OAR
term; no Barlow Twins, VICReg or DCL. Those follow their original papers' released code here (the
code that produced the published numbers, protocol.md); the OAR study's DCL is the registry's
``dcl_vision`` (as lightly's ``DCLLoss`` computes it over the 2N batch).

Barlow Twins and VICReg take the *raw* embeddings (the registry passes them unnormalised, see
:data:`RAW_INPUT`): their batch statistics replace the row normalisation of the contrastive losses.
Both need N >= 2 and contain no loop over the batch.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = [
    "RAW_INPUT",
    "BN_EPS",
    "batch_standardize",
    "off_diagonal",
    "cross_correlation",
    "barlow_twins",
    "vicreg_invariance",
    "vicreg_variance",
    "vicreg_covariance",
    "vicreg",
    "orthonormal_anchors",
    "nonnegative_reach",
    "oar_term",
    "oar_loss",
]

#: Registry names whose entries receive the raw (unnormalised) h1, h2.
RAW_INPUT: frozenset[str] = frozenset({"barlow_twins", "vicreg"})

#: Barlow Twins' standardisation epsilon: ``BatchNorm1d``'s default, used by the reference code.
BN_EPS = 1e-5

_REDUCTIONS = ("mean", "sum")


# --------------------------------------------------------------------------- shared helpers
def batch_standardize(z: Tensor, *, eps: float = BN_EPS) -> Tensor:
    """(z - mean) / sqrt(var + eps) per dimension over the batch, var biased (divided by N).

    This is ``BatchNorm1d(affine=False)`` in training mode, the standardisation of the Barlow Twins
    reference code; eps keeps a constant dimension finite (it maps to 0).

    >>> import torch
    >>> batch_standardize(torch.tensor([[1.0], [3.0]]), eps=0.0).flatten().tolist()
    [-1.0, 1.0]
    """
    centred = z - z.mean(dim=0)
    return centred * torch.rsqrt(centred.pow(2).mean(dim=0) + eps)


def off_diagonal(m: Tensor) -> Tensor:
    """The D(D - 1) off-diagonal entries of a square [D, D] matrix, flattened (boolean mask)."""
    eye = torch.eye(m.shape[0], dtype=torch.bool, device=m.device)
    return m[~eye]


# --------------------------------------------------------------------------- Barlow Twins
def cross_correlation(h1: Tensor, h2: Tensor, *, eps: float = BN_EPS) -> Tensor:
    """C = standardize(h1)ᵀ standardize(h2) / N, [D, D] (Eq. 2 of [1])."""
    return batch_standardize(h1, eps=eps).T @ batch_standardize(h2, eps=eps) / h1.shape[0]


def barlow_twins(h1: Tensor, h2: Tensor, *, lam: float, eps: float = BN_EPS) -> Tensor:
    """Barlow Twins (Eq. 1 of [1]): Σ_i (1 - C_ii)² + λ Σ_{i≠j} C_ij².

    C is the cross-correlation of the two views after per-dimension batch standardisation
    (:func:`cross_correlation`). Choices, as the reference ``main.py`` computes it: the paper's
    pseudocode divides by ``std`` (unbiased, no epsilon); the reference code standardises with
    ``BatchNorm1d(affine=False)``, i.e. biased variance + eps 1e-5 (followed here; a collapsed
    dimension gives C_ii = 0, not NaN). λ = 5e-3 is the paper's value (§4, the default here); the
    reference script's default ``--lambd`` is 0.0051 and lightly's ``BarlowTwinsLoss`` uses 5e-3.
    No scaling of the loss. Shapes: h1, h2 raw [N, D], N >= 2. Range: lam >= 0, eps >= 0.

    Invariant to a per-dimension affine map of either view's embeddings (exactly with eps = 0).

    >>> import torch
    >>> h = torch.tensor([[1.0], [-1.0]])
    >>> round(barlow_twins(h, h, lam=5e-3, eps=0.0).item(), 6)  # C = 1
    0.0
    """
    return _barlow_twins_impl(h1, h2, lam=lam, eps=eps)[0]


def _barlow_twins_impl(h1: Tensor, h2: Tensor, *, lam: float, eps: float = BN_EPS):
    c = cross_correlation(h1, h2, eps=eps)
    on_diag = (torch.diagonal(c) - 1.0).pow(2).sum()
    off_diag = off_diagonal(c).pow(2).sum()
    stats = {"align": _align(h1, h2), "on_diag": on_diag, "off_diag": off_diag}
    return on_diag + lam * off_diag, stats


# --------------------------------------------------------------------------- VICReg
def vicreg_invariance(h1: Tensor, h2: Tensor) -> Tensor:
    """s = mean over all N·D entries of (h1 - h2)² (the reference code's ``F.mse_loss``; the paper's
    Eq. 5 writes (1/N) Σ_i ||z_i - z'_i||², D times larger)."""
    return F.mse_loss(h1, h2)


def vicreg_variance(h: Tensor, *, gamma: float, eps: float) -> Tensor:
    """v = mean_j relu(γ - sqrt(Var_j + ε)), Var unbiased over the batch (Eq. 1-2 of [2])."""
    return F.relu(gamma - torch.sqrt(h.var(dim=0) + eps)).mean()


def vicreg_covariance(h: Tensor) -> Tensor:
    """c = Σ_{i≠j} Cov_ij² / D, Cov = centredᵀ centred / (N - 1) (Eq. 3-4 of [2])."""
    centred = h - h.mean(dim=0)
    cov = centred.T @ centred / (h.shape[0] - 1)
    return off_diagonal(cov).pow(2).sum() / h.shape[1]


def vicreg(
    h1: Tensor, h2: Tensor, *, lam: float, mu: float, nu: float, gamma: float = 1.0, eps: float = 1e-4
) -> Tensor:
    """VICReg ([2]): λ·s(h1, h2) + μ·[v(h1) + v(h2)]/2 + ν·[c(h1) + c(h2)].

    s = MSE (:func:`vicreg_invariance`), v = variance hinge (:func:`vicreg_variance`), c = covariance
    term (:func:`vicreg_covariance`). Choices, as the reference ``main_vicreg.py`` (and lightly's
    ``VICRegLoss``) compute it: s is the mean over the N·D entries; the variance hinge is
    *averaged* over the two views (the code's ``mean(relu(1 - std_x)) / 2 + ... / 2``; the paper's
    Eq. 6 sums them, which is this loss with μ doubled); the covariance terms are summed. Defaults
    (paper §4.2 and the code): λ = μ = 25, ν = 1, γ = 1, ε = 1e-4. Keyword names: ``lam`` = λ
    (invariance), ``mu`` = μ (variance), ``nu`` = ν (covariance), ``gamma`` = γ (target std),
    ``eps`` = ε (inside the sqrt). Shapes: h1, h2 raw [N, D], N >= 2. Ranges: lam, mu, nu >= 0;
    gamma > 0; eps > 0.

    >>> import torch
    >>> h = torch.tensor([[1.0, 0.0], [-1.0, 0.0]])  # dim 0 std sqrt(2) > 1, dim 1 constant
    >>> round(vicreg(h, h, lam=25.0, mu=25.0, nu=1.0, gamma=1.0, eps=1e-4).item(), 6)  # 25 (1 - 0.01)/2
    12.375
    """
    return _vicreg_impl(h1, h2, lam=lam, mu=mu, nu=nu, gamma=gamma, eps=eps)[0]


def _vicreg_impl(h1: Tensor, h2: Tensor, *, lam: float, mu: float, nu: float, gamma: float, eps: float):
    inv = vicreg_invariance(h1, h2)
    var = 0.5 * (vicreg_variance(h1, gamma=gamma, eps=eps) + vicreg_variance(h2, gamma=gamma, eps=eps))
    cov = vicreg_covariance(h1) + vicreg_covariance(h2)
    stats = {"align": _align(h1, h2), "invariance": inv, "variance": var, "covariance": cov}
    return lam * inv + mu * var + nu * cov, stats


def _align(h1: Tensor, h2: Tensor) -> Tensor:
    """mean_i cos(h1_i, h2_i): the protocol's ``align`` stat, from the raw embeddings."""
    return (F.normalize(h1, dim=-1) * F.normalize(h2, dim=-1)).sum(-1).mean().detach()


# --------------------------------------------------------------------------- the OAR term
def nonnegative_reach(anchors: Tensor) -> Tensor:
    """[K] the largest cosine a non-negative vector can have with each anchor (rows of ``anchors``).

    For x >= 0: c·x <= c₊·x <= ||c₊|| ||x|| (c₊ = max(c, 0); Cauchy-Schwarz), with equality at x = c₊,
    so the bound is ||c₊|| / ||c||. It matters without a projection head (OAR §5.1): a ResNet's pooled
    output after ReLU is non-negative, and for a random unit anchor in d dimensions E||c₊||² = 1/2,
    i.e. a reachable cosine of about sqrt(1/2) = 0.71 (0.63-0.78 for 99% of anchors at d = 512).

    >>> import torch
    >>> nonnegative_reach(torch.tensor([[3.0, -4.0], [1.0, 0.0]])).tolist()
    [0.6000000238418579, 1.0]
    """
    return anchors.clamp_min(0).norm(dim=-1) / anchors.norm(dim=-1)


def orthonormal_anchors(
    num_classes: int,
    dim: int,
    *,
    generator: torch.Generator,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> Tensor:
    """K = ``num_classes`` fixed orthonormal anchors c_1..c_K in R^dim, as rows of a [K, dim] tensor.

    Drawn once from ``generator`` (a CPU ``torch.Generator``): Q R = a [dim, K] standard Gaussian
    matrix (float64), Q's columns multiplied by sign(R_kk) so the factorisation is unique (the rows
    are Haar-distributed and the same seed always gives the same anchors). The authors' code instead
    takes the first K rows of V from ``torch.svd`` of a seed-42 [dim, dim] Gaussian matrix: also
    orthonormal rows, not bit-for-bit reproducible across LAPACK builds, and not sign-fixed.
    Requires 1 <= num_classes <= dim.

    >>> import torch
    >>> c = orthonormal_anchors(3, 5, generator=torch.Generator().manual_seed(0))
    >>> c.shape, torch.allclose(c @ c.T, torch.eye(3), atol=1e-6)
    (torch.Size([3, 5]), True)
    """
    for key, value in (("num_classes", num_classes), ("dim", dim)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{key} must be a positive integer, got {value!r}")
    if num_classes > dim:
        raise ValueError(f"num_classes must be <= dim for orthonormal anchors, got {num_classes} > {dim}")
    if not isinstance(generator, torch.Generator):
        raise ValueError(f"generator must be a torch.Generator, got {type(generator).__name__}")
    gauss = torch.randn(dim, num_classes, generator=generator, dtype=torch.float64, device=generator.device)
    q, r = torch.linalg.qr(gauss)
    signs = torch.where(torch.diagonal(r) < 0, -1.0, 1.0).to(q)
    return (q * signs).T.contiguous().to(dtype=dtype, device=device)


def oar_term(
    z: Tensor,
    labels: Tensor,
    anchors: Tensor,
    *,
    labelled_mask: Tensor | None = None,
    reduction: str = "mean",
    check_labels: bool = True,
) -> Tensor:
    """The OAR regression loss of one view (§4 of [0]): 1 - cos(z_i, c_{y_i}) over the labelled i.

    ``reduction="sum"`` is the paper's L_OAR = Σ_{i∈S} (1 - s(z_i, c_{y_i})); ``"mean"`` (default)
    divides by |S|, the authors' reduction (their per-view sum is divided by the number of labelled
    samples). The authors' code returns -Σ cos, i.e. the paper's value minus |S|: the same gradient.
    z is normalised here (the authors normalise it too) and so are the anchors (already unit).
    ``labelled_mask`` [N] bool selects S (default: every row); labels of unlabelled rows are
    ignored (e.g. -1). An empty S gives 0 (not NaN). Computed in float32 (float64 stays float64)
    with autocast disabled. Shapes: z [N, D] raw, labels [N] integer in [0, K), anchors [K, D].
    Validation of the labelled labels' range needs one host sync; ``check_labels=False`` skips it for
    a caller that checked its labels once (the trainer, whose step must not wait for the GPU).

    >>> import torch
    >>> c = torch.eye(2)
    >>> oar_term(torch.tensor([[3.0, 0.0], [0.0, -1.0]]), torch.tensor([0, 1]), c, reduction="sum").item()
    2.0
    """
    if reduction not in _REDUCTIONS:
        raise ValueError(f"reduction must be one of {', '.join(_REDUCTIONS)}, got {reduction!r}")
    if z.ndim != 2 or anchors.ndim != 2 or anchors.shape[1] != z.shape[1]:
        raise ValueError(
            f"z must be [N, D] and anchors [K, D], got {tuple(z.shape)} and {tuple(anchors.shape)}"
        )
    if labels.shape != z.shape[:1] or labels.dtype.is_floating_point or labels.dtype == torch.bool:
        raise ValueError(
            f"labels must be an integer tensor of shape [{z.shape[0]}], "
            f"got {labels.dtype} {tuple(labels.shape)}"
        )
    if labelled_mask is None:
        labelled_mask = torch.ones_like(labels, dtype=torch.bool)
    elif labelled_mask.dtype != torch.bool or labelled_mask.shape != labels.shape:
        raise ValueError(
            f"labelled_mask must be a bool tensor of shape [{z.shape[0]}], "
            f"got {labelled_mask.dtype} {tuple(labelled_mask.shape)}"
        )
    num_classes = anchors.shape[0]
    if check_labels and bool((((labels < 0) | (labels >= num_classes)) & labelled_mask).any()):
        raise ValueError(f"labels of labelled samples must be in [0, {num_classes})")
    dtype = torch.float64 if z.dtype == torch.float64 else torch.float32
    with torch.autocast(device_type=z.device.type, enabled=False):
        zn = F.normalize(z.to(dtype), dim=-1)
        cn = F.normalize(anchors.to(device=z.device, dtype=dtype), dim=-1)
        target = cn[torch.where(labelled_mask, labels, torch.zeros_like(labels))]
        terms = (1.0 - (zn * target).sum(-1)).masked_fill(~labelled_mask, 0.0)
        total = terms.sum()
        if reduction == "sum":
            return total
        return total / labelled_mask.sum().clamp_min(1).to(dtype)


def oar_loss(
    z1: Tensor,
    z2: Tensor,
    labels: Tensor,
    anchors: Tensor,
    *,
    labelled_mask: Tensor | None = None,
    check_labels: bool = True,
) -> Tensor:
    """The OAR term of a labelled batch seen in two views, as the authors add it to the contrastive
    loss: [oar_term(z1) + oar_term(z2)] / 2 with ``reduction="mean"`` (both views contribute; their
    code adds the two views' sums and divides by 2·|S|). Added with weight 1 to the contrastive
    loss of the (separate) unlabelled batch.

    >>> import torch
    >>> z = torch.tensor([[1.0, 0.0], [0.0, 2.0]])
    >>> oar_loss(z, -z, torch.tensor([0, 1]), torch.eye(2)).item()  # (0 + 2) / 2
    1.0
    """
    terms = [
        oar_term(z, labels, anchors, labelled_mask=labelled_mask, check_labels=check_labels) for z in (z1, z2)
    ]
    return 0.5 * (terms[0] + terms[1])


# --------------------------------------------------------------------------- registry entries
ENTRIES = {
    "barlow_twins": _barlow_twins_impl,
    "vicreg": _vicreg_impl,
}
