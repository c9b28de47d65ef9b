"""The grid: every cell (experiment, backbone, method, seed) a validated config trains, and each cell's
settings, resolved once (:class:`Grid`, whose docstring states the resolution order).
"""

from __future__ import annotations

import copy
import functools
import hashlib
import itertools
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar, NamedTuple

from contrastlab.config.data import DataConfig
from contrastlab.config.schema import deep_merge
from contrastlab.config.searches import search_spec
from contrastlab.losses.catalog import DEFAULTS, LOSS_MODULES
from contrastlab.losses.user import is_user_loss
from contrastlab.paths import Resources, Results, cell_path


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


class MethodOn(NamedTuple):
    """A method of an experiment on a backbone: what one set of settings belongs to (its cells, one
    per seed, share them); :meth:`Grid.settings` takes it as it takes a :class:`Cell`."""

    experiment: str
    backbone: str
    method: str


#: How a sweep axis appears in method names (batch_size 64 -> ``<method>-bs64``); other axes use their
#: key without ``hp.`` (``hp.m`` 0.1 -> ``<method>-m0.1``).
SWEEP_LABELS = {"batch_size": "bs"}


def expanded_methods(experiment: Mapping[str, Any]) -> dict[str, tuple[str, dict[str, Any]]]:
    """Every method of an experiment spec after its ``sweep``: name -> (configured method, overrides);
    without a sweep each method is itself with no overrides, several axes give their product.

    >>> expanded_methods({"methods": {"cl": {}}, "sweep": {"batch_size": [64, 128]}})
    {'cl-bs64': ('cl', {'batch_size': 64}), 'cl-bs128': ('cl', {'batch_size': 128})}
    """
    return {name: (method, dict(overrides)) for name, (method, overrides) in _expansion(experiment).items()}


def _expansion(experiment: Mapping[str, Any]) -> Mapping[str, tuple[str, Mapping[str, Any]]]:
    """:func:`expanded_methods`, shared between its callers (never changed): asked for every cell a grid
    resolves and every row a table reads, the names are built once per (methods, sweep), each value
    keyed with its type (1, 1.0 and True name different points)."""
    sweep = experiment.get("sweep") or {}
    methods = tuple(experiment["methods"])
    typed = tuple((axis, tuple((type(v), v) for v in values)) for axis, values in sweep.items())
    try:
        return _expanded_methods(methods, typed)
    except TypeError:  # an unhashable sweep value (the config's checks name it): built without the memo
        return _expanded_methods.__wrapped__(methods, typed)


@functools.lru_cache(maxsize=256)
def _expanded_methods(
    methods: tuple[str, ...], sweep: tuple[tuple[str, tuple[tuple[type, Any], ...]], ...]
) -> dict[str, tuple[str, dict[str, Any]]]:
    out: dict[str, tuple[str, dict[str, Any]]] = {}
    axes = [key for key, _ in sweep]
    for method in methods:
        for combo in itertools.product(*(values for _, values in sweep)):
            overrides = {axis: value for axis, (_, value) in zip(axes, combo, strict=True)}
            labels = [f"{SWEEP_LABELS.get(k, k.removeprefix('hp.'))}{v}" for k, v in overrides.items()]
            out["-".join([method, *labels])] = (method, overrides)
    return out


def sweep_points(experiment: Mapping[str, Any]) -> dict[str, tuple[str, float]]:
    """Each sweep point of an experiment spec: method name -> (swept key without ``hp.``, value).

    >>> sweep_points({"methods": {"cl": {}}, "sweep": {"hp.tau": [0.05, 3.0]}})
    {'cl-tau0.05': ('tau', 0.05), 'cl-tau3.0': ('tau', 3.0)}
    """
    return {
        name: (key.removeprefix("hp."), float(value))
        for name, (_, overrides) in _expansion(experiment).items()
        for key, value in overrides.items()
    }


def _resolve_method(exp: Mapping[str, Any], method: str) -> tuple[str, dict[str, Any]]:
    if method in exp["methods"]:
        return method, {}
    base, overrides = _expansion(exp)[method]  # KeyError(method): neither a method nor a sweep point
    return base, dict(overrides)


def override_precision(settings: dict, precision: str) -> dict:
    """``settings`` (changed in place and returned) under the speed switch ``precision_override``."""
    settings["precision"] = precision
    # SimCSE's --fp16 cells put the head under amp; an override is our speed switch, not theirs.
    settings.pop("head_autocast", None)
    return settings


