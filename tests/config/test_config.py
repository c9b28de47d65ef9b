"""Config validation: every key documented, bad values stop with one line naming the key."""

from __future__ import annotations

import collections

import pytest
import yaml
from test_papers import FOUR_PAPERS

from contrastlab import config as cl_config
from contrastlab.papers import paper_of
from contrastlab.paths import Results
from tests.config.test_refused_at_validation import refused


def _walk_properties(schema, path=""):
    for key, sub in schema.get("properties", {}).items():
        yield f"{path}.{key}".lstrip("."), sub
        yield from _walk_properties(sub, f"{path}.{key}")
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict):
        yield from _walk_properties(extra, f"{path}.*")


def test_every_schema_key_has_type_and_description():
    schema = cl_config.load_schema()
    roots = [("", schema)] + [(f"$defs.{k}", v) for k, v in schema["$defs"].items()]
    seen = 0
    for prefix, root in roots:
        for key, sub in _walk_properties(root, prefix):
            seen += 1
            assert "description" in sub, f"{key} has no description"
            assert "type" in sub or "$ref" in sub, f"{key} has no type"
    assert seen > 60


def test_every_optional_key_has_a_default():
    schema = cl_config.load_schema()
    # Keys without a default: required ones; a backbone's mutually exclusive sources; a vision
    # experiment's dataset; method-level overrides (absent: inherit); an experiment template's protocols;
    # a search's keys (config.searches.search_spec fills them); MTEB's further tasks (absent: the seven
    # STS tasks). The rest are opt-in settings whose absence means the trainer's own default (or off, or
    # drawn), so the params of earlier configs' cells stay as they were and nothing reruns.
    no_default = set(
        """loss backbones experiments methods hf_id package path random tokenizer_from vision arch dataset
        lr batch_size hp training protocols momentum lr_schedule projection_head input_size oar_fraction
        oar_weight oar_batch_size out_dim spectra vision_evaluation blur_p blur_sigma blur_kernel
        analysis_every analysis_sentences analysis_batch analysis_holdout state_minutes head_autocast
        val_fraction keep tensorboard figures logging wandb dev_batch_size static_shapes cuda_graph compile
        deterministic padding_free augment_calls cudnn_benchmark seed stages per_method budget_gpu_hours
        tasks benchmark""".split()
    )
    defs = schema["$defs"]
    roots = [("", schema), ("$defs.training", defs["training"]), ("$defs.vision", defs["vision_training"])]
    for prefix, root in roots:
        for key, sub in _walk_properties(root, prefix):
            name = key.rsplit(".", 1)[-1]
            if name not in no_default:
                assert "default" in sub, f"{key} has no default"


def test_defaults_are_filled(repo_root):
    config = cl_config.load(repo_root / "config" / "demo.yaml")
    assert config["evaluation"]["tasks"][0] == "STS12"
    assert config["training"]["max_length"] == 32
    assert config["resources_dir"] == "resources"  # shared: downloads, backbones, caches


