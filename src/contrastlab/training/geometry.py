"""Geometry of the representation space during training: the statistics behind Li Fig. 5, 7, 8b-c, 9 and
Nie Fig. 1b-d (train side) and Fig. 3b-e, measured on a fixed probe set of corpus sentences.

:func:`probe_statistics` (every ``analysis_every`` steps, off by default) encodes the probe as Li et al.'s
``statistics.py`` does: every sentence twice with dropout on, in batches of ``batch`` (Li: N = 128); view
2 is view 1's positive, the other sentences' view 2 its negatives; vectors are the head's output (the
script's: the raw [CLS], ``sent_emb``), L2-normalised, anchors view 1's rows:

- ``mu_pos``, ``sigma_pos``, ``mu_neg``, ``sigma_neg``: mean and standard deviation of the angles θ_ii'
  and θ_ij' (j ≠ i) (Li Fig. 9, the N(μ, σ²) model of §3.1); ``cos_pos``, ``cos_neg``: mean cosines
  (Li Fig. 8c).
- ``align`` = mean ‖z_i − z'_i‖², ``uniformity`` = log mean exp(−2‖z_a − z_b‖²) over distinct pairs,
  the two views' mean (Wang & Isola; Nie Fig. 1b-d); ``l_cl`` = InfoNCE at τ = 0.05 (Nie's L_cl).
- ``d_gap``: Nie Fig. 3's distance gap, mean distance to the negatives minus that to the positive.
- ``gd_active``: share of anchors with Li's baseline GD indicator on, s_ii − max_{j≠i} s_ij < m
  (m = :data:`LI_BASELINE_M`); ``ratio`` and ``hardest_share`` are over these anchors only, as the
  authors' ``cal_dynamic_ratio`` and ``cal_hard_neg_percentage``.
- ``ratio``: dynamic ratios of ArcCon sin(θ_ii' + u)/sin θ_ii' (u = 10°), MET ‖z_i − z'_j*‖ /
  ‖z_i − z'_i‖ and MAT sqrt((1 − cos² θ_ij*') / (1 − cos² θ_ii')), j* the hardest negative (Li Fig.
  8b); ``hardest_share[τ]``: j*'s share of the update direction under W_ij = softmax_j(s_ij/τ): with
  v_j = z'_j − s_ij z_i and c = Σ_j W_ij v_j, share = (W_ij* v_j*) · c / ‖c‖² (Li Fig. 7).
- ``lemma1[λ]``: Li's Lemma 1 for the GD-active anchors and j*: the least ratio r_min = 1/λ + sin θ_ij'
  cos α / sin θ_ii' − sqrt(1/λ² − sin² θ_ij' sin² α / sin² θ_ii') for which a step λ(r h'_i − h'_j)
  brings the anchor closer to its positive, α the angle between the tangent directions towards positive
  and negative; kept where ``cal_r_requirements`` keeps it (cos θ_ii', cos θ_ij', cos α > 0, a real
  root): ``n`` anchors, ``share_r1`` the share r = 1 satisfies, ``hist`` of r_min (clamped) in
  :data:`MIN_RATIO_BINS` bins over :data:`MIN_RATIO_RANGE` (Li Fig. 8a). The λ values are ours.
- ``hist``: the anchor-positive and anchor-negative cosines in :data:`HIST_BINS` bins over [−1, 1]
  (Li Fig. 5).

The trainer adds the same measures on up to ``analysis_sentences`` dev sentences (``dev_l_cl``, ...;
Nie's dev-set L_cl). The probe's dropout comes from a generator seeded by ``(seed, step)``, so the
analysis changes no training number and a resumed run logs the same statistics.

[0] Li, Zhang & Nie 2024, §3.2 and App. A; authors' ``statistics.py`` (github.com/BDBC-KG-NLP/
    UnderstandingCSE). [1] Nie et al. 2023, Fig. 1 and Fig. 3.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = [
    "ARCCON_U",
    "HIST_BINS",
    "LEMMA1_LAMBDAS",
    "LI_BASELINE_M",
    "MIN_RATIO_BINS",
    "MIN_RATIO_RANGE",
    "NIE_TAU",
    "SHARE_TAUS",
    "batch_sums",
    "finalize",
    "probe_statistics",
]

LI_BASELINE_M = 0.30  # Li §3.2: the baseline's GD margin
ARCCON_U = 10.0 / 180.0 * math.pi  # the authors' ArcCon margin u (10°)
NIE_TAU = 0.05  # Nie's L_cl temperature (BERT-base)
#: τ values of the hardest-negative share (Li Fig. 3 and 7).
SHARE_TAUS: tuple[float, ...] = (0.005, 0.01, 0.03, 0.05, 0.1, 0.3, 1.0, 3.0)
HIST_BINS = 100
LEMMA1_LAMBDAS: tuple[float, ...] = (0.1, 0.3, 0.5)
MIN_RATIO_BINS = 60
MIN_RATIO_RANGE = (0.0, 3.0)


@torch.no_grad()
def batch_sums(z1: Tensor, z2: Tensor, *, m: float = LI_BASELINE_M, taus: Sequence[float] = SHARE_TAUS):
    """Sums over one batch of unit vectors ``z1``, ``z2`` [N, D] (view 1 = anchors) that
    :func:`finalize` turns into the module's statistics; float64, on ``z1``'s device."""
    z1, z2 = z1.double(), z2.double()
    n = z1.shape[0]
    off = ~torch.eye(n, dtype=torch.bool, device=z1.device)
    sim = z1 @ z2.T
    pos = sim.diagonal()
    neg = sim[off]
    theta_pos = torch.arccos(pos.clamp(-1.0, 1.0))
    theta_neg = torch.arccos(neg.clamp(-1.0, 1.0))
    dist = torch.cdist(z1, z2)
    neg_dist_mean = dist.masked_fill(~off, 0.0).sum(-1) / (n - 1)
    masked = sim.masked_fill(~off, -math.inf)
    hardest_sim, hardest = masked.max(-1)
    active = pos - hardest_sim < m
    sums = {
        "n_pos": torch.tensor(float(n), dtype=torch.float64, device=z1.device),
        "n_neg": torch.tensor(float(n * (n - 1)), dtype=torch.float64, device=z1.device),
        "theta_pos": theta_pos.sum(),
        "theta_pos_sq": theta_pos.square().sum(),
        "theta_neg": theta_neg.sum(),
        "theta_neg_sq": theta_neg.square().sum(),
        "cos_pos": pos.sum(),
        "cos_neg": neg.sum(),
        "align": (z1 - z2).square().sum(-1).sum(),
        "l_cl": F.cross_entropy(sim / NIE_TAU, torch.arange(n, device=z1.device), reduction="sum"),
        "d_gap": (neg_dist_mean - dist.diagonal()).sum(),
        "n_active": active.double().sum(),
    }
    a_pos, a_hard = pos[active], hardest_sim[active]
    theta_a = theta_pos[active]
    anchor, hard_vec = z1[active], z2[hardest[active]]
    sums["ratio_arccon"] = (torch.sin(theta_a + ARCCON_U) / torch.sin(theta_a)).sum()
    sums["ratio_met"] = ((anchor - hard_vec).norm(dim=-1) / (anchor - z2[active]).norm(dim=-1)).sum()
    sums["ratio_mat"] = ((1.0 - a_hard.square()) / (1.0 - a_pos.square())).sqrt().sum()
    s_active = sim[active]
    for tau in taus:
        w = torch.softmax(masked[active] / tau, dim=-1)  # W_ij over j != i
        combined = w @ z2 - anchor * (w * s_active).sum(-1, keepdim=True)
        w_hard = w.gather(-1, hardest[active, None])
        hard_term = w_hard * (hard_vec - anchor * a_hard[:, None])
        share = (hard_term * combined).sum(-1) / combined.square().sum(-1)
        sums[f"share_{tau:g}"] = share.sum()
    sin_pos, sin_hard = torch.sin(theta_a), torch.sqrt((1.0 - a_hard.square()).clamp_min(0.0))
    cos_plane = F.cosine_similarity(
        z2[active] - anchor * a_pos[:, None], hard_vec - anchor * a_hard[:, None], dim=-1
    )
    sin_plane_sq = (1.0 - cos_plane.square()).clamp_min(0.0)
    for lam in LEMMA1_LAMBDAS:
        real = sin_pos.square() - lam**2 * sin_hard.square() * sin_plane_sq > 0
        keep = (a_pos > 0) & (a_hard > 0) & (cos_plane > 0) & real
        r_min = (
            1.0 / lam
            + sin_hard * cos_plane / sin_pos
            - (1.0 / lam**2 - sin_hard.square() * sin_plane_sq / sin_pos.square()).clamp_min(0.0).sqrt()
        )[keep]
        sums[f"minr_n_{lam:g}"] = keep.double().sum()
        sums[f"minr_r1_{lam:g}"] = (r_min < 1.0).double().sum()
        sums[f"minr_hist_{lam:g}"] = torch.histc(
            r_min.clamp(*MIN_RATIO_RANGE), MIN_RATIO_BINS, *MIN_RATIO_RANGE
        )
    sums["hist_pos"] = torch.histc(pos, HIST_BINS, -1.0, 1.0)
    sums["hist_neg"] = torch.histc(neg, HIST_BINS, -1.0, 1.0)
    return sums


def _uniformity(z: Tensor) -> float:
    return torch.pdist(z.double(), p=2).square().mul(-2).exp().mean().log().item()


def finalize(
    sums: dict[str, Tensor], views: tuple[Tensor, Tensor], taus: Sequence[float] = SHARE_TAUS
) -> dict:
    """The statistics (module docstring) from the summed :func:`batch_sums` of every batch and the
    concatenated unit vectors of both views (for the uniformity over the whole probe)."""
    value = {k: v.double().cpu() for k, v in sums.items()}

    def mean(key: str, count: str) -> float | None:
        c = value[count].item()
        return value[key].item() / c if c else None

    def std(key: str, count: str) -> float:
        mu = mean(key, count)
        return math.sqrt(max(mean(f"{key}_sq", count) - mu * mu, 0.0))

    return {
        "mu_pos": mean("theta_pos", "n_pos"),
        "sigma_pos": std("theta_pos", "n_pos"),
        "mu_neg": mean("theta_neg", "n_neg"),
        "sigma_neg": std("theta_neg", "n_neg"),
        "cos_pos": mean("cos_pos", "n_pos"),
        "cos_neg": mean("cos_neg", "n_neg"),
        "align": mean("align", "n_pos"),
        "uniformity": (_uniformity(views[0]) + _uniformity(views[1])) / 2,
        "l_cl": mean("l_cl", "n_pos"),
        "d_gap": mean("d_gap", "n_pos"),
        "gd_active": mean("n_active", "n_pos"),
        "ratio": {name: mean(f"ratio_{name}", "n_active") for name in ("arccon", "met", "mat")},
        "hardest_share": {f"{tau:g}": mean(f"share_{tau:g}", "n_active") for tau in taus},
        "lemma1": {
            f"{lam:g}": {
                "n": int(value[f"minr_n_{lam:g}"].item()),
                "share_r1": mean(f"minr_r1_{lam:g}", f"minr_n_{lam:g}"),
                "hist": [int(x) for x in value[f"minr_hist_{lam:g}"].tolist()],
            }
            for lam in LEMMA1_LAMBDAS
        },
        "hist": {side: [int(x) for x in value[f"hist_{side}"].tolist()] for side in ("pos", "neg")},
    }


def probe_statistics(
    embed_pairs: Callable[[Tensor, Tensor], tuple[Tensor, Tensor]],
    batches: Iterable[tuple[Tensor, Tensor]],
    *,
    m: float = LI_BASELINE_M,
    taus: Sequence[float] = SHARE_TAUS,
) -> dict:
    """The statistics of the module docstring over ``batches`` of ``(input_ids, attention_mask)``;
    ``embed_pairs(ids, mask)`` returns the two dropout views [B, D] of a batch (not normalised)."""
    total: dict[str, Tensor] = {}
    views1, views2 = [], []
    with torch.no_grad():
        for ids, mask in batches:
            h1, h2 = embed_pairs(ids, mask)
            z1, z2 = F.normalize(h1.float(), dim=-1), F.normalize(h2.float(), dim=-1)
            for key, val in batch_sums(z1, z2, m=m, taus=taus).items():
                total[key] = total[key] + val if key in total else val
            views1.append(z1)
            views2.append(z2)
    if not total:
        raise ValueError("the analysis probe has no batch: raise analysis_sentences")
    return finalize(total, (torch.cat(views1), torch.cat(views2)), taus)