def apply_overrides(settings: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict:
    """``settings`` with each ``key: value`` of ``overrides`` set (``hp.<name>`` in ``loss_hp``)."""
    # dict() first: a grid's read-only settings (and their loss_hp) cannot be deep-copied as they are
    out = copy.deepcopy({k: dict(v) if isinstance(v, Mapping) else v for k, v in settings.items()})
    for key, value in overrides.items():
        if key.startswith("hp."):
            out["loss_hp"] = {**out.get("loss_hp", {}), key.removeprefix("hp."): value}
        else:
            out[key] = value
    return out


def setting_value(settings: Mapping[str, Any], key: str) -> Any:
    """The value of a search axis in resolved settings (``hp.<name>`` in ``loss_hp``; None if unset)."""
    if key.startswith("hp."):
        return (settings.get("loss_hp") or {}).get(key.removeprefix("hp."))
    return settings.get(key)


def _stated_hp(spec: Mapping[str, Any], backbone: str) -> dict[str, Any]:
    """The loss hyperparameters a configured method states for ``backbone``: its ``hp``, then
    ``per_backbone[backbone].hp``."""
    per_backbone = (spec.get("per_backbone") or {}).get(backbone) or {}
    return {**(spec.get("hp") or {}), **(per_backbone.get("hp") or {})}


def loss_hp(spec: Mapping[str, Any], backbone: str) -> dict[str, Any]:
    """:func:`_stated_hp` over the loss's paper defaults (:data:`contrastlab.losses.catalog.DEFAULTS`)."""
    return {**DEFAULTS.get(spec["loss"], {}), **_stated_hp(spec, backbone)}


def _layered_settings(config: Mapping[str, Any], experiment: str, method: str, backbone: str) -> dict:
    """One cell's settings through the resolution layers (:class:`Grid`), applied in order."""
    exp = config["experiments"][experiment]
    base, overrides = _resolve_method(exp, method)
    spec = exp["methods"][base]
    vision = (exp.get("track") or "sentence") == "vision"
    training = config.get("training") or {}
    settings = dict(config.get("vision_training") or {}) if vision else dict(training)
    settings.update(exp.get("training", {}))
    if vision:
        encoder = dict(((config.get("backbones") or {}).get(backbone) or {}).get("vision") or {})
        settings.update({"arch": encoder.get("arch", "resnet18"), "stem": encoder.get("stem", "cifar")})
        settings["width"] = encoder.get("width", 64)
        # out_dim only when set: the other cells' settings (and rerun triggers) stay as they were
        if "out_dim" in encoder:
            settings["out_dim"] = encoder["out_dim"]
        settings["dataset"] = exp["dataset"]
        # training.tensorboard: false turns the live curves off for the image cells too (one key for all)
        if "tensorboard" in training and "tensorboard" not in settings:
            settings["tensorboard"] = training["tensorboard"]
    else:
        settings.update(exp.get("backbone_training", {}).get(backbone, {}))
    hp = loss_hp(spec, backbone)
    for layer in (spec, spec.get("per_backbone", {}).get(backbone, {})):
        settings.update(layer.get("training", {}))
        settings.update({key: layer[key] for key in ("lr", "batch_size") if key in layer})
    for key, value in overrides.items():
        if key.startswith("hp."):
            hp[key.removeprefix("hp.")] = value
        else:
            settings[key] = value
    if config.get("precision_override"):
        override_precision(settings, config["precision_override"])
    settings.update(loss=spec["loss"], loss_hp=hp)
    return settings


def settings_digest(settings: Mapping[str, Any]) -> str:
    """Short stable hash of a settings dict (for logs and rerun triggers)."""
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:12]


def _selected(value: Any, allowed: list | None) -> bool:
    """Whether ``value`` passes one ``select`` filter (null: everything)."""
    return allowed is None or value in allowed


def selected_cells(config: Mapping[str, Any], select: Mapping[str, Any] | None = None) -> Iterator[Cell]:
    """Every cell of the grid that ``select`` (default: the config's ``select:``) keeps, in config order:
    the one selection filter (:attr:`Grid.cells`; ``config.checks`` asks it before a grid exists)."""
    select = (config.get("select") or {}) if select is None else select
    for name, exp in config["experiments"].items():
        if not _selected(name, select.get("experiments")):
            continue
        seeds = [int(s) for s in exp.get("seeds") or config["seeds"] if _selected(s, select.get("seeds"))]
        for backbone in exp["backbones"]:
            if not _selected(backbone, select.get("backbones")):
                continue
            for method, (base, _) in _expansion(exp).items():
                chosen = select.get("methods")
                named = _selected(method, chosen) or _selected(base, chosen)
                if named and _selected(backbone, exp["methods"][base].get("backbones")):
                    yield from (Cell(name, backbone, method, seed) for seed in seeds)


