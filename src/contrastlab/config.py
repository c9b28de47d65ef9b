"""The experiment configuration: validation against the JSON Schema, defaults, and the grid of cells.

A *cell* is one (experiment, backbone, method, seed): one training job and one evaluation job.
``config.yaml`` states each paper's grid as data (see ``schemas/config.schema.yaml``); this module
expands it, so the Snakefile and the tables read the same resolution of every cell's settings:

    defaults (schema) <- ``training:`` <- experiment ``training:`` <- experiment ``backbone_training[b]``
    <- method (``lr``, ``batch_size``, ``training:``) <- method ``per_backbone[b]``

Nothing here imports torch, so the workflow parses fast.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from contrastlab.paths import REPO_ROOT

SCHEMA_PATH = REPO_ROOT / "schemas" / "config.schema.yaml"


class ConfigError(ValueError):
    """A config value is wrong; the message is one line naming the key and the fix."""


@dataclass(frozen=True)
class Cell:
    """One point of the grid: trained once and evaluated once."""

    experiment: str
    backbone: str
    method: str
    seed: int

    @property
    def path(self) -> str:
        return f"{self.experiment}/{self.backbone}/{self.method}/seed{self.seed}"


def load_schema() -> dict:
    with open(SCHEMA_PATH) as handle:
        return yaml.safe_load(handle)


def _key_path(parts: Any) -> str:
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "<top level>"


def _fill_defaults(value: Any, schema: Mapping[str, Any]) -> Any:
    """Insert schema ``default``s for missing object keys, recursively (also into additionalProperties)."""
    if isinstance(value, dict):
        for key, sub in schema.get("properties", {}).items():
            if key not in value and "default" in sub:
                value[key] = copy.deepcopy(sub["default"])
            if key in value:
                value[key] = _fill_defaults(value[key], sub)
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for key in value:
                if key not in schema.get("properties", {}):
                    value[key] = _fill_defaults(value[key], extra)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [_fill_defaults(item, schema["items"]) for item in value]
    return value


_SCALAR_TYPES = {"integer": int, "number": (int, float), "boolean": bool, "null": type(None)}


def _coerce_text(text: str, types: list[str]) -> Any:
    """``text`` as the first scalar type of ``types`` it parses to (YAML 1.2 rules), else unchanged."""
    try:
        parsed = yaml.safe_load(text)
    except yaml.YAMLError:
        parsed = text
    if isinstance(parsed, str):  # YAML 1.1 reads 3e-5 (no dot) as a string; Python reads it as a float
        try:
            parsed = float(text)
        except ValueError:
            return text
    for kind in types:
        wanted = _SCALAR_TYPES.get(kind)
        if wanted is None or (isinstance(parsed, bool) and kind != "boolean"):
            continue
        if isinstance(parsed, wanted):
            return float(parsed) if kind == "number" and not isinstance(parsed, int) else parsed
        if kind == "integer" and isinstance(parsed, float) and parsed.is_integer() and "." not in text:
            return int(parsed)  # 1e3 written for an integer
    return text


def _with_branch(schema: Mapping[str, Any], value: Mapping[str, Any]) -> dict:
    """``schema`` with the ``then`` or ``else`` branch its ``if`` selects for ``value`` merged into its
    properties (an experiment's ``training`` block is read per its ``track``)."""
    import jsonschema

    selected = jsonschema.Draft202012Validator(schema["if"]).is_valid(value)
    branch = schema["then"] if selected else schema.get("else")
    merged = dict(schema)
    merged["properties"] = {**schema.get("properties", {}), **((branch or {}).get("properties") or {})}
    return merged


def coerce_scalars(value: Any, schema: Mapping[str, Any], root: Mapping[str, Any]) -> Any:
    """Convert strings to the number/boolean/null types the schema expects, recursively.

    Snakemake hands nested ``--config`` values over as text (``training={batch_size: 32}`` gives
    ``"32"``), and YAML 1.1 reads ``lr: 3e-5`` as a string; both must mean what they mean in a config
    file. Keys whose schema allows a string are left alone, and text that is not a valid number or
    boolean stays text, so the schema check still names it.
    """
    if "$ref" in schema:
        schema = root["$defs"][schema["$ref"].rsplit("/", 1)[-1]]
    if "if" in schema and isinstance(value, dict):
        schema = _with_branch(schema, value)
    if isinstance(value, str):
        types = schema.get("type", [])
        types = [types] if isinstance(types, str) else list(types)
        if types and "string" not in types:
            return _coerce_text(value, types)
        if "null" in types and value.strip() in ("null", "~", "None"):  # `data={senteval_dir: null}`
            return None
        return value
    if isinstance(value, dict):
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        for key, sub in value.items():
            sub_schema = props.get(key, extra if isinstance(extra, dict) else None)
            if sub_schema is not None:
                value[key] = coerce_scalars(sub, sub_schema, root)
        return value
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [coerce_scalars(item, schema["items"], root) for item in value]
    return value


def validate(config: Mapping[str, Any]) -> dict:
    """Validate ``config`` against the schema and the cross-references; return it with defaults filled.

    Raises ``ConfigError`` with a one-line message for the first problem found.
    """
    import jsonschema

    schema = load_schema()
    config = expand_templates(copy.deepcopy(dict(config)))
    config = coerce_scalars(config, schema, schema)
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(config), key=lambda e: (len(e.path), list(map(str, e.path))))
    if errors:
        error = errors[0]
        path = list(error.absolute_path)
        message = error.message
        if error.validator == "additionalProperties" and isinstance(error.instance, dict):
            allowed = sorted(error.schema.get("properties", {}))
            path.append(sorted(set(error.instance) - set(allowed))[0])
            message = f"unknown key (typo?); allowed here: {', '.join(allowed)}"
        raise ConfigError(f"config key {_key_path(path)}: {message}")
    config = _fill_defaults(config, schema)
    # Only the global training block gets the defaults: overrides lower down must stay partial.
    config["training"] = _fill_defaults(config["training"], schema["$defs"]["training"])
    config["vision_training"] = _fill_defaults(config["vision_training"], schema["$defs"]["vision_training"])
    config["vision_evaluation"] = _fill_defaults(
        config["vision_evaluation"], schema["$defs"]["vision_evaluation"]
    )
    _check_references(config)
    _check_select(config)
    return config


