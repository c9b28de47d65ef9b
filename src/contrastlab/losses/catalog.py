"""Names, module files and default hyperparameters of every loss, sentence and vision (imports no torch).

The workflow reads this module to declare a loss's source file as a rule input and to fill in
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

LOSS_MODULES: dict[str, str] = {
    "infonce": "nie2023",
    "align_uniform": "nie2023",
    "dcl": "nie2023",
    "dcl_plus": "nie2023",
    "mpt": "nie2023",
    "met": "nie2023",
    "mat": "nie2023",
    "arccon": "li2024",
    "paradigm": "li2024",
    "mhe": "li2024",
    "mmhe": "li2024",
    "mhs": "li2024",
    "mmhs": "li2024",
    "vicreg_li": "li2024",
    "mvicreg": "li2024",
    "barlow_twins_li": "li2024",
    "mbarlow_twins": "li2024",
    "macl": "macl",
    "ntxent": "vision",
    "flatnce": "vision",
    "dcl_vision": "vision",
    "dualtemp": "vision",
    "macl_vision": "vision",
    "barlow_twins": "oar",
    "vicreg": "oar",
}

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
