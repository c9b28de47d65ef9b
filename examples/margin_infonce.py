"""An example of a loss from your own code: InfoNCE with an additive margin on the positive, both ways.

Anchor z1_i is pulled to z2_i and pushed from z2_j (j != i) as in InfoNCE (Nie et al. 2023, Eq. 1),
but its positive logit is (s_ii - m) / tau (the additive margin of AM-Softmax, Wang et al. 2018), so
the gradient dissipates only once the positive beats the negatives by about m; the loss averages the
two directions (view-1 anchors and view-2 anchors), which makes it symmetric in the views.

Use it in a config (see README, "Evaluate your own loss"):

    methods:
      margin_nce: {loss: "examples/margin_infonce.py:margin_infonce", hp: {tau: 0.05, m: 0.1}}

>>> import torch, torch.nn.functional as F
>>> z = F.normalize(torch.eye(4, 8), dim=-1)
>>> loss, stats = margin_infonce(z, z, tau=0.05, m=0.0)
>>> round(loss.item(), 6), stats["positive_cos"].item()
(0.0, 1.0)
"""

import torch
import torch.nn.functional as F

from contrastlab.losses.user import contrastive_loss


@contrastive_loss(inputs="normalized", symmetric=True)
def margin_infonce(z1: torch.Tensor, z2: torch.Tensor, *, tau: float = 0.05, m: float = 0.1):
    """Mean over both directions of -log softmax_i((s_ii - m) / tau, s_ij / tau); z1, z2 unit [N, D]."""
    if tau <= 0:
        raise ValueError(f"tau must be > 0, got {tau}")
    sim = z1 @ z2.T
    logits = (sim - m * torch.eye(sim.shape[0], dtype=sim.dtype, device=sim.device)) / tau
    target = torch.arange(sim.shape[0], device=sim.device)
    loss = 0.5 * (F.cross_entropy(logits, target) + F.cross_entropy(logits.T, target))
    return loss, {"positive_cos": sim.diagonal().mean()}
