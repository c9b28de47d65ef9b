"""Registry, validation, stats contract, catalog and the Table 5 option mapping."""

from __future__ import annotations

import doctest
import math
import subprocess
import sys

import pytest
import torch
from image_oracle import run

import contrastlab.losses as losses
from contrastlab.analysis import paradigm as paradigm_view
from contrastlab.losses import (
    DEFAULTS,
    LOSS_MODULES,
    LOSSES,
    LossOutput,
    build_loss,
    li2024,
    macl,
    nie2023,
    oar,
    registry,
    vision,
)
from contrastlab.losses.user import module_path

#: The loss modules: the catalog's names are exactly their entries (no hand copy of the loss list here, so a
#: new built-in loss is its module's entry, its catalog line and its oracle).
MODULES = {"nie2023": nie2023, "li2024": li2024, "macl": macl, "vision": vision, "oar": oar}


def test_names_and_catalog():
    entries = [name for module in MODULES.values() for name in module.ENTRIES]
    assert sorted(LOSSES) == sorted(entries) and len(set(entries)) == len(entries)
    assert set(DEFAULTS) == set(LOSS_MODULES) == set(LOSSES)
    for name, stem in LOSS_MODULES.items():
        assert name in MODULES[stem].ENTRIES
        assert module_path(name) == f"src/contrastlab/losses/{stem}.py"


def test_catalog_imports_no_torch():
    code = "import sys, contrastlab.losses.catalog; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_paper_defaults():
    assert DEFAULTS["infonce"] == {"tau": 0.05}
    assert DEFAULTS["mpt"] == {"m": 0.23} and DEFAULTS["met"] == {"m": 0.45}
    assert DEFAULTS["mat"] == {"m": 0.15}
    assert DEFAULTS["dcl"]["tau"] == 0.03 and DEFAULTS["dcl_plus"]["tau"] == 0.17
    assert DEFAULTS["align_uniform"] == {"alpha": 2.0, "t": 6.0, "lam": 0.1}
    # Li et al. 2024: §3.2 and A.4 (paradigm), Table 6 (BERT-base), the authors' λ of the originals, u = 10°
    assert DEFAULTS["arccon"] == {"tau": 0.05, "u": math.pi / 18}
    assert DEFAULTS["paradigm"] == {"m": 0.30, "tau": 0.05, "r": 1.0, "gd": True, "weight": "exp"}
    assert [DEFAULTS[n] for n in ("mhe", "mhs", "vicreg_li", "barlow_twins_li")] == [
        {"lam": v} for v in (10, 1, 30, 30)
    ]
    assert DEFAULTS["mmhe"] == {"lam": 1.0, "m": 0.30, "tau": 0.05, "r": 1.75, "gd": True, "weight": "exp"}
    assert DEFAULTS["mmhs"] == {"lam": 1.0, "m": 0.30, "r": 1.75, "gd": True}
    for name in ("mvicreg", "mbarlow_twins"):
        assert DEFAULTS[name] == {"lam": 1.0, "m": 0.30, "tau": 0.05, "r": 1.5, "gd": True, "weight": "exp"}
    assert DEFAULTS["macl"] == {"tau0": 0.05, "alpha": 2.0, "a0": 0.8, "reweight": False}
    # MACL App. B.3: τ 0.1 for all vision losses, MACL α 0.5, A0 0; Dual temperature's τ_β = 10 x 0.1
    for name in ("ntxent", "flatnce", "dcl_vision"):
        assert DEFAULTS[name] == {"tau": 0.1}
    assert DEFAULTS["dualtemp"] == {"tau": 0.1, "tau_beta": 1.0, "negatives": "other_view"}
    assert DEFAULTS["macl_vision"] == {"tau0": 0.1, "alpha": 0.5, "a0": 0.0, "reweight": True}
    # OAR study: Barlow Twins λ 5e-3 (Zbontar §4); VICReg λ = μ = 25, ν 1, γ 1, ε 1e-4 (Bardes §4.2)
    assert DEFAULTS["barlow_twins"] == {"lam": 5e-3}
    assert DEFAULTS["vicreg"] == {"lam": 25.0, "mu": 25.0, "nu": 1.0, "gamma": 1.0, "eps": 1e-4}


def test_unknown_name_lists_valid_names():
    with pytest.raises(ValueError, match=f"^unknown loss 'simclr'; valid names: {', '.join(LOSSES)}$"):
        build_loss("simclr")