TEMPLATE_KEYS = ("protocols", "methods", "baselines")


def expand_templates(config: dict) -> dict:
    """Experiment templates: ``experiments: {mine: {protocols: [nie2023, macl_cifar10], methods:
    [myloss], baselines: [cl, ntxent]}}`` with ``methods: {myloss: {loss: ..., hp: ...}}`` at the top.

    Each template method joins the method list of every protocol (one of the papers' experiments, so
    its cells get that protocol's backbones, batch sizes, sweeps, seeds and evaluation), with its
    ``per_protocol[<protocol>]`` overrides merged in; the baselines are the protocols' own methods,
    whose cells are those of the papers' experiments (shared, trained once). The template itself is
    recorded under ``templates`` and leaves ``experiments``; ``select: {experiments: [mine]}`` selects
    its protocols and, unless ``select.methods`` is given, only its methods and baselines, so a run
    trains only the template's cells. Raises :class:`ConfigError` (one line) for an unknown protocol,
    method or baseline. Returns ``config`` (changed in place); a config without templates is unchanged.
    """
    experiments = config.get("experiments")
    if not isinstance(experiments, dict):
        return config
    found = {k: v for k, v in experiments.items() if isinstance(v, dict) and "protocols" in v}
    shared = config.pop("methods", None) or {}
    if not found:
        if shared:
            raise ConfigError(
                "config key methods: no experiment template uses them; add an experiment with protocols, "
                "methods and baselines (README: Evaluate your own loss)"
            )
        return config
    templates = config.setdefault("templates", {})
    for name, template in found.items():
        where = f"experiments.{name}"
        unknown = sorted(set(template) - set(TEMPLATE_KEYS))
        if unknown:
            raise ConfigError(
                f"config key {where}.{unknown[0]}: unknown key in an experiment template; "
                f"allowed: {', '.join(TEMPLATE_KEYS)}"
            )
        lists = {key: template.get(key) or [] for key in TEMPLATE_KEYS}
        for key, values in lists.items():
            if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
                raise ConfigError(f"config key {where}.{key}: must be a list of names, got {values!r}")
        papers = [e for e in experiments if e not in found]
        for protocol in lists["protocols"]:
            if protocol not in papers:
                raise ConfigError(
                    f"config key {where}.protocols: unknown experiment {protocol!r}; "
                    f"choose from the configured experiments: {', '.join(papers)}"
                )
        if not lists["protocols"] or not lists["methods"]:
            raise ConfigError(f"config key {where}: a template needs protocols and methods")
        for method in lists["methods"]:
            if method not in shared:
                raise ConfigError(
                    f"config key {where}.methods: unknown method {method!r}; define it under the top-level "
                    f"methods ({', '.join(shared) or 'none defined'})"
                )
        for baseline in lists["baselines"]:
            if not any(baseline in (experiments[p].get("methods") or {}) for p in lists["protocols"]):
                raise ConfigError(
                    f"config key {where}.baselines: {baseline!r} is not a method of any of its protocols "
                    f"({', '.join(lists['protocols'])})"
                )
        for protocol in lists["protocols"]:
            methods = experiments[protocol].setdefault("methods", {})
            for method in lists["methods"]:
                spec = copy.deepcopy(shared[method])
                own = (spec.pop("per_protocol", None) or {}).get(protocol) or {}
                if method in methods and methods[method] != deep_merge(spec, own):
                    raise ConfigError(
                        f"config key {where}.methods: {method!r} is already a different method of "
                        f"{protocol}; rename one of them"
                    )
                methods[method] = deep_merge(spec, own)
        templates[name] = lists
        del experiments[name]
    select = config.get("select") or {}
    chosen = [e for e in select.get("experiments") or [] if e in templates]
    if chosen:
        names = [e for e in select["experiments"] if e not in templates]
        for name in chosen:
            names += [p for p in templates[name]["protocols"] if p not in names]
        select["experiments"] = names
        if not select.get("methods"):
            select["methods"] = list(
                dict.fromkeys(
                    m for name in chosen for key in ("methods", "baselines") for m in templates[name][key]
                )
            )
        config["select"] = select
    return config


