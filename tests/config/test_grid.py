"""The vision track in the config: sweeps expand into cells, settings resolve per track, mistakes are
one-line errors (protocol.md section 3)."""

from __future__ import annotations

import copy
import re

import pytest

from contrastlab import config as cl_config
from contrastlab.artifacts import LOCK_NAME
from contrastlab.paths import REPO_ROOT
from tests.config.test_refused_at_validation import refused

BASE = {
    "seeds": [1],
    "backbones": {
        "r18": {"vision": {"arch": "resnet18", "width": 8}},
        "bert": {"hf_id": "bert-base-uncased"},
    },
    "vision_training": {"epochs": 7},
    "experiments": {
        "img": {
            "track": "vision",
            "dataset": "digits",
            "backbones": ["r18"],
            "training": {"lr": 0.002},
            "sweep": {"batch_size": [64, 512]},
            "methods": {"cl": {"loss": "infonce", "hp": {"tau": 0.1}}, "mp": {"loss": "mpt", "lr": 0.5}},
        },
        "txt": {"backbones": ["bert"], "methods": {"cl": {"loss": "infonce"}}},
    },
}


def make(**changes):
    config = copy.deepcopy(BASE)
    for path, value in changes.items():
        *parents, last = path.split(".")
        node = config
        for key in parents:
            node = node[key]
        node[last] = value
    return cl_config.validate(config)


def test_sweep_points_are_cells_with_their_settings():
    grid = cl_config.Grid(make())
    vision = [c for c in grid.cells if c.experiment == "img"]
    assert [c.method for c in vision] == ["cl-bs64", "cl-bs512", "mp-bs64", "mp-bs512"]
    settings = grid.settings(cl_config.MethodOn("img", "r18", "cl-bs512"))
    assert settings["batch_size"] == 512 and settings["lr"] == 0.002 and settings["epochs"] == 7
    encoder = (settings["arch"], settings["stem"], settings["width"], settings["dataset"])
    assert encoder == ("resnet18", "cifar", 8, "digits")
    assert settings["lr_reference_batch"] == 256 and settings["weight_decay"] == 1e-6  # MACL App. B.3
    assert settings["loss"] == "infonce" and settings["loss_hp"] == {"tau": 0.1}
    assert grid.settings(cl_config.MethodOn("img", "r18", "mp-bs64"))["lr"] == 0.5  # the method's own lr
    # The sentence experiment beside it resolves as before: sentence keys, no vision keys.
    text = grid.settings(cl_config.MethodOn("txt", "bert", "cl"))
    assert "max_length" in text and "arch" not in text and "epochs" in text and text["epochs"] == 1


def test_hp_sweep_and_method_labels():
    only_cl = {"cl": {"loss": "infonce"}}  # mpt has no tau (an error, tested below)
    config = make(**{"experiments.img.sweep": {"hp.tau": [0.05, 0.2]}, "experiments.img.methods": only_cl})
    grid = cl_config.Grid(config)
    assert [c.method for c in grid.cells if c.experiment == "img"][:2] == ["cl-tau0.05", "cl-tau0.2"]
    assert grid.settings(cl_config.MethodOn("img", "r18", "cl-tau0.2"))["loss_hp"]["tau"] == 0.2