@pytest.mark.parametrize(
    "name,hp,match",
    [
        ("infonce", {"temp": 0.05}, "unknown hyperparameter.*temp.*valid: tau"),
        ("mmhs", {"weight": "exp"}, "unknown hyperparameter.*weight"),
        ("infonce", {"tau": 0.0}, "tau must be > 0"),
        ("infonce", {"tau": float("nan")}, "tau must be a finite number"),
        ("mpt", {"m": "0.2"}, "m must be a finite number"),
        ("paradigm", {"weight": "none"}, "weight must be one of exp, uniform"),
        ("mmhe", {"weight": "uniform"}, "weight must be one of exp, none"),
        ("paradigm", {"gd": 1}, "gd must be true or false"),
        ("paradigm", {"r": None}, "r must be a finite number"),
        ("mmhe", {"r": -1.0}, "r must be > 0"),
        ("align_uniform", {"lam": 1.5}, "lam must be in"),
        ("arccon", {"u": 4.0}, "u must be in"),
        ("macl", {"reweight": "yes"}, "reweight must be true or false"),
        ("dualtemp", {"tau_beta": -1.0}, "tau_beta must be > 0"),
        ("dualtemp", {"tau_beta": 0.0}, "tau_beta must be > 0"),
        ("dualtemp", {"tau_beta": float("inf")}, "tau_beta must be a finite number"),
        ("dualtemp", {"negatives": "same_view"}, "negatives must be one of other_view, both_views"),
        ("macl_vision", {"alpha": -0.5}, "alpha must be >= 0"),
        ("dcl_vision", {"tau_beta": 1.0}, "unknown hyperparameter.*tau_beta.*valid: tau"),
        ("ntxent", {"tau_beta": 1.0}, "unknown hyperparameter.*tau_beta"),
        ("ntxent", {"negatives": "other_view"}, "unknown hyperparameter.*negatives"),
        ("vicreg", {"mu": -1.0}, "mu must be >= 0"),  # the OAR study's losses on raw embeddings
        ("vicreg", {"nu": -0.1}, "nu must be >= 0"),
        ("vicreg", {"lam": -1.0}, "lam must be >= 0"),
        ("vicreg", {"gamma": 0.0}, "gamma must be > 0"),
        ("vicreg", {"eps": 0.0}, "eps must be > 0"),
        ("vicreg", {"eps": float("nan")}, "eps must be a finite number"),
        ("barlow_twins", {"lam": -1.0}, "lam must be >= 0"),
        ("barlow_twins", {"mu": 1.0}, "unknown hyperparameter.*mu.*valid: lam"),
    ],
)
def test_invalid_hyperparameters_are_named(name, hp, match):
    with pytest.raises(ValueError, match=match):
        build_loss(name, **hp)


def test_bad_shapes():
    with pytest.raises(ValueError, match="at least 2"):
        build_loss("infonce")(torch.randn(1, 4), torch.randn(1, 4))
    with pytest.raises(ValueError, match=r"\[N, D\]"):
        build_loss("infonce")(torch.randn(3, 4), torch.randn(2, 4))
    with pytest.raises(TypeError, match="torch tensors, got ndarray and ndarray; use torch.as_tensor"):
        build_loss("infonce")(torch.randn(3, 4).numpy(), torch.randn(3, 4).numpy())


@pytest.mark.parametrize("name", LOSSES)
def test_stats_contract(name, monkeypatch):
    h1, h2 = torch.randn(6, 8), torch.randn(6, 8)
    out = build_loss(name)(h1, h2)
    assert isinstance(out, LossOutput)
    assert "align" in out.stats and all(type(v) is float for v in out.stats.values())
    gated = name in {"dcl_plus", "mpt", "met", "mat", "paradigm", "mmhe", "mmhs", "mvicreg", "mbarlow_twins"}
    assert ("gd_active" in out.stats) == gated

    def no_sync(*args, **kwargs):
        raise AssertionError("host sync with with_stats=False")

    for host_read in ("item", "tolist", "__bool__"):
        monkeypatch.setattr(torch.Tensor, host_read, no_sync)
    out = build_loss(name)(h1, h2, with_stats=False)
    assert out.stats == {} and out.loss.ndim == 0


TABLE5 = {
    # original loss (its λ)  -> the equivalent options of the modified loss
    ("mhe", 10.0): ("mmhe", {"gd": False, "weight": "none", "r": None, "lam": 10.0}),
    ("mhs", 1.0): ("mmhs", {"gd": False, "r": None, "lam": 1.0}),
    ("vicreg_li", 30.0): ("mvicreg", {"gd": False, "weight": "none", "r": None, "lam": 30.0}),
    ("barlow_twins_li", 30.0): ("mbarlow_twins", {"gd": False, "weight": "none", "r": None, "lam": 30.0}),
}


@pytest.mark.parametrize("original", list(TABLE5), ids=lambda k: k[0])
def test_table5_original_option_equals_original_loss(original):
    name, lam = original
    modified, opts = TABLE5[original]
    h1, h2 = torch.randn(6, 8, dtype=torch.float64), torch.randn(6, 8, dtype=torch.float64)
    runs = [run(name, h1, h2, lam=lam), run(modified, h1, h2, **opts)]
    for x, y in zip(*[(out.loss.detach(), *grads) for out, *grads in runs], strict=True):
        torch.testing.assert_close(x, y, atol=1e-12, rtol=1e-12)


@pytest.mark.parametrize("module", [losses, registry, nie2023, li2024, macl, vision, oar, paradigm_view])
def test_docstring_examples(module):
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0