def _check_select(config: Mapping[str, Any]) -> None:
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
        unknown = [v for v in select.get(key) or [] if v not in allowed]
        if unknown:
            where = "" if key == "experiments" else " of the selected experiments"
            raise ConfigError(
                f"config key select.{key}: unknown {key[:-1]} {unknown[0]!r}; "
                f"choose from the configured {key}{where}: {', '.join(map(str, allowed))}"
            )
    if any(select.get(key) for key in valid) and next(cells(config), None) is None:
        raise ConfigError(
            f"config key select: {dict((k, v) for k, v in select.items() if v)} selects no cell "
            "(no configured method runs on that combination); widen the selection"
        )


def _check_user_method(config: Mapping[str, Any], experiment: str, method: str, where: str) -> None:
    """A user loss (``module:callable``) is imported and run on a random batch now, with each backbone's
    hyperparameters, so a bad loss stops the workflow before any job starts (losses.user)."""
    from contrastlab.losses.checks import check_user_loss
    from contrastlab.losses.user import UserLossError

    exp = config["experiments"][experiment]
    loss = exp["methods"][method]["loss"]
    swept = {k.removeprefix("hp."): v for k, v in (exp.get("sweep") or {}).items() if k.startswith("hp.")}
    points = [dict(zip(swept, values, strict=True)) for values in itertools.product(*swept.values())]
    for backbone in exp["backbones"]:
        hp = dict(method_settings(config, experiment, method, backbone)["loss_hp"])
        for point in points or [{}]:
            try:
                check_user_loss(loss, {**hp, **point})
            except UserLossError as error:
                key = "hp" if "hyperparameter" in str(error) else "loss"
                raise ConfigError(f"config key {where}.{key}: {error}") from None