BAD = [
    ({"seeds": "42"}, "config key seeds: '42' is not of type 'array'"),
    ({"training": {"lr": -1}}, "config key training.lr: -1 is less than or equal to the minimum of 0"),
    ({"backbones": {"bert-base": {"params_millions": 0}}}, "config key backbones.bert-base.params_millions"),
    ({"trainig": {}}, "config key trainig: unknown key (typo?)"),
    ({"evaluation": {"mode": "quick"}}, "config key evaluation.mode: 'quick' is not one of"),
    (
        {"experiments": {"nie2023": {"methods": {"cl": {"loss": "infonse"}}}}},
        "config key experiments.nie2023.methods.cl.loss: unknown loss 'infonse'; choose one of infonce",
    ),
    (
        {"experiments": {"nie2023": {"backbones": ["gpt2"]}}},
        "config key experiments.nie2023.backbones: unknown backbone 'gpt2'",
    ),
    (
        {"experiments": {"nie2023": {"methods": {"cl": {"hp": {"temperature": 0.1}}}}}},
        "config key experiments.nie2023.methods.cl.hp: loss 'infonce' has no hyperparameter 'temperature'",
    ),
    (
        {"training": {"batch_size": "sixty-four"}},
        "config key training.batch_size: 'sixty-four' is not of type",
    ),
    (
        {"backbones": {"bert-base": {"hf_id": 3}}},
        "config key backbones.bert-base.hf_id: 3 is not of type 'string'",
    ),
    (  # a bound on one item of a list, stated in the schema (the settings class reads the same bound)
        {"vision_training": {"jitter": [0.4, 0.4, 0.4, 0.6]}},
        "config key vision_training.jitter[3]: 0.6 is greater than the maximum of 0.5",
    ),
    # a value of the wrong type is told how a config writes the type its key takes (jsonschema names it)
    ({"seeds": 42}, "config key seeds: 42 is not of type 'array'; write seeds as a list: [a, b]"),
    (
        {"training": {"max_steps": "ten"}},
        "config key training.max_steps: 'ten' is not of type 'integer', 'null'; write training.max_steps as "
        "a whole number or null",
    ),
    (
        {"experiments": []},
        "config key experiments: [] is not of type 'object'; write experiments as a mapping",
    ),
    # a choice: the values as YAML writes them (null, not Python's None), then the fix
    (
        {"precision_override": "bf17"},
        "config key precision_override: 'bf17' is not one of fp32, tf32, bf16, fp16, auto, null; set "
        "precision_override to one of them",
    ),
    # the OAR synthetic study's block (SyntheticSettings' fields): checked now, not in its job
    ({"oar_synthetic": {"lrr": 0.1}}, "config key oar_synthetic.lrr: unknown key (typo?); allowed here:"),
    ({"oar_synthetic": {"sweep": [{"epochs": "ten"}]}}, "config key oar_synthetic.sweep[0].epochs: 'ten'"),
    ({"oar_synthetic": {"optimizer": "sgdm"}}, "config key oar_synthetic.optimizer: 'sgdm' is not one of"),
    # an empty list is no seeds, not the global ones (null is)
    ({"experiments": {"macl": {"seeds": []}}}, "config key experiments.macl.seeds: [] should be non-empty;"),
    # the OAR study's losses as a method's: a name that is no loss, a constant it does not take or out of
    # its bounds
    ({"oar_synthetic": {"losses": {"ntxnet": {}}}}, "config key oar_synthetic.losses.ntxnet: unknown loss"),
    (
        {"oar_synthetic": {"losses": {"ntxent": {"taux": 1}}}},
        "config key oar_synthetic.losses.ntxent: loss 'ntxent' has no hyperparameter 'taux'; it takes tau",
    ),
    ({"oar_synthetic": {"losses": {"ntxent": {"tau": 0}}}}, "config key oar_synthetic.losses.ntxent.tau: "),
]


#: A schema bound, a missing key, an empty list or mapping, a backbone of no form, a loss's bound: the line
#: ends naming the fix (the fuzz's mutations of these kinds stated only the constraint).
FIXES = [
    ({"seeds": [-1]}, "seeds[0]: -1 is less than the minimum of 0; set it to a value >= 0"),
    (
        {"training": {"lr": 0}},
        "training.lr: 0 is less than or equal to the minimum of 0; set it to a value > 0",
    ),
    (
        {"experiments": {"nie2023": {"backbones": []}}},
        "experiments.nie2023.backbones: [] should be non-empty; give it at least 1 value",
    ),
    (
        {"backbones": {"tiny": {"vision": {"width": 8}}}},
        "backbones.tiny.vision: 'arch' is a required property; add backbones.tiny.vision.arch: one of "
        "resnet18, resnet50",
    ),
    (
        {"backbones": {"tiny": {}}},
        "backbones.tiny: {} is not valid under any of the given schemas; give it hf_id, path, package, "
        "random and tokenizer_from, or vision",
    ),
    (
        {"experiments": {"nie2023": {"methods": {"cl": {"hp": {"tau": 0}}}}}},
        "experiments.nie2023.methods.cl.hp.tau: infonce: tau must be > 0, got 0; set it to a value > 0",
    ),
    (
        {"experiments": {"li2024": {"search": {"stages": [{"grid": {}}]}}}},
        "experiments.li2024.search.stages[0]: the stage has no axis; give it grid: {axis: [values]}",
    ),
    (
        {"experiments": {"nie2023": {"methods": {"cl": {"per_backbone": {"bert": {}}}}}}},
        "experiments.nie2023.methods.cl.per_backbone.bert: not in this experiment's backbones; use one of "
        "bert-base, bert-large, roberta-base, roberta-large",
    ),
]


@pytest.mark.parametrize(("override", "expected"), FIXES)
def test_a_bound_or_missing_key_is_told_the_fix(repo_root, override, expected):
    assert refused(cl_config.load, repo_root / "config.yaml", override) == f"config key {expected}"


@pytest.mark.parametrize(("override", "expected"), BAD)
def test_bad_config_gives_one_line_naming_the_key(repo_root, override, expected):
    message = refused(cl_config.load, repo_root / "config.yaml", override)
    assert message.startswith(expected), message


