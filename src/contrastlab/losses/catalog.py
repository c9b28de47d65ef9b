"""Names, module files and default hyperparameters of every loss, sentence and vision (imports no torch).

The workflow reads this module to declare a loss's code (its file's) as a rule input and to fill in
hyperparameters a config leaves out. Defaults are the papers' values (BERT-base for the sentence losses):

- Nie et al. 2023, Table 2 (BERT-base column): infonce τ 0.05; align_uniform α 2, t 6, λ 0.1;
  dcl τ 0.03; dcl_plus τ 0.17; mpt m 0.23; met m 0.45; mat m 0.15 (units of π).
- Li, Zhang, Nie 2024, §3.2 baseline (paradigm m 0.30, τ 0.05, r 1.0), Tables 6 (arXiv) / 4 (ACL)
  for the modified losses (BERT-base), the authors' scripts for the originals' λ (mhe 10, mhs 1,
  vicreg 30, barlow twins 30) and ArcCon's u = 10° (Zhang et al. 2022; τ 0.05).
- Huang et al. 2023 (MACL), App. B.4: τ0 0.05, α 2, A0 0.8, no reweighting.
- Vision losses of MACL's CIFAR-10 study (Huang et al. Table 9, App. B.3, :mod:`.vision`): "the
  temperature is 0.1 for all the losses" (ntxent, flatnce, dcl_vision, dualtemp's intra-anchor τ,
  macl_vision's τ0) and α 0.5, A0 0 for MACL, reweighting on (protocol.md §1 "Vision defaults");
  dualtemp's inter-anchor τ_β = 1.0 = ``dt_m`` 10 x ``temperature`` 0.1 of the released SimCo script
  (github.com/ChaoningZhang/Dual-temperature, ``bash_files/simco.sh``), and its negatives those of the
  released loss: the N - 1 of the other view per anchor, the two directions averaged
  (``negatives: both_views`` gives the 2N - 2 of both views of the other Table 9 losses).
- Vision losses of the OAR study (:mod:`.oar`; its InfoNCE and DCL are ``ntxent`` and ``dcl_vision``):
  barlow_twins λ 5e-3 (Zbontar et al. 2021 §4); vicreg λ 25, μ 25, ν 1, γ 1, ε 1e-4 (Bardes et al.
  2022 §4.2 and ``main_vicreg.py``). The OAR authors' released code has neither loss.
"""

from __future__ import annotations

import math

#: Each loss's module, by module (the registry's order: LOSSES).
_MODULE_LOSSES = {
    "nie2023": ("infonce", "align_uniform", "dcl", "dcl_plus", "mpt", "met", "mat"),
    "li2024": (
        "arccon",
        "paradigm",
        "mhe",
        "mmhe",
        "mhs",
        "mmhs",
        "vicreg_li",
        "mvicreg",
        "barlow_twins_li",
        "mbarlow_twins",
    ),
    "macl": ("macl",),
    "vision": ("ntxent", "flatnce", "dcl_vision", "dualtemp", "macl_vision"),
    "oar": ("barlow_twins", "vicreg"),
}
LOSS_MODULES: dict[str, str] = {name: module for module, names in _MODULE_LOSSES.items() for name in names}

DEFAULTS: dict[str, dict[str, object]] = {
    # Nie et al. 2023, Table 2, BERT-base.
    "infonce": {"tau": 0.05},
    "align_uniform": {"alpha": 2.0, "t": 6.0, "lam": 0.1},
    "dcl": {"tau": 0.03},
    "dcl_plus": {"tau": 0.17},
    "mpt": {"m": 0.23},
    "met": {"m": 0.45},
    "mat": {"m": 0.15},
    # Li et al. 2024.
    "arccon": {"tau": 0.05, "u": math.pi / 18},
    "paradigm": {"m": 0.30, "tau": 0.05, "r": 1.0, "gd": True, "weight": "exp"},
    "mhe": {"lam": 10.0},
    "mmhe": {"lam": 1.0, "m": 0.30, "tau": 0.05, "r": 1.75, "gd": True, "weight": "exp"},
    "mhs": {"lam": 1.0},
    "mmhs": {"lam": 1.0, "m": 0.30, "r": 1.75, "gd": True},
    "vicreg_li": {"lam": 30.0},
    "mvicreg": {"lam": 1.0, "m": 0.30, "tau": 0.05, "r": 1.50, "gd": True, "weight": "exp"},
    "barlow_twins_li": {"lam": 30.0},
    "mbarlow_twins": {"lam": 1.0, "m": 0.30, "tau": 0.05, "r": 1.50, "gd": True, "weight": "exp"},
    # Huang et al. 2023, App. B.4 (sentence setting).
    "macl": {"tau0": 0.05, "alpha": 2.0, "a0": 0.8, "reweight": False},
    # Huang et al. 2023, App. B.3 (CIFAR-10, Table 9); dualtemp's tau_beta from the SimCo script.
    "ntxent": {"tau": 0.1},
    "flatnce": {"tau": 0.1},
    "dcl_vision": {"tau": 0.1},
    "dualtemp": {"tau": 0.1, "tau_beta": 1.0, "negatives": "other_view"},
    "macl_vision": {"tau0": 0.1, "alpha": 0.5, "a0": 0.0, "reweight": True},
    # OAR study (raw embeddings): Zbontar et al. 2021 §4; Bardes et al. 2022 §4.2.
    "barlow_twins": {"lam": 5e-3},
    "vicreg": {"lam": 25.0, "mu": 25.0, "nu": 1.0, "gamma": 1.0, "eps": 1e-4},
}

