"""Loss values on small fixed batches against the loop oracles of ``loss_oracle`` (float64, 1e-6)."""

from __future__ import annotations

import math
from importlib import import_module

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from loss_oracle import unit, value

from contrastlab.losses import DEFAULTS, LOSS_MODULES, LOSSES, build_loss
from contrastlab.losses.oar import RAW_INPUT

# N = 3, D = 2: a fixed, hand-picked batch (raw, not normalised) with a mix of gated/ungated anchors.
H1 = [[1.0, 0.2], [0.3, 1.1], [-0.8, 0.5]]
H2 = [[0.9, 0.45], [0.1, 1.3], [-0.7, -0.1]]
# N = 5, D = 3: seeded random batch
_RNG = np.random.default_rng(7)
H1_B = (_RNG.normal(size=(5, 3)) * 2.0).tolist()
H2_B = (np.asarray(H1_B) + 0.6 * _RNG.normal(size=(5, 3))).tolist()

# Hyperparameters chosen so every branch is exercised (hinges partly active, temperatures moderate).
OVERRIDES = {
    "infonce": {"tau": 0.5},
    "dcl": {"tau": 0.5},
    "dcl_plus": {"tau": 0.5},
    "mpt": {"m": 0.4},
    "met": {"m": 0.5},
    "mat": {"m": 0.2},
    "arccon": {"tau": 0.5},
    "paradigm": {"m": 0.5, "tau": 0.5, "r": 1.3},
    "mmhe": {"tau": 0.5, "m": 0.5},
    "mmhs": {"m": 0.5},
    "mvicreg": {"tau": 0.5, "m": 0.5},
    "mbarlow_twins": {"tau": 0.5, "m": 0.5},
    "macl": {"tau0": 0.2, "alpha": 0.5, "a0": 0.3},
}


def _loss(name, hp, h1, h2):
    return build_loss(name, **hp)(
        torch.tensor(h1, dtype=torch.float64), torch.tensor(h2, dtype=torch.float64)
    )


@pytest.mark.parametrize("batch", ["A", "B", "A at the defaults"])  # A at τ 0.05: Li's G capped at e^80
@pytest.mark.parametrize("name", LOSSES)
def test_value_matches_oracle(name, batch):
    h1, h2 = (H1_B, H2_B) if batch == "B" else (H1, H2)
    hp = {**DEFAULTS[name], **(OVERRIDES.get(name, {}) if batch != "A at the defaults" else {})}
    if name == "dcl_plus" and batch == "A":
        hp["tau"] = 1.0  # so that DCL+ is active for some anchors and clipped for others
    out = _loss(name, hp, h1, h2)
    assert out.loss.item() == pytest.approx(value(name, h1, h2, hp), abs=1e-6, rel=1e-9)
    # the public function of the same name (infonce: info_nce): the entry's value and gradient on its views
    x1, x2 = (torch.tensor(h, dtype=torch.float64, requires_grad=True) for h in (h1, h2))
    v1, v2 = (x1, x2) if name in RAW_INPUT else (F.normalize(x1, dim=-1), F.normalize(x2, dim=-1))
    module = import_module(f"contrastlab.losses.{LOSS_MODULES[name]}")
    got = getattr(module, name.replace("infonce", "info_nce"))(v1, v2, **hp)
    want = build_loss(name, **hp).on_views(v1, v2)
    assert got.item() == pytest.approx(want.item(), abs=1e-12)
    torch.testing.assert_close(
        *(torch.autograd.grad(y, x1, retain_graph=True)[0] for y in (got, want)), rtol=0, atol=1e-12
    )
    z1, z2 = unit(h1), unit(h2)
    assert out.stats["align"] == pytest.approx(
        np.mean([a @ b for a, b in zip(z1, z2, strict=True)]), abs=1e-9
    )


STEP_OPTIONS = [
    {"gd": False, "weight": "none", "r": None},
    {"gd": True, "weight": "none", "r": None},
    {"gd": True, "weight": "exp", "r": None},
    {"gd": True, "weight": "exp", "r": 1.75},
    {"gd": False, "weight": "exp", "r": 1.25},
    {"gd": True, "weight": "none", "r": 1.5},
]


@pytest.mark.parametrize("opts", STEP_OPTIONS, ids=lambda o: f"gd{o['gd']}-{o['weight']}-r{o['r']}")
@pytest.mark.parametrize("name", ["mmhe", "mvicreg", "mbarlow_twins", "mmhs"])
def test_table5_variants_match_oracle(name, opts):
    hp = {**DEFAULTS[name], "tau": 0.5, "m": 0.5, "lam": 3.0, **opts}
    if name == "mmhs":
        hp.pop("weight"), hp.pop("tau")
    got = _loss(name, hp, H1_B, H2_B).loss.item()
    assert got == pytest.approx(value(name, H1_B, H2_B, hp), abs=1e-6, rel=1e-9)


def test_hand_computed_infonce_and_mpt():
    """Literally by hand: z1 = z2 = {e1, e2}, τ = 1: InfoNCE = log(1 + e^{-1}); MPT(m) = max(0, 0 - 1 + m)."""
    eye = torch.eye(2, dtype=torch.float64)
    assert build_loss("infonce", tau=1.0)(eye, eye).loss.item() == pytest.approx(
        math.log1p(math.exp(-1)), abs=1e-12
    )
    assert build_loss("mpt", m=1.25)(eye, eye).loss.item() == pytest.approx(0.25, abs=1e-12)
    assert build_loss("dcl", tau=1.0)(eye, eye).loss.item() == pytest.approx(-1.0, abs=1e-12)
    # MAT: θ_ii = arccos(1 - 1e-6) after the clamp, θ_ij = π/2
    want = math.acos(1 - 1e-6) - math.pi / 2 + 0.75 * math.pi
    assert build_loss("mat", m=0.75)(eye, eye).loss.item() == pytest.approx(want, abs=1e-12)