def test_a_loss_file_named_without_its_callable_is_told_the_form(repo_root):
    override = {"experiments": {"nie2023": {"methods": {"mine": {"loss": "examples/margin_infonce.py"}}}}}
    assert refused(cl_config.load, repo_root / "config.yaml", override).endswith(
        "; or your own loss: 'path/to/file.py:callable' or 'package.module:callable' (docs/own-loss.md)"
    )


def test_missing_config_file(tmp_path):
    assert "does not exist" in refused(cl_config.load, tmp_path / "nope.yaml")
    # a folder: was IsADirectoryError's traceback (make plan CONFIG=<a folder>)
    assert "is a folder; pass an existing YAML file" in refused(cl_config.load, tmp_path)
    (tmp_path / "mine.yaml").write_text("seeds: [42]\n")  # a partial preset: nothing is merged under it
    replaced = "property; a --configfile replaces config.yaml whole"
    assert replaced in refused(cl_config.load, tmp_path / "mine.yaml")


def test_full_grid_size(repo_root):
    config = cl_config.load(repo_root / "config.yaml")
    by_experiment = collections.Counter(c.experiment for c in cl_config.Grid(config).cells)
    # Nie: 7 losses x 4 backbones x 3 seeds; MACL: 2 x 2 x 3;
    # Li: 12 losses x 2 backbones + 7 Table-5 steps on BERT-base only, x 3 seeds;
    # MACL CIFAR-10 (Table 9): 5 losses x 5 batch sizes x 3 seeds; OAR: 8 methods x 8 learning rates
    # (CIFAR-10, Table 3 and Fig. 2) and 8 methods (CIFAR-100, Table 4), one seed.
    expected = {
        "nie2023": 84,
        "li2024": (12 * 2 + 7) * 3,
        "macl": 12,
        "macl_cifar10": 75,
        "oar_cifar10": 64,
        "oar_cifar100": 8,
        "nie2023_fig3": 8,  # the figure sweeps, one seed each as the papers' scripts
        "li2024_fig6_m": 8,
        "li2024_fig6_tau": 7,
        "li2024_fig6_r": 8,
        "li2024_conjectures": 2,  # Li §3.2: the baseline with and without GD, probe held out
    }
    assert {e: n for e, n in by_experiment.items() if paper_of(e) in FOUR_PAPERS} == expected


def test_settings_resolution_order(repo_root):
    config = cl_config.load(repo_root / "config.yaml")
    grid = cl_config.Grid(config)
    nie = grid.settings(cl_config.MethodOn("nie2023", "bert-large", "mat"))
    assert (nie["loss_hp"], nie["lr"], nie["batch_size"]) == ({"m": 0.17}, 3e-5, 128)
    li_roberta = grid.settings(cl_config.MethodOn("li2024", "roberta-base", "mmhs"))
    assert li_roberta["loss_hp"]["m"] == 0.27 and li_roberta["loss_hp"]["r"] == 1.0
    li_infonce = grid.settings(cl_config.MethodOn("li2024", "bert-base", "infonce"))
    assert li_infonce["protocol"] == "simcse"
    macl = grid.settings(cl_config.MethodOn("macl", "roberta-base", "macl"))
    assert macl["dropout"] == 0.2 and macl["lr"] == 1e-5 and macl["batch_size"] == 64


def test_select_narrows_the_grid(repo_root):
    config = cl_config.load(
        repo_root / "config.yaml", {"select": {"experiments": ["nie2023"], "methods": ["mpt"]}}
    )
    cells = list(cl_config.Grid(config).cells)
    assert {(c.experiment, c.method) for c in cells} == {("nie2023", "mpt")}
    assert len(cells) == 4 * 3


def test_config_yaml_cites_a_source_for_every_method(repo_root):
    raw = yaml.safe_load((repo_root / "config.yaml").read_text())
    for name, experiment in raw["experiments"].items():
        for method, spec in experiment["methods"].items():
            assert spec.get("note"), f"{name}.{method} has no note citing its source"


def test_each_preset_validates_with_its_own_results_and_state(repo_root):
    presets = [repo_root / "config.yaml", *sorted((repo_root / "config").glob("*.yaml"))]
    configs = [cl_config.load(path) for path in presets]
    assert all(cl_config.Grid(config).cells for config in configs)
    results = [config["results_dir"] for config in configs]
    assert len(set(results)) == len(results), dict(zip(map(str, presets), results, strict=True))
    assert results[0] == "results" and "results/demo" in results