def _check_references(config: Mapping[str, Any]) -> None:
    from contrastlab.losses.catalog import DEFAULTS
    from contrastlab.losses.user import is_user_loss

    backbones = config["backbones"]
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
        training_keys = schema_defs["vision_training" if vision else "training"]["properties"]
        for key in experiment.get("sweep") or {}:
            known = key in training_keys or key.startswith("hp.")
            if not known or key in ("precision", "protocol"):
                raise ConfigError(
                    f"config key experiments.{name}.sweep.{key}: not a sweepable setting; use a training "
                    f"key ({', '.join(k for k in training_keys if k not in ('precision', 'protocol'))}) "
                    "or hp.<hyperparameter>"
                )
        for method in experiment.get("spectra") or []:
            if method not in experiment["methods"] and method not in expanded_methods(experiment):
                raise ConfigError(
                    f"config key experiments.{name}.spectra: unknown method {method!r}; use a method or "
                    f"sweep point of this experiment ({', '.join(expanded_methods(experiment))})"
                )
    for alias, spec in backbones.items():
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
        for key in experiment.get("backbone_training", {}):
            if key not in experiment["backbones"]:
                where = f"experiments.{name}.backbone_training.{key}"
                raise ConfigError(f"config key {where}: not in this experiment's backbones")
        for method, spec in experiment["methods"].items():
            where = f"experiments.{name}.methods.{method}"
            user_loss = spec["loss"] not in DEFAULTS and is_user_loss(spec["loss"])
            if not user_loss and spec["loss"] not in DEFAULTS:
                choices = ", ".join(DEFAULTS)
                raise ConfigError(
                    f"config key {where}.loss: unknown loss {spec['loss']!r}; choose one of {choices}"
                )
            for backbone in list(spec.get("per_backbone", {})) + list(spec.get("backbones") or []):
                if backbone not in experiment["backbones"]:
                    raise ConfigError(
                        f"config key {where}.per_backbone.{backbone}: not in this experiment's backbones"
                    )
            if user_loss:
                _check_user_method(config, name, method, where)
                continue
            for backbone in experiment["backbones"]:
                hp = dict(method_settings(config, name, method, backbone)["loss_hp"])
                swept = experiment.get("sweep") or {}
                hp.update({k.removeprefix("hp."): v for k, v in swept.items() if k.startswith("hp.")})
                unknown = sorted(set(hp) - set(DEFAULTS[spec["loss"]]))
                if unknown:
                    raise ConfigError(
                        f"config key {where}.hp: loss {spec['loss']!r} has no hyperparameter {unknown[0]!r}; "
                        f"it takes {', '.join(DEFAULTS[spec['loss']]) or 'none'}"
                    )


def load(path: str | Path, overrides: Mapping[str, Any] | None = None) -> dict:
    """Read a YAML config, apply ``overrides`` (deep-merged), and validate it."""
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"config file {path} does not exist; pass an existing YAML file")
    with open(path) as handle:
        config = yaml.safe_load(handle) or {}
    if overrides:
        config = deep_merge(config, overrides)
    return validate(config)


def deep_merge(base: Mapping[str, Any], update: Mapping[str, Any]) -> dict:
    """Merge ``update`` into a copy of ``base``; nested mappings merge, everything else replaces."""
    merged = copy.deepcopy(dict(base))
    for key, value in update.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


#: How a sweep axis appears in method names (batch_size 64 -> ``<method>-bs64``); other axes use their
#: key without ``hp.`` (``hp.m`` 0.1 -> ``<method>-m0.1``).
SWEEP_LABELS = {"batch_size": "bs"}


def track(config: Mapping[str, Any], experiment: str) -> str:
    """``sentence`` or ``vision``: which trainer and evaluator the experiment's cells use."""
    return config["experiments"][experiment].get("track") or "sentence"


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
    replaces every sentence cell's precision.
    """
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
    if config.get("precision_override") and not vision:
        settings["precision"] = config["precision_override"]
        # SimCSE's --fp16 cells put the head under amp; an override is our speed switch, not theirs.
        settings.pop("head_autocast", None)
    settings["loss"] = spec["loss"]
    settings["loss_hp"] = hp
    return settings


def vision_evaluation(config: Mapping[str, Any], experiment: str) -> dict:
    """The evaluation settings of a vision experiment's cells: the top-level ``vision_evaluation``
    with the experiment's own ``vision_evaluation`` merged over it."""
    own = config["experiments"][experiment].get("vision_evaluation") or {}
    return deep_merge(config.get("vision_evaluation") or {}, own)


