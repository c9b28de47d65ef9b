"""The grid: every cell (experiment, backbone, method, seed) a validated config trains, and each cell's
settings resolved through the layers the package docstring lists.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from contrastlab.config.schema import deep_merge
from contrastlab.paths import cell_path


@dataclass(frozen=True)
class Cell:
    """One point of the grid: trained once and evaluated once."""

    experiment: str
    backbone: str
    method: str
    seed: int

    @property
    def path(self) -> str:
        return cell_path(self)


#: How a sweep axis appears in method names (batch_size 64 -> ``<method>-bs64``); other axes use their
#: key without ``hp.`` (``hp.m`` 0.1 -> ``<method>-m0.1``).
SWEEP_LABELS = {"batch_size": "bs"}

#: The pooling every trained sentence cell is evaluated with: the last layer's [CLS] before BERT's pooler
#: (protocol.md §4; SimCSE's ``cls_before_pooler``, what the three papers evaluate after training). One
#: setting for all cells, so it is a constant rather than a config key: the ``encode``/``evaluate`` rules
#: pass it to the evaluator and the trainer writes the sentence-transformers files of each kept checkpoint
#: with it (``models.export``). The "Pretrained" rows use the experiment's ``pretrained_pooling``.
CELL_POOLING = "cls"


def track(config: Mapping[str, Any], experiment: str) -> str:
    """``sentence`` or ``vision``: which trainer and evaluator the experiment's cells use."""
    return config["experiments"][experiment].get("track") or "sentence"


def paper_of(name: str) -> str:
    """The paper an experiment, figure, table or job name belongs to, by the config's naming:
    ``<paper>``, ``<paper>_<study>``, ``<paper>/<figure>``, ``<paper>-analytic`` (a name of no paper
    gives its first word: the user's own experiments, ``pretrained``).

    >>> [paper_of(n) for n in ("nie2023", "macl_cifar10", "oar_synthetic/table2", "li2024-analytic")]
    ['nie2023', 'macl', 'oar', 'li2024']
    """
    return re.split(r"[/_-]", name, maxsplit=1)[0]


def expanded_methods(experiment: Mapping[str, Any]) -> dict[str, tuple[str, dict[str, Any]]]:
    """Every method of an experiment spec after its ``sweep``: name -> (configured method, overrides).

    Without a sweep each method is itself with no overrides. With ``sweep: {batch_size: [64, 128]}``
    method ``ntxent`` becomes ``ntxent-bs64`` ({"batch_size": 64}) and ``ntxent-bs128``; several axes
    give their product, in the order written.

    >>> expanded_methods({"methods": {"cl": {}}, "sweep": {"batch_size": [64, 128]}})
    {'cl-bs64': ('cl', {'batch_size': 64}), 'cl-bs128': ('cl', {'batch_size': 128})}
    """
    sweep = experiment.get("sweep") or {}
    out: dict[str, tuple[str, dict[str, Any]]] = {}
    for method in experiment["methods"]:
        for combo in itertools.product(*sweep.values()):
            overrides = dict(zip(sweep, combo, strict=True))
            labels = [f"{SWEEP_LABELS.get(k, k.removeprefix('hp.'))}{v}" for k, v in overrides.items()]
            out["-".join([method, *labels])] = (method, overrides)
    return out


def is_sweep_point(config: Mapping[str, Any], experiment: str, method: str) -> bool:
    """Whether ``method`` is a point of its experiment's ``sweep`` rather than a configured method."""
    exp = config["experiments"][experiment]
    return method not in exp["methods"] and method in expanded_methods(exp)


def _resolve_method(exp: Mapping[str, Any], method: str) -> tuple[str, dict[str, Any]]:
    if method in exp["methods"]:
        return method, {}
    try:
        return expanded_methods(exp)[method]
    except KeyError:
        raise KeyError(method) from None