@dataclass(frozen=True, eq=False)
class Experiment:
    """What the config says of one experiment, asked by name (:meth:`Grid.experiment`): its track, seeds,
    dataset, search, sweep points, image evaluation, stand-ins and cells. A name the config does not
    have gives an empty view (``configured`` false, no cells, the top-level seeds). Built on a
    validated config (a job's script, which holds the config but no grid, builds it the same way)."""

    name: str
    #: the validated config the view reads (the grid's own copy; a job's ``snakemake.config``)
    _config: Mapping[str, Any] = field(repr=False)

    @property
    def spec(self) -> Mapping[str, Any]:
        """The configured spec, as the config writes it (``{}`` for a name the config does not have)."""
        return self._config["experiments"].get(self.name) or {}

    def not_a_cell(self, backbone: str, method: str, seed: str | int) -> str:
        """One line saying why ``<experiment>/backbone/method/seed<seed>`` (a path asked for, e.g. a target)
        is not one of the selected cells, and which key to change to make it one."""
        experiment, spec = self.name, self.spec
        asked = {"experiment": experiment, "backbone": backbone, "method": method, "seed": seed}
        where = f"{cell_path(asked)} is not a cell of this config"
        if not self.configured:
            return (
                f"{where}: no experiment {experiment!r}; choose from {', '.join(self._config['experiments'])}"
            )
        if backbone not in spec["backbones"]:
            listed = ", ".join(spec["backbones"])
            fix = f"add it to experiments.{experiment}.backbones"
            return f"{where}: {backbone!r} is not one of its backbones ({listed}); {fix}"
        methods = _expansion(spec)
        if method not in methods:
            return f"{where}: {experiment} has no method {method!r}; choose from {', '.join(methods)}"
        base, _ = methods[method]
        only = spec["methods"][base].get("backbones")
        if only and backbone not in only:
            return (
                f"{where}: method {base!r} runs on {', '.join(only)} only; add {backbone} to "
                f"experiments.{experiment}.methods.{base}.backbones"
            )
        seeds = self.seeds or []
        if int(seed) not in seeds:
            key = f"experiments.{experiment}.seeds" if spec.get("seeds") else "seeds"
            now, wanted = ", ".join(map(str, seeds)), ", ".join(map(str, [*seeds, int(seed)]))
            return f"{where}: seed {seed} is not one of its seeds ({now}); set {key}: [{wanted}]"
        select = dict(self._config.get("select") or {})
        return f"{where}: the config's select leaves it out ({select}); widen select"

    @property
    def configured(self) -> bool:
        """Whether the config has this experiment (whatever ``select:`` keeps)."""
        return self.name in self._config["experiments"]

    @property
    def has_study(self) -> bool:
        """Whether the config has a study of this name: this experiment, or a top-level study block of
        that name (``oar_synthetic``)."""
        return self.configured or self._config.get(self.name) is not None

    @property
    def track(self) -> str:
        """``sentence`` or ``vision``: which trainer and evaluator the experiment's cells use."""
        return self.spec.get("track") or "sentence"

    @property
    def seeds(self) -> list[int] | None:
        """Its own ``seeds``, else the top-level ones (None: the config has none)."""
        seeds = self.spec.get("seeds") or self._config.get("seeds")
        return [int(s) for s in seeds] if seeds is not None else None

    @property
    def dataset(self) -> str | None:
        """The image dataset a vision experiment trains on (None for a sentence experiment)."""
        return self.spec.get("dataset")

    @functools.cached_property
    def search(self) -> Mapping[str, Any] | None:
        """The ``search`` section with its defaults filled (None without one), read once
        (:func:`contrastlab.config.searches.search_spec`, whose one-line errors it raises)."""
        return search_spec(self._config, self.name)

    @functools.cached_property
    def sweep_points(self) -> dict[str, tuple[str, float]]:
        """The sweep points (:func:`sweep_points`; ``{}`` for a name not configured)."""
        return sweep_points(self.spec) if self.configured else {}

    def is_sweep_point(self, method: str) -> bool:
        """Whether ``method`` is a point of the ``sweep`` rather than a configured method."""
        return method not in self.spec["methods"] and method in _expansion(self.spec)

    def method_has_backbone(self, method: str, backbone: str) -> bool:
        """Whether configured ``method`` trains on ``backbone`` (its ``backbones``)."""
        return _selected(backbone, self.spec["methods"][method].get("backbones"))

    def explicit_hp(self, method: str, backbone: str) -> dict[str, Any]:
        """The loss hyperparameters the config states for ``method`` (a sweep point: its configured
        method) on ``backbone``: its ``hp`` and ``per_backbone[backbone].hp``; the rest of a cell's
        ``loss_hp`` are the loss's catalog defaults."""
        return _stated_hp(self.spec["methods"][_resolve_method(self.spec, method)[0]], backbone)

    @functools.cached_property
    def vision_evaluation(self) -> dict[str, Any]:
        """The evaluation settings of a vision experiment's cells: the top-level ``vision_evaluation``
        with the experiment's own merged over it."""
        own = self.spec.get("vision_evaluation") or {}
        return deep_merge(self._config.get("vision_evaluation") or {}, own)

    @property
    def stand_ins(self) -> dict[str, str]:
        """``tables.verdict_stand_ins[name]``: toy backbone -> the paper backbone whose published numbers
        and claims it stands in for (the demo only; a real run compares like with like)."""
        return dict(Options.of(self._config).verdict_stand_ins.get(self.name) or {})

    @functools.cached_property
    def ours_for(self) -> dict[str, str]:
        """:attr:`stand_ins` turned round: paper backbone -> the toy backbone whose cells stand for it."""
        return {paper: toy for toy, paper in self.stand_ins.items()}

    def ours(self, backbone: str) -> str:
        """The backbone whose cells stand for a paper's ``backbone``: itself where the experiment has it,
        else its toy stand-in (:attr:`ours_for`), else itself."""
        if backbone in (self.spec.get("backbones") or []):
            return backbone
        return self.ours_for.get(backbone, backbone)

    @functools.cached_property
    def cells(self) -> tuple[Cell, ...]:
        """Every configured cell of the experiment, whatever ``select:`` keeps."""
        return tuple(selected_cells(self._config, {"experiments": [self.name]}))