#: Sentence experiments whose paper has a figure read from the training logs and metrics (Nie Fig. 1).
LOG_FIGURE_EXPERIMENTS = ("nie2023",)

#: Figures over a swept setting, from their own experiments (no tables): figure -> (experiments,
#: caption, what they read: the training logs' dev scores, or the evaluated metrics).
SWEEP_FIGURES = {
    "li2024/li2024_fig6": (
        ("li2024_fig6_m", "li2024_fig6_tau", "li2024_fig6_r"),
        "Li Fig. 6: STS-B dev Spearman of the baseline when one component varies (m of the GD indicator, "
        "τ of the weight, r of the ratio); the paper: performance falls as m grows, drops sharply once "
        "τ passes 0.3, and rises with r.",
        "logs",
    ),
    "nie2023/nie2023_fig3": (
        ("nie2023_fig3",),
        "Nie Fig. 3a: STS.Avg and TR.Avg of MPT against its margin m and against the distance gap d_ij "
        "the run ends at (probe of training sentences); the paper: STS is far more sensitive to the gap "
        "than TR, best at m = 0.23.",
        "metrics+logs",
    ),
    # Figures from the trainer's geometry records (training.analysis_every; figures.geometry_logs).
    "nie2023/nie2023_fig3b": (
        ("nie2023",),
        "Nie Fig. 3b: the distance gap d_ij (mean anchor-negative minus anchor-positive distance) across "
        "training per loss; the paper: it keeps growing under the decoupled forms, far beyond L_cl's.",
        "logs",
    ),
    "nie2023/nie2023_fig3cde": (
        ("nie2023_fig3",),
        "Nie Fig. 3c-e: train L_cl, ℓ_align and ℓ_uniform of MPT per margin m; the paper: at m = 0.23 L_cl "
        "and ℓ_uniform fall lowest, ℓ_align barely moves; m = 0.80 looks like DCL's overfitting curves.",
        "logs",
    ),
    "li2024/li2024_fig5": (
        ("li2024_conjectures",),
        "Li Fig. 5: density of anchor-negative (left) and anchor-positive (right) cosines on held-out "
        "sentences after training the baseline with and without GD; the paper: with GD the positive "
        "cosines lie closer to the negative ones.",
        "logs",
    ),
    "li2024/li2024_fig7": (
        ("li2024_conjectures",),
        "Li Fig. 7: the hardest negative's share of the update against τ before training and after the "
        "baseline; the paper: the backbone needs a tiny τ for the hardest negative to dominate, the "
        "trained model already at τ = 0.05.",
        "logs",
    ),
    "li2024/li2024_fig8a": (
        ("li2024_conjectures",),
        "Li Fig. 8a: density of the least ratio r meeting Lemma 1 (anchor nearer its positive after a "
        "step λ(r h'_i − h'_j)) before and after training the baseline; λ = 0.1, 0.3, 0.5 are ours (the "
        "paper's are not given); the paper: a ratio above 1 meets the condition more often.",
        "logs",
    ),
    "li2024/li2024_fig8b": (
        ("li2024_conjectures",),
        "Li Fig. 8b: the dynamic ratios of ArcCon, MET (and MAT) on the baseline's held-out batches across "
        "training; the paper: they stay above 1 throughout.",
        "logs",
    ),
    "li2024/li2024_fig8c": (
        ("li2024_fig6_r",),
        "Li Fig. 8c: mean anchor-positive cosine across training for each ratio r of the baseline; the "
        "paper: a larger r keeps anchor and positive closer.",
        "logs",
    ),
    "li2024/li2024_fig9": (
        ("li2024_conjectures",),
        "Li Fig. 9: estimated μ_pos, μ_neg, σ_pos, σ_neg of the angles across training of the baseline; "
        "the paper: within its simulation's ranges, σ near 0.05 and 0.10.",
        "logs",
    ),
}