def test_select_by_method_or_by_sweep_point():
    assert len(cl_config.Grid(make(select={"methods": ["cl"]})).cells) == 3  # 2 sweep points + txt/cl
    assert [c.method for c in cl_config.Grid(make(select={"methods": ["cl-bs512"]})).cells] == ["cl-bs512"]
    assert re.search(r"unknown method 'cl-bs65'.*cl-bs512", refused(make, select={"methods": ["cl-bs65"]}))


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"experiments.img.backbones": ["bert"]},
            r"experiments\.img\.backbones: 'bert' is not an image encoder",
        ),
        ({"experiments.txt.backbones": ["r18"]}, r"experiments\.txt\.backbones: 'r18' is not a text model"),
        ({"experiments.img.sweep": {"dropout": [0.1]}}, r"experiments\.img\.sweep\.dropout: not a sweepable"),
        ({"experiments.img.sweep": {"hp.q": [1]}}, r"loss 'infonce' has no hyperparameter 'q'"),
        ({"experiments.img.training": {"max_length": 32}}, r"experiments\.img\.training.*max_length"),
        ({"experiments.txt.training": {"head_dim": 32}}, r"experiments\.txt\.training.*head_dim"),
        ({"experiments.img.dataset": "mnist"}, r"experiments\.img\.dataset: 'mnist' is not one of"),
        ({"backbones.r18.vision": {"arch": "resnet34"}}, r"backbones\.r18"),
    ],
)
def test_mistakes_are_one_line_errors(changes, message):
    assert re.search(message, refused(make, **changes))


def test_a_vision_experiment_needs_its_dataset():
    config = copy.deepcopy(BASE)
    del config["experiments"]["img"]["dataset"]
    assert re.search(
        r"experiments\.img.*'dataset' is a required property", refused(cl_config.validate, config)
    )


def test_command_line_text_is_read_per_track():
    # Snakemake hands nested --config values over as text; a vision experiment's training block is read
    # with the vision keys' types, a sentence one's with the sentence keys'.
    img, txt = {"epochs": "3", "lr": "1e-3"}, {"max_length": "16"}
    vision = {"epochs": "5", "precision": "bf16"}
    config = make(
        **{"experiments.img.training": img, "experiments.txt.training": txt, "vision_training": vision}
    )
    assert config["experiments"]["img"]["training"] == {"epochs": 3, "lr": 0.001}
    assert config["experiments"]["txt"]["training"] == {"max_length": 16}
    assert config["vision_training"]["epochs"] == 5


def test_presets_validate():
    full = cl_config.Grid(cl_config.load(REPO_ROOT / "config.yaml"))
    macl = full.settings(cl_config.MethodOn("macl_cifar10", "resnet18-cifar", "macl-bs1024"))
    assert macl["loss_hp"] == {"tau0": 0.1, "alpha": 0.5, "a0": 0.0, "reweight": True}
    demo = cl_config.Grid(cl_config.load(REPO_ROOT / "config" / "demo.yaml"))
    # two seeds each: the seed-noise verdicts (tables.verdicts) have a noise estimate in the demo
    cells = [(c.method, c.seed) for c in demo.cells if c.experiment == "macl_cifar10"]
    assert cells == [("ntxent-bs64", 42), ("ntxent-bs64", 43), ("macl-bs64", 42), ("macl-bs64", 43)]


def test_a_grid_never_sees_later_changes_to_its_config():
    """A later change to the caller's config dict reaches neither the grid's settings nor its answers."""
    cfg = cl_config.load(REPO_ROOT / "config.yaml")
    grid = cl_config.Grid(cfg)
    cell = grid.cells[0]
    seeds = grid.experiment(cell.experiment).seeds
    cfg["precision_override"] = "bf16"
    cfg["results_dir"] = "elsewhere"
    cfg["experiments"][cell.experiment]["seeds"] = [7]
    assert grid.settings(cell)["precision"] == "fp32"
    assert grid.options.precision_override is None
    assert grid.results.root == "results" and grid.experiment(cell.experiment).seeds == seeds != [7]
    assert cl_config.Grid(cfg).settings(cell)["precision"] == "bf16"  # a grid of its own sees it


