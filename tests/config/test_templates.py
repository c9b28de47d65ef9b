"""Experiment templates: a new loss under several papers' protocols, sharing the papers' baseline cells."""

from __future__ import annotations

import copy

import pytest
import yaml

from contrastlab import config as cl_config
from contrastlab.paths import REPO_ROOT
from tests.config.test_refused_at_validation import refused

LOSS = "examples/margin_infonce.py:margin_infonce"


@pytest.fixture
def demo(monkeypatch):
    monkeypatch.chdir(REPO_ROOT)  # the example's file path is relative to where the workflow runs
    config = yaml.safe_load((REPO_ROOT / "config" / "demo.yaml").read_text())
    for experiment in config["experiments"].values():
        experiment.pop("seeds", None)  # one seed everywhere (the demo's vision studies run two)
    config["methods"] = {
        "margin_nce": {
            "loss": LOSS,
            "hp": {"tau": 0.05, "m": 0.1},
            "per_protocol": {"macl_cifar10": {"hp": {"tau": 0.1}}, "oar_cifar10": {"hp": {"tau": 1.0}}},
        }
    }
    config["experiments"]["mine"] = {
        "protocols": ["nie2023", "li2024", "macl_cifar10", "oar_cifar10"],
        "methods": ["margin_nce"],
        "baselines": ["cl", "mmhe", "ntxent", "infonce"],
    }
    return config


def paths(config):
    return [c.path for c in cl_config.Grid(config).cells]


def test_a_template_adds_its_methods_to_each_protocol_with_that_protocols_settings(demo):
    plain = cl_config.validate(
        {k: v for k, v in copy.deepcopy(demo).items() if k != "methods"}
        | {"experiments": {k: v for k, v in demo["experiments"].items() if k != "mine"}}
    )
    config = cl_config.validate(demo)
    assert "mine" not in config["experiments"] and config["templates"]["mine"]["protocols"][0] == "nie2023"
    new = [p for p in paths(config) if p not in paths(plain)]
    # every paper cell is still there, unchanged (shared); the new ones are the template's method under
    # each protocol's own backbones and sweep points (MACL's batch size, OAR's learning rates)
    assert set(paths(plain)) <= set(paths(config))
    assert new == [
        "nie2023/tiny-bert/margin_nce/seed42",
        "nie2023/minilm/margin_nce/seed42",
        "li2024/tiny-bert/margin_nce/seed42",
        "macl_cifar10/resnet18-w8/margin_nce-bs64/seed42",
        "oar_cifar10/resnet18-w8/margin_nce-lr0.01/seed42",
        "oar_cifar10/resnet18-w8/margin_nce-lr0.5/seed42",
    ]
    grid, paper = cl_config.Grid(config), cl_config.Grid(plain)
    li = grid.settings(cl_config.MethodOn("li2024", "tiny-bert", "margin_nce"))
    assert li["protocol"] == "li2024" and li["loss_hp"] == {"tau": 0.05, "m": 0.1}
    oar = grid.settings(cl_config.MethodOn("oar_cifar10", "resnet18-w8", "margin_nce-lr0.5"))
    assert oar["lr"] == 0.5 and oar["optimizer"] == "sgd" and oar["loss_hp"] == {"tau": 1.0, "m": 0.1}
    for shared in (("nie2023", "tiny-bert", "cl"), ("macl_cifar10", "resnet18-w8", "ntxent-bs64")):
        assert grid.settings(cl_config.MethodOn(*shared)) == paper.settings(cl_config.MethodOn(*shared))


def test_selecting_the_template_runs_only_its_methods_and_baselines(demo):
    demo["select"] = {"experiments": ["mine"]}
    config = cl_config.validate(demo)
    methods = {p.split("/")[2].split("-")[0] for p in paths(config)}
    assert methods == {"margin_nce", "cl", "mmhe", "ntxent", "infonce"}
    assert paths(cl_config.validate(config)) == paths(config)  # validating again changes nothing


@pytest.mark.parametrize(
    "change,expected",
    [
        ({"protocols": ["nie"]}, "experiments.mine.protocols: unknown experiment 'nie'"),
        ({"methods": ["mine_loss"]}, "experiments.mine.methods: unknown method 'mine_loss'"),
        ({"baselines": ["simcse"]}, "experiments.mine.baselines: 'simcse' is not a method"),
        ({"seeds": [1]}, "experiments.mine.seeds: unknown key in an experiment template"),
    ],
)
def test_template_errors_are_one_line(demo, change, expected):
    demo["experiments"]["mine"].update(change)
    assert refused(cl_config.validate, demo).startswith(f"config key {expected}")


def test_a_per_protocol_key_that_names_no_experiment_is_an_error(demo):
    """A typo in per_protocol would drop the override silently (MACL's cells at Nie's tau); a paper's
    experiment that the template leaves out, as a user narrowing the page's template does, is no typo."""
    narrowed = copy.deepcopy(demo)
    narrowed["experiments"]["mine"].update(protocols=["nie2023", "li2024"], baselines=["cl"])
    cl_config.validate(narrowed)
    per_protocol = demo["methods"]["margin_nce"]["per_protocol"]
    per_protocol["macl_cifar01"] = per_protocol.pop("macl_cifar10")
    assert refused(cl_config.validate, demo) == (
        "config key methods.margin_nce.per_protocol.macl_cifar01: unknown experiment; choose from nie2023, "
        "li2024, macl, nie2023_fig3, li2024_fig6_m, li2024_fig6_tau, li2024_fig6_r, li2024_conjectures, "
        "macl_cifar10, oar_cifar10, oar_cifar100"
    )