#: Figures computed from the papers' formulas (no training): experiment -> {figure: caption}.
ANALYTIC_FIGURES = {
    "nie2023": {
        "nie2023_fig2a": "Nie Fig. 2a: norm of the alignment part of the gradient over the anchor-positive "
        "(θ_ii′) and anchor-negative (θ_ij′) angles, InfoNCE at 64-512 negatives, L_align and DCL; the "
        "paper: InfoNCE's gradient dissipates as the positive nears the negatives, L_align and DCL do "
        "not. Closed forms, checked against autograd of our losses.",
        "nie2023_fig2b": "Nie Fig. 2b: the same for DCL+, MPT, MET and MAT (64 negatives); the paper: the "
        "margin losses keep a dissipation band at a controlled distance gap.",
        "nie2023_fig4": "Nie Fig. 4 (App. B): the uniformity part (one negative's, the hardest for the hinge "
        "losses) of the same losses.",
    },
    "li2024": {
        "li2024_fig2": "Li Fig. 2: Monte-Carlo mean of the gradient-dissipation term of ArcCon and MET over "
        "μ_pos × μ_neg (1 positive + 127 negatives per batch); the paper: GD falls to 0 once the positive "
        "is closer than the negatives by a margin.",
        "li2024_fig10": "Li Fig. 10 (App. A.1): the same for InfoNCE and MPT; at μ_pos = μ_neg InfoNCE's "
        "term is 127/128 in closed form (tested).",
        "li2024_fig3": "Li Fig. 3 (simulated part): share of the weight taken by the hardest negative "
        "against μ_neg for several τ; the paper: small τ puts nearly all weight on one negative.",
        "li2024_fig4": "Li Fig. 4: the dynamic ratios of ArcCon, MET and MAT over μ_pos × μ_neg, grey where "
        "the pair does not occur in training (μ_pos > μ_neg, or the gradient has dissipated); the "
        "paper: where pairs occur the ratio is mostly between 1 and 2.",
    },
}


def figures(config: Mapping[str, Any]) -> list[dict[str, str]]:
    """The figures a config produces, each ``{"name", "kind", "experiment", "caption"}`` (``name`` is
    the path under ``<results>/figures`` without extension): per selected vision experiment with an
    ``lr`` sweep evaluated by the FFN, its ``lr_sweep`` (OAR Fig. 2/4); with ``spectra``, its
    ``spectra`` (OAR Fig. 3); with a top-level ``oar_synthetic`` block, the synthetic study (OAR
    Table 2); for Nie's experiment, alignment/uniformity and the training curves (Nie Fig. 1); for
    Nie's and Li's experiments, their analytic and simulated figures (:data:`ANALYTIC_FIGURES`)."""
    select = config.get("select") or {}
    out = []
    if config.get("oar_synthetic") is not None and (
        not select.get("experiments") or any(e.startswith("oar") for e in select["experiments"])
    ):
        out.append(
            {
                "name": "oar_synthetic/table2",
                "kind": "oar_synthetic",
                "experiment": "",
                "caption": "OAR Table 2 (synthetic): three noisy rank-1 clusters in 3-D embedded by a "
                "3-layer MLP trained with each loss, without and with OAR; the paper: InfoNCE fuses "
                "the clusters onto one line, OAR keeps them apart. Ours, in part: over 20 seeds InfoNCE "
                "flattens to a plane in 14 (never a line), OAR-InfoNCE keeps 3 directions in all 20.",
            }
        )
    for figure_name, (experiments, caption, _) in SWEEP_FIGURES.items():
        present = [e for e in experiments if e in config["experiments"]]
        if present and (not select.get("experiments") or set(present) & set(select["experiments"])):
            out.append({"name": figure_name, "kind": "sweep", "experiment": "", "caption": caption})
    for name, exp in config["experiments"].items():
        if select.get("experiments") and name not in select["experiments"]:
            continue
        for figure_name, caption in ANALYTIC_FIGURES.get(name, {}).items():
            out.append(
                {"name": f"{name}/{figure_name}", "kind": "analytic", "experiment": name, "caption": caption}
            )
        if name in LOG_FIGURE_EXPERIMENTS:
            out += [
                {
                    "name": f"{name}/align_uniform",
                    "kind": "align_uniform",
                    "experiment": name,
                    "caption": "Nie Fig. 1a: ℓ_align against ℓ_uniform on STS-B dev of every checkpoint, "
                    "coloured by STS.Avg; the paper: the positions do not show the gap between L_cl and "
                    "its decoupled forms.",
                },
                {
                    "name": f"{name}/training_curves",
                    "kind": "training_curves",
                    "experiment": name,
                    "caption": "Nie Fig. 1b-d (in part): training loss and dev ℓ_align, ℓ_uniform and STS-B "
                    "Spearman over training per loss, from the trainer's logs (the train-set ℓ_uniform "
                    "and dev loss the paper also plots are not logged yet).",
                },
            ]
        probes = (
            vision_evaluation(config, name).get("probes") or [] if track(config, name) == "vision" else []
        )
        if "lr" in (exp.get("sweep") or {}) and "ffn" in probes:
            out.append(
                {
                    "name": f"{name}/lr_sweep",
                    "kind": "lr_sweep",
                    "experiment": name,
                    "caption": "OAR Fig. 2 and 4: FFN top-1 at each label fraction and the total variance "
                    "of the embeddings across the learning rates, each loss without (solid) and with "
                    "(dotted) OAR; the paper: without OAR accuracy and variance collapse at large rates "
                    "(InfoNCE to ~10% at lr 1), with OAR accuracy keeps rising. A cross on a panel's "
                    "bottom edge: the FFN diverged at that rate (no accuracy, not a collapse)."
                    + _anchor_reach_note(config, name),
                }
            )
        if exp.get("search") and (config.get("searches") or {}).get("in_all"):
            out.append(
                {
                    "name": f"{name}/search",
                    "kind": "search",
                    "experiment": name,
                    "caption": "The hyperparameter search (contrastlab.search): STS-B dev Spearman of every "
                    "point, one panel per backbone, method and stage; white box: the selected point, black "
                    "circle: the published setting (Nie Table 2, Li Tables 6-7) where it lies on the grid. "
                    "The selected settings beside the published ones: the search table.",
                }
            )
        if exp.get("spectra"):
            out.append(
                {
                    "name": f"{name}/spectra",
                    "kind": "spectra",
                    "experiment": name,
                    "caption": "OAR Fig. 3: normalised singular values and cosine affinity of 1000 test "
                    f"embeddings ({', '.join(exp['spectra'])}); the paper: OAR gives class-block "
                    "structure and a higher effective rank (95% energy)." + _anchor_reach_note(config, name),
                }
            )
    return out + paradigm_figures(config)


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