def test_the_grid_answers_what_the_rooms_ask():
    config = make(**{"experiments.txt.seeds": [3, 4]})
    grid = cl_config.Grid(config)
    img, txt = grid.experiment("img"), grid.experiment("txt")
    assert grid.experiment("img") is img  # one view per experiment, built once
    assert (img.track, txt.track) == ("vision", "sentence")
    assert (img.seeds, txt.seeds) == ([1], [3, 4])
    assert (img.dataset, txt.dataset) == ("digits", None)
    assert txt.search is None and grid.results.root == "results"
    assert grid.results.budget_pins == "results/search/budget_pins.json"
    assert grid.resources.backbone_dir("r18") == "resources/models/r18"
    assert grid.compute == config["resources"] and grid.backbone("r18")["vision"]["width"] == 8
    assert img.is_sweep_point("cl-bs64") and not img.is_sweep_point("cl")
    assert img.sweep_points["mp-bs512"] == ("batch_size", 512.0) and txt.sweep_points == {}
    assert [c.path for c in txt.cells] == ["txt/bert/cl/seed3", "txt/bert/cl/seed4"]
    assert grid.options.tables_partial is False and grid.options.searches_in_all is False
    gone = grid.experiment("gone")  # a name the config does not have: an empty view
    assert (gone.configured, gone.spec, gone.cells, gone.sweep_points) == (False, {}, (), {})


def test_the_grid_answers_what_the_report_asks():
    """The stand-ins, whether a name is the config's study, whether it names a results folder, the lock."""
    stand_ins = {"img": {"r18": "resnet18-cifar"}, "macl": {"bert": "roberta-base"}}
    grid = cl_config.Grid(make(**{"tables": {"verdict_stand_ins": stand_ins}, "oar_synthetic": {}}))
    assert grid.experiment("img").stand_ins == {"r18": "resnet18-cifar"}
    assert grid.experiment("txt").stand_ins == {}
    assert [grid.experiment("img").ours(b) for b in ("resnet18-cifar", "r18", "vit")] == ["r18", "r18", "vit"]
    assert list(grid.options.verdict_stand_ins) == ["img", "macl"]  # as written, one not configured too
    assert grid.experiment("txt").has_study and grid.experiment("oar_synthetic").has_study
    assert not grid.experiment("macl").has_study
    assert grid.options.names_results and grid.data.lock_file == "artifacts.lock.json"
    bare = cl_config.Grid({"seeds": [1], "experiments": {}})  # hand-made: no results folder, no lock
    # the lock as the report names it: the schema's default name (its file is read as artifacts.LOCK_FILE)
    assert not bare.options.names_results and bare.data.lock_file == LOCK_NAME


def test_a_grid_with_one_experiment_changed_leaves_its_own_as_it_was():
    """:meth:`Grid.with_experiment` (the report's control): new seeds, a key dropped, a grid of its own."""
    grid = cl_config.Grid(make())
    control = grid.with_experiment("img", seeds=range(100, 103), drop=("sweep",))
    assert control.experiment("img").seeds == [100, 101, 102]
    assert "sweep" not in control.experiment("img").spec
    assert {c.method for c in control.cells if c.experiment == "img"} == {"cl", "mp"}
    assert grid.experiment("img").seeds == [1] and "sweep" in grid.experiment("img").spec
    assert grid.with_experiment("txt").experiment("txt").seeds == [1]  # seeds None: kept


def test_equal_sweep_values_of_other_types_name_their_own_points_and_callers_get_their_own_copy():
    """1, 1.0 and True name different points, and a caller that changes its answer changes no other's."""
    from contrastlab.config.grid import expanded_methods

    def names(value):
        return list(expanded_methods({"methods": {"cl": {}}, "sweep": {"hp.m": [value]}}))

    assert names(1) == ["cl-m1"] and names(1.0) == ["cl-m1.0"] and names(True) == ["cl-mTrue"]
    spec = {"methods": {"cl": {}}, "sweep": {"batch_size": [64]}}
    mine = expanded_methods(spec)
    mine["cl-bs64"][1]["batch_size"] = 128
    assert expanded_methods(spec) == {"cl-bs64": ("cl", {"batch_size": 64})}
    # an unhashable value is expanded as before, without the memo
    assert list(expanded_methods({"methods": {"cl": {}}, "sweep": {"x": [[1, 2]]}})) == ["cl-x[1, 2]"]