def method_settings(config: Mapping[str, Any], experiment: str, method: str, backbone: str) -> dict:
    """Flat training settings of one cell (all ``TrainSettings`` or ``VisionTrainSettings`` fields but
    the seed); ``method`` may be a configured method or one of its sweep points (:func:`expanded_methods`).

    Resolution order (later wins): global ``training`` (``vision_training`` for a vision experiment),
    the experiment's ``training``, the experiment's ``backbone_training[backbone]`` (for a vision
    experiment: the backbone's ``vision`` spec), the method's ``lr``/``batch_size``/``training``/``hp``,
    the method's ``per_backbone[backbone]`` (same keys), then the sweep point's values. ``loss_hp``
    starts from the loss's paper defaults. A top-level ``precision_override`` (the speed switch)
    replaces every cell's precision, sentence and image (:func:`override_precision`).

    Each cell is resolved once per config (:func:`resolve`); this returns a copy the caller may change.
    """
    return copy.deepcopy(_grid(config).settings(config, experiment, method, backbone))


def override_precision(settings: dict, precision: str) -> dict:
    """``settings`` (changed in place and returned) under the speed switch ``precision_override``."""
    settings["precision"] = precision
    # SimCSE's --fp16 cells put the head under amp; an override is our speed switch, not theirs.
    settings.pop("head_autocast", None)
    return settings


def _layered_settings(config: Mapping[str, Any], experiment: str, method: str, backbone: str) -> dict:
    """:func:`method_settings` computed: the resolution layers, applied in order."""
    from contrastlab.losses.catalog import DEFAULTS

    exp = config["experiments"][experiment]
    base, overrides = _resolve_method(exp, method)
    spec = exp["methods"][base]
    vision = (exp.get("track") or "sentence") == "vision"
    settings = dict(config.get("vision_training") or {}) if vision else dict(config["training"])
    settings.update(exp.get("training", {}))
    if vision:
        encoder = dict((config["backbones"].get(backbone) or {}).get("vision") or {})
        settings.update({"arch": encoder.get("arch", "resnet18"), "stem": encoder.get("stem", "cifar")})
        settings["width"] = encoder.get("width", 64)
        if (
            "out_dim" in encoder
        ):  # only when set: the other cells' settings (and rerun triggers) stay as they were
            settings["out_dim"] = encoder["out_dim"]
        settings["dataset"] = exp["dataset"]
        # training.tensorboard: false turns the live curves off for the image cells too (one key for all)
        if "tensorboard" in config.get("training", {}) and "tensorboard" not in settings:
            settings["tensorboard"] = config["training"]["tensorboard"]
    else:
        settings.update(exp.get("backbone_training", {}).get(backbone, {}))
    hp = dict(DEFAULTS.get(spec["loss"], {}))
    for layer in (spec, spec.get("per_backbone", {}).get(backbone, {})):
        settings.update(layer.get("training", {}))
        hp.update(layer.get("hp", {}))
        for key in ("lr", "batch_size"):
            if key in layer:
                settings[key] = layer[key]
    for key, value in overrides.items():
        if key.startswith("hp."):
            hp[key.removeprefix("hp.")] = value
        else:
            settings[key] = value
    if config.get("precision_override"):
        override_precision(settings, config["precision_override"])
    settings["loss"] = spec["loss"]
    settings["loss_hp"] = hp
    return settings


@dataclass(frozen=True)
class ResolvedCell:
    """A cell with its settings resolved once (:func:`method_settings`, read-only here) and, for a
    search point's cell, the point (a :class:`contrastlab.search.SearchPoint`; search sits above config)."""

    cell: Cell
    settings: Mapping[str, Any]
    point: Any = None


@dataclass
class _Grid:
    """One config's resolved settings, per (experiment, method, backbone), filled as they are asked for."""

    snapshot: dict  #: a copy of the config they were resolved from: a changed config resolves anew
    by_cell: dict[tuple[str, str, str], dict] = field(default_factory=dict)
    #: how many cells were resolved (the test of "once per config" counts them)
    resolutions: int = 0

    def settings(self, config: Mapping[str, Any], experiment: str, method: str, backbone: str) -> dict:
        key = (experiment, method, backbone)
        if key not in self.by_cell:
            self.by_cell[key] = _layered_settings(config, experiment, method, backbone)
            self.resolutions += 1
        return self.by_cell[key]


#: Resolved grids of the configs last asked about, by ``id``; each entry keeps a copy of its config and
#: is used only while the config still equals it, so a config changed in place (or a new dict that reuses
#: a freed one's id) is resolved again. A handful suffices: the workflow and the tables ask about one.
_GRIDS: dict[int, _Grid] = {}
_GRIDS_KEPT = 8