def paradigm_figures(config: Mapping[str, Any]) -> list[dict[str, str]]:
    """Li et al.'s gradient paradigm (GD, W, R by autograd) of every user loss: ``paradigm/<method>``."""
    return [
        {
            "name": f"paradigm/{method}",
            "kind": "paradigm",
            "experiment": "",
            "caption": f"Where {method} ({loss}) sits in Li et al.'s unified gradient paradigm, computed by "
            "autograd on synthetic batches over the mean anchor-positive and anchor-negative angles: GD "
            "(the push from the negatives, as a share of its largest; Li Fig. 2), the hardest negative's "
            "share of the weights W (Li Fig. 3) and the ratio R of pull to push (Li Fig. 4).",
        }
        for method, (loss, _) in user_loss_methods(config).items()
    ]


def _anchor_reach_note(config: Mapping[str, Any], experiment: str) -> str:
    """A caption sentence for OAR experiments whose loss sees a ResNet's pooled output directly (no
    projection head, no final linear layer): that output is non-negative after ReLU, so a random
    orthonormal anchor is reachable only up to cosine sqrt(1/2) in expectation (the norm of its
    positive part); empty otherwise."""
    exp = config["experiments"][experiment]
    first = next((c for c in cells(config) if c.experiment == experiment), None)
    if first is None:
        return ""
    settings = method_settings(config, experiment, first.method, first.backbone)
    linear_out = any(
        (config["backbones"][b].get("vision") or {}).get("out_dim") for b in exp.get("backbones") or []
    )
    if settings.get("projection_head", True) or linear_out:
        return ""
    return (
        " Without a projection head (as the paper) the embeddings are the encoder's pooled ReLU outputs, "
        "non-negative, so the cosine to an OAR anchor can reach only about 0.71 (sqrt 1/2), not 1."
    )


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