@dataclass(frozen=True)
class Options:
    """The config's run-wide switches, read once: what the rules, the plan and the report ask besides the
    experiments, the backbones, the data and the machines (:attr:`Grid.options`)."""

    #: the speed switch every cell's precision is replaced by (``precision_override``), or None
    precision_override: str | None
    #: whether the searches run with the default target (``searches.in_all``)
    searches_in_all: bool
    #: whether the tables take the metrics already present (``tables.partial``)
    tables_partial: bool
    #: ``tables.verdict_stand_ins`` as written (experiment -> {toy backbone: paper backbone}, an
    #: experiment the config does not have included), read-only
    verdict_stand_ins: Mapping[str, Mapping[str, str]]
    #: the SentEval ``evaluation`` section (``mode``, ``tasks``), read-only
    evaluation: Mapping[str, Any]
    #: the ``mteb`` section (``enabled``, ``experiments``), read-only
    mteb: Mapping[str, Any]
    #: the OAR synthetic study's block (``oar_synthetic``), or None
    oar_synthetic: Mapping[str, Any] | None
    #: whether the figures are drawn (``figures``; left out: yes)
    figures: bool
    #: the Weights & Biases project every cell logs to (``logging.wandb``), or None
    wandb_project: str | None
    #: whether the config names its results folder (``results_dir``: a validated config always does, the
    #: schema's default; a hand-made one may not, and nothing of it has run)
    names_results: bool

    @classmethod
    def of(cls, config: Mapping[str, Any]) -> Options:
        """The switches of ``config`` (a section it lacks: off, or empty)."""
        tables = config.get("tables") or {}
        return cls(
            precision_override=config.get("precision_override") or None,
            searches_in_all=bool((config.get("searches") or {}).get("in_all")),
            tables_partial=bool(tables.get("partial")),
            verdict_stand_ins=MappingProxyType(dict(tables.get("verdict_stand_ins") or {})),
            evaluation=MappingProxyType(dict(config.get("evaluation") or {})),
            mteb=MappingProxyType(dict(config.get("mteb") or {})),
            oar_synthetic=config.get("oar_synthetic"),
            figures=config.get("figures", True) is not False,
            wandb_project=(config.get("logging") or {}).get("wandb") or None,
            names_results=bool(config.get("results_dir")),
        )


