"""Experiment templates: ``protocols``, ``methods`` and ``baselines`` of an experiment expanded into its
protocol methods before validation of the grid.
"""

from __future__ import annotations

import copy

from contrastlab.config.schema import ConfigError, deep_merge
from contrastlab.papers import TABLES

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
                "methods and baselines (docs/own-loss.md)"
            )
        return config
    templates = config.setdefault("templates", {})
    for name, template in found.items():
        where = f"experiments.{name}"
        if unknown := sorted(set(template) - set(TEMPLATE_KEYS)):
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
    # a typo would drop its overrides silently; a paper's experiment that this config leaves out is no typo
    known = dict.fromkeys([*experiments, *(t.experiment for t in TABLES.values())])
    for method, spec in shared.items():
        if unknown := sorted(set(spec.get("per_protocol") or {}) - set(known)):
            raise ConfigError(
                f"config key methods.{method}.per_protocol.{unknown[0]}: unknown experiment; choose from "
                f"{', '.join(known)}"
            )
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