def _grid(config: Mapping[str, Any]) -> _Grid:
    grid = _GRIDS.get(id(config))
    if grid is not None and grid.snapshot == config:
        return grid
    _GRIDS.pop(id(config), None)
    while len(_GRIDS) >= _GRIDS_KEPT:
        del _GRIDS[next(iter(_GRIDS))]
    grid = _GRIDS[id(config)] = _Grid(snapshot=copy.deepcopy(dict(config)))
    return grid


def resolve(config: Mapping[str, Any]) -> list[ResolvedCell]:
    """Every selected cell (:func:`cells`) with its settings, each resolved once per config: the
    workflow, the plan, the tables, the deviations and the figures read these rather than resolving a
    cell again. ``settings`` is a read-only view; :func:`method_settings` gives a copy to change."""
    grid = _grid(config)
    return [
        ResolvedCell(c, MappingProxyType(grid.settings(config, c.experiment, c.method, c.backbone)))
        for c in cells(config)
    ]


def vision_evaluation(config: Mapping[str, Any], experiment: str) -> dict:
    """The evaluation settings of a vision experiment's cells: the top-level ``vision_evaluation``
    with the experiment's own ``vision_evaluation`` merged over it."""
    own = config["experiments"][experiment].get("vision_evaluation") or {}
    return deep_merge(config.get("vision_evaluation") or {}, own)


def user_loss_methods(config: Mapping[str, Any]) -> dict[str, tuple[str, dict[str, Any]]]:
    """Every method of the selected experiments whose loss comes from the user's code (losses.user):
    method name -> (loss, hyperparameters as configured), the first experiment naming it deciding."""
    from contrastlab.losses.catalog import LOSS_MODULES
    from contrastlab.losses.user import is_user_loss

    select = config.get("select") or {}
    found: dict[str, tuple[str, dict[str, Any]]] = {}
    for name, exp in config["experiments"].items():
        if select.get("experiments") and name not in select["experiments"]:
            continue
        for method, spec in exp["methods"].items():
            if spec["loss"] not in LOSS_MODULES and is_user_loss(spec["loss"]):
                found.setdefault(method, (spec["loss"], dict(spec.get("hp") or {})))
    return found


def settings_digest(settings: Mapping[str, Any]) -> str:
    """Short stable hash of a settings dict (for logs and rerun triggers)."""
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:12]


def _selected(value: Any, allowed: list | None) -> bool:
    return allowed is None or value in allowed


def cells(config: Mapping[str, Any]) -> Iterator[Cell]:
    """Every selected cell of the grid, in config order (``select:`` narrows it to a subset)."""
    select = config.get("select") or {}
    for name, exp in config["experiments"].items():
        if not _selected(name, select.get("experiments")):
            continue
        seeds = exp.get("seeds") or config["seeds"]
        for backbone in exp["backbones"]:
            if not _selected(backbone, select.get("backbones")):
                continue
            for method, (base, _) in expanded_methods(exp).items():
                chosen = select.get("methods")
                if not (_selected(method, chosen) or _selected(base, chosen)) or not _selected(
                    backbone, exp["methods"][base].get("backbones")
                ):
                    continue
                for seed in seeds:
                    if _selected(seed, select.get("seeds")):
                        yield Cell(name, backbone, method, int(seed))


def pretrained_backbones(config: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(backbone, pooling) pairs whose unmodified model is evaluated for the "Pretrained" rows."""
    select = config.get("select") or {}
    pairs: dict[str, str] = {}
    for name, exp in config["experiments"].items():
        pooling = exp.get("pretrained_pooling")
        if pooling is None or not _selected(name, select.get("experiments")):
            continue
        for backbone in exp["backbones"]:
            if _selected(backbone, select.get("backbones")):
                pairs.setdefault(backbone, pooling)
    return sorted(pairs.items())


def backbone_dependencies(config: Mapping[str, Any], alias: str) -> list[str]:
    """Aliases a backbone needs materialised first (``tokenizer_from``)."""
    dependency = config["backbones"][alias].get("tokenizer_from")
    return [dependency] if dependency else []