@dataclass(frozen=True, eq=False)
class Grid:
    """The cells a config trains and each one's settings, resolved once: built where the workflow
    (``rules/common.smk``), the plan (:func:`contrastlab.cost.plan.plan_report`) and the report
    (:func:`contrastlab.report.build_report`) start, and handed to whatever needs cells.

    A cell's settings (all ``TrainSettings`` or ``VisionTrainSettings`` fields but the seed) are the
    flat dict these layers give, **later wins**:

    1. the global ``training`` (``vision_training`` for a vision experiment; the schema's defaults
       filled in);
    2. the experiment's ``training``;
    3. the experiment's ``backbone_training[backbone]`` (for a vision experiment: the backbone's
       ``vision`` spec: arch, stem, width, out_dim; and the experiment's dataset);
    4. the method's ``lr``, ``batch_size``, ``training`` and ``hp``;
    5. the method's ``per_backbone[backbone]`` (the same keys);
    6. the sweep point's values (``method`` may be a point of the experiment's ``sweep``,
       :func:`expanded_methods`);
    7. a top-level ``precision_override`` (the speed switch) replaces every cell's precision, sentence
       and image (:func:`override_precision`).

    ``loss_hp`` starts from the loss's paper defaults (:func:`loss_hp`). ``select:`` narrows
    :attr:`cells`, :attr:`experiments`, :attr:`pretrained` and :attr:`user_losses`; settings do not depend
    on it, so a cell outside the selection resolves too (the report's precision table lists them all).

    The grid keeps its own deep copy of the config and resolves every configured cell when it is built,
    so a grid never sees later changes to the config it was given. Below ``config/`` the grid is the
    only door to the config (its members answer what the rooms ask); ``grid.config`` is for ``config/``
    and the entry points.
    """

    config: Mapping[str, Any]
    #: the selected cells, in config order
    cells: tuple[Cell, ...] = field(init=False)
    #: the selected experiments' specs by name, in config order (read-only)
    experiments: Mapping[str, Mapping[str, Any]] = field(init=False)
    #: (experiment, method, backbone) -> (settings, their read-only view)
    _resolved: dict[tuple[str, str, str], tuple[dict, Mapping]] = field(init=False, repr=False)
    #: every configured experiment's spec by name, in config order, whatever ``select:`` keeps (read-only)
    every_experiment: Mapping[str, Mapping[str, Any]] = field(init=False)
    #: experiment name -> its view, built once (:meth:`experiment`)
    _views: dict[str, Experiment] = field(init=False, repr=False)

    #: Grids built in this process (the test of "one grid per workflow" reads it).
    built: ClassVar[int] = 0

    def __post_init__(self) -> None:
        type(self).built += 1
        config = copy.deepcopy(self.config)  # the grid's own: later changes to the caller's never reach it
        object.__setattr__(self, "config", config)
        chosen = (config.get("select") or {}).get("experiments")
        experiments = {k: v for k, v in config["experiments"].items() if _selected(k, chosen)}
        object.__setattr__(self, "cells", tuple(selected_cells(config)))
        object.__setattr__(self, "experiments", MappingProxyType(experiments))
        object.__setattr__(self, "_resolved", {})
        object.__setattr__(self, "every_experiment", MappingProxyType(dict(config["experiments"])))
        object.__setattr__(self, "_views", {})
        for cell in self.every_cell():  # every configured cell now, whatever select: keeps
            self._resolve(cell)

    @functools.cached_property
    def digest(self) -> str:
        """The SHA-256 of the grid's config as sorted JSON: equal configs (a job's process validates the
        same YAML again) give equal digests."""
        return hashlib.sha256(json.dumps(self.config, sort_keys=True, default=repr).encode()).hexdigest()

    @property
    def resolutions(self) -> int:
        """How many (experiment, method, backbone) this grid has resolved (each once: every configured
        cell's when it is built, a search point's configured method outside them when first asked)."""
        return len(self._resolved)

    # ------------------------------------------------------------------ what the rooms ask the config
    def experiment(self, name: str) -> Experiment:
        """What the config says of experiment ``name`` (:class:`Experiment`; an empty view for a name
        the config does not have), built once."""
        if name not in self._views:
            self._views[name] = Experiment(name, self.config)
        return self._views[name]

    def backbone(self, alias: str) -> Mapping[str, Any]:
        """The spec of backbone ``alias`` (``hf_id``, ``path``, ``random``, ``vision``, ...)."""
        return self.config["backbones"][alias]

    @functools.cached_property
    def results(self) -> Results:
        """The layout of the config's results folder (``results_dir``)."""
        return Results(self.config["results_dir"])

    @functools.cached_property
    def resources(self) -> Resources:
        """The layout of the folder backbones and data are materialised in (``resources_dir``)."""
        return Resources(self.config.get("resources_dir", "resources"))

    @functools.cached_property
    def compute(self) -> Mapping[str, Any]:
        """The config's ``resources`` section (GPUs, ``gpu_share``, ``gpu_model``, runtimes, memory),
        read-only."""
        return MappingProxyType(dict(self.config["resources"]))

    @functools.cached_property
    def data(self) -> DataConfig:
        """The config's ``data`` section and the questions about the data (:class:`DataConfig`: where
        they lie, what they are, the artifacts lock)."""
        return DataConfig(self.config)

    @functools.cached_property
    def options(self) -> Options:
        """The config's run-wide switches (:class:`Options`)."""
        return Options.of(self.config)

    def with_experiment(
        self, experiment: str, *, seeds: Iterable[int] | None = None, drop: Iterable[str] = ()
    ) -> Grid:
        """A grid of this config with ``experiment``'s ``seeds`` replaced (None: kept) and its keys
        ``drop`` removed (the report's control, :func:`contrastlab.report.control.control_grid`: the
        papers' runs as seeds, no best-of-sweep); this grid is left as it is."""
        config = copy.deepcopy(dict(self.config))
        spec = config["experiments"][experiment]
        if seeds is not None:
            spec["seeds"] = list(seeds)
        for key in drop:
            spec.pop(key, None)
        return Grid(config)

    def settings(self, cell: Cell | Any) -> Mapping[str, Any]:
        """The resolved settings of ``cell`` (a :class:`Cell`, or anything with its ``experiment``,
        ``backbone`` and ``method``, e.g. a search point: its configured method's), read-only; resolved
        on first use and kept. :meth:`settings_copy` gives a dict to change."""
        return self._resolve(cell)[1]

    def settings_copy(self, cell: Cell | Any) -> dict[str, Any]:
        """:meth:`settings` as a new dict the caller may change (nested values copied too)."""
        return copy.deepcopy(self._resolve(cell)[0])

    def _resolve(self, cell: Cell | Any) -> tuple[dict[str, Any], Mapping[str, Any]]:
        key = (cell.experiment, cell.method, cell.backbone)
        if key not in self._resolved:
            plain = _layered_settings(self.config, *key)
            view = MappingProxyType({**plain, "loss_hp": MappingProxyType(plain["loss_hp"])})
            self._resolved[key] = (plain, view)
        return self._resolved[key]

    def every_cell(self) -> Iterator[Cell]:
        """Every configured cell, whatever ``select:`` keeps (one experiment's:
        ``grid.experiment(name).cells``)."""
        return selected_cells(self.config, {})

    @functools.cached_property
    def pretrained(self) -> list[tuple[str, str]]:
        """(backbone, pooling) pairs whose unmodified model is evaluated for the "Pretrained" rows."""
        backbones = (self.config.get("select") or {}).get("backbones")
        pairs: dict[str, str] = {}
        for exp in self.experiments.values():
            pooling = exp.get("pretrained_pooling")
            if pooling is None:
                continue
            for backbone in exp["backbones"]:
                if _selected(backbone, backbones):
                    pairs.setdefault(backbone, pooling)
        return sorted(pairs.items())

    @functools.cached_property
    def user_losses(self) -> dict[str, tuple[str, dict[str, Any]]]:
        """Every method of the selected experiments whose loss comes from the user's code (losses.user):
        method name -> (loss, hyperparameters as configured), the first experiment naming it deciding."""
        found: dict[str, tuple[str, dict[str, Any]]] = {}
        for exp in self.experiments.values():
            for method, spec in exp["methods"].items():
                if spec["loss"] not in LOSS_MODULES and is_user_loss(spec["loss"]):
                    found.setdefault(method, (spec["loss"], dict(spec.get("hp") or {})))
        return found