@pytest.mark.parametrize("preset", ["config.yaml", "config/demo.yaml"])
def test_a_grid_resolves_each_cell_once(repo_root, preset):
    """A grid resolves each (experiment, method, backbone) once; its readers resolve nothing again."""
    from contrastlab.cost import calibration, plan
    from contrastlab.figures import catalog
    from contrastlab.tables import deviations

    config = cl_config.load(repo_root / preset)
    grid = cl_config.Grid(config)
    views = [grid.settings(c) for c in grid.cells]
    configured = {(c.experiment, c.method, c.backbone) for c in grid.every_cell()}
    assert grid.resolutions == len(configured)  # every configured cell, when the grid was built
    plan.make_plan(grid, calibration.load_calibration(calibration.DEFAULT_CALIBRATION), "bf16")
    catalog.figures(grid)
    for experiment in config["experiments"]:
        deviations.detected(grid, experiment)
    assert grid.resolutions == len(configured)  # the deviations read every configured cell, once
    assert all(grid.settings(c) is view for c, view in zip(grid.cells, views, strict=True))


@pytest.mark.parametrize("preset", ["config.yaml", "config/demo.yaml"])
def test_resolved_settings_are_the_layers(repo_root, preset):
    """Settings equal the layers applied afresh, read-only, copied for a caller, per config."""
    import copy

    from contrastlab.config import grid as cl_grid

    config = cl_config.load(repo_root / preset)
    fresh = copy.deepcopy(config)
    grid = cl_config.Grid(config)
    for c in grid.cells:
        assert grid.settings_copy(c) == cl_grid._layered_settings(
            fresh, c.experiment, c.method, c.backbone
        ), c.path
    first = grid.cells[0]
    with pytest.raises(TypeError):
        grid.settings(first)["lr"] = 0.123
    with pytest.raises(TypeError):
        grid.settings(first)["loss_hp"]["changed"] = True
    mine = grid.settings_copy(first)
    mine["loss_hp"]["changed"] = True
    assert "changed" not in grid.settings(first)["loss_hp"]
    config["experiments"][first.experiment]["methods"][first.method.split("-")[0]]["lr"] = 0.123
    assert cl_config.Grid(config).settings(first)["lr"] == 0.123


def test_the_workflow_builds_one_grid_while_it_is_read(repo_root, tmp_path):
    """Reading the Snakefile builds exactly one Grid, rules/common.smk's."""
    from snakemake.api import SnakemakeApi
    from snakemake.settings.types import ConfigSettings, OutputSettings, ResourceSettings, StorageSettings

    before = cl_config.Grid.built
    with SnakemakeApi(OutputSettings()) as api:
        workflow = api.workflow(
            resource_settings=ResourceSettings(cores=1),
            config_settings=ConfigSettings(
                configfiles=[repo_root / "config" / "demo.yaml"],
                config={"results_dir": str(tmp_path / "results"), "resources_dir": str(tmp_path / "res")},
            ),
            storage_settings=StorageSettings(),
            snakefile=repo_root / "Snakefile",
            workdir=tmp_path,  # Snakemake's own log folder lands here, not in the checkout
        )
        parsed = workflow._workflow  # reading the Snakefile happens on first use
        assert parsed.globals["GRID"].cells
    assert cl_config.Grid.built - before == 1


def test_the_plan_and_the_report_each_build_one_grid(repo_root, tmp_path):
    """``make plan`` and the tables job each build one Grid and hand it on."""
    from contrastlab.cost import plan
    from contrastlab.report import build_report

    config = cl_config.load(repo_root / "config" / "demo.yaml", {"results_dir": str(tmp_path / "results")})
    before = cl_config.Grid.built
    plan.plan_report(config, out_dir=tmp_path / "plan", echo=False)
    assert cl_config.Grid.built - before == 1
    before = cl_config.Grid.built
    build_report(Results(tmp_path / "results"), config)
    assert cl_config.Grid.built - before == 1


def test_mteb_is_off_in_the_full_run_on_in_the_demo_and_checks_its_source(repo_root):
    # MTEB's evaluator encodes every STS set again per checkpoint: off where that costs GPU time, on
    # (offline, on the stand-in) in the demo
    full = {"enabled": False, "data": "hub", "stsb_dir": None, "batch_size": 64, "experiments": None}
    assert cl_config.load(repo_root / "config.yaml")["mteb"] == full
    demo = cl_config.load(repo_root / "config/demo.yaml")
    assert demo["mteb"]["enabled"] and demo["mteb"]["data"] == "standin"
    web = {**yaml.safe_load((repo_root / "config/demo.yaml").read_text()), "mteb": {"data": "web"}}
    assert "mteb.data" in refused(cl_config.validate, web)