LOSSES: tuple[str, ...] = tuple(LOSS_MODULES)

#: The weightings ``weight`` may name, per loss (Li et al. Table 5).
WEIGHTS: dict[str, tuple[str, ...]] = {
    "paradigm": ("exp", "uniform"),
    "mmhe": ("exp", "none"),
    "mvicreg": ("exp", "none"),
    "mbarlow_twins": ("exp", "none"),
}

#: Which negatives ``dualtemp`` gives each anchor: the released SimCo loss's N - 1 of the other view
#: (default), or the 2N - 2 of both views that the other Table 9 losses use.
DUALTEMP_NEGATIVES = ("other_view", "both_views")

#: Hyperparameters that must be > 0 (temperatures, ratios, VICReg's gamma and eps).
_POSITIVE = ("tau", "tau_beta", "tau0", "t", "r", "gamma", "eps")


def _out_of_bounds(name: str, key: str, bound: str, value: object) -> ValueError:
    """``"<loss>: <key> must be <bound>, got <value>"``, with the ``bound`` kept on the error for whoever
    names the fix (:func:`contrastlab.config.schema.with_fix`)."""
    error = ValueError(f"{name}: {key} must be {bound}, got {value!r}")
    error.bound = bound
    return error


def _number(name: str, key: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _out_of_bounds(name, key, "a finite number", value)
    return float(value)


def check_hyperparameters(name: str, hp: dict[str, object]) -> dict[str, object]:
    """``hp`` of the built-in loss ``name`` as the loss takes them (numbers as floats), each checked
    against its bounds on its own: temperatures and ratios > 0, weights >= 0, align_uniform's λ in
    [0, 1], ArcCon's u in [0, π), the flags true or false, the named options one of theirs.

    The one statement of the bounds: the registry (``build_loss``) checks with it, and so does the
    config's validation (contrastlab.config.checks), key by key, before any job. Raises ``ValueError``
    ``"<loss>: <key> must be ..., got <value>"`` for the first value out of bounds.
    """
    out: dict[str, object] = {}
    for key, value in hp.items():
        if key in ("gd", "reweight"):
            if not isinstance(value, bool):
                raise _out_of_bounds(name, key, "true or false", value)
            out[key] = value
        elif key in ("weight", "negatives"):
            valid = WEIGHTS[name] if key == "weight" else DUALTEMP_NEGATIVES
            if value not in valid:
                raise _out_of_bounds(name, key, f"one of {', '.join(valid)}", value)
            out[key] = value
        elif key == "r" and value is None and name != "paradigm":
            out[key] = None
        else:
            v = _number(name, key, value)
            if (key in _POSITIVE or (key == "alpha" and name == "align_uniform")) and v <= 0:
                raise _out_of_bounds(name, key, "> 0", value)
            if key in ("lam", "alpha", "mu", "nu") and v < 0:
                raise _out_of_bounds(name, key, ">= 0", value)
            if key == "lam" and name == "align_uniform" and v > 1:
                raise _out_of_bounds(name, "lam", "in [0, 1]", value)
            if key == "u" and not 0 <= v < math.pi:
                raise _out_of_bounds(name, "u", "in [0, pi) radians", value)
            out[key] = v
    return out
