"""Command-line overrides mean what they mean in a config file; ``select`` typos are config errors.

Snakemake hands nested ``--config`` values over as text (``training={batch_size: 32}`` arrives as
``"32"``), and YAML 1.1 reads ``lr: 3e-5`` as a string; ``contrastlab.config.coerce_scalars`` turns
them into the types the schema asks for.
"""

from __future__ import annotations

import re

import pytest

from contrastlab import config as cl_config

from .test_dryrun import snakemake_process
from .workflow_start import start_error

SCHEDULE_FIRST = 1  # a long module: tests/conftest.py starts the highest numbers first


def test_text_values_become_the_schemas_types(repo_root):
    config = cl_config.load(
        repo_root / "config" / "demo.yaml",
        {
            "training": {"batch_size": "32", "lr": "0.0001", "max_steps": "1e3", "dropout": "0.2"},
            "tables": {"partial": "true"},
            "select": {"seeds": ["42"]},
            "resources": {"gpu": "0", "train_mem_mb": "4000"},
            "data": {"fixture": "false", "senteval_dir": "null"},
        },
    )
    training = config["training"]
    assert (training["batch_size"], training["lr"], training["max_steps"], training["dropout"]) == (
        32,
        1e-4,
        1000,
        0.2,
    )
    assert type(training["batch_size"]) is int and type(training["lr"]) is float
    assert config["tables"]["partial"] is True and config["select"]["seeds"] == [42]
    assert config["resources"]["train_mem_mb"] == 4000 and config["data"]["fixture"] is False
    assert config["data"]["senteval_dir"] is None


def test_yaml11_exponent_without_a_dot_is_a_number(tmp_path, repo_root):
    text = (repo_root / "config" / "demo.yaml").read_text().replace("lr: 3.0e-5", "lr: 3e-5")
    assert "lr: 3e-5" in text
    path = tmp_path / "demo.yaml"
    path.write_text(text)
    assert cl_config.load(path)["training"]["lr"] == 3e-5


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ({"training": {"batch_size": "thirty"}}, "config key training.batch_size: 'thirty' is not of type"),
        ({"tables": {"partial": "maybe"}}, "config key tables.partial: 'maybe' is not of type 'boolean'"),
        ({"seeds": "42"}, "config key seeds: '42' is not of type 'array'"),
        ({"training": {"protocol": "1"}}, "config key training.protocol: '1' is not one of"),  # strings stay
    ],
)
def test_text_that_is_not_the_type_still_fails_naming_the_key(repo_root, override, expected):
    with pytest.raises(cl_config.ConfigError, match="^" + expected.replace("(", r"\(")):
        cl_config.load(repo_root / "config" / "demo.yaml", override)


@pytest.mark.parametrize(
    ("select", "expected"),
    [
        ({"experiments": ["nie"]}, "select.experiments: unknown experiment 'nie'; choose from"),
        ({"methods": ["mptt"]}, "select.methods: unknown method 'mptt'; choose from"),
        ({"backbones": ["bert-large"]}, "select.backbones: unknown backbone 'bert-large'; choose from"),
        ({"seeds": [7]}, "select.seeds: unknown seed 7; choose from"),
        ({"experiments": ["li2024"], "methods": ["cl"]}, "select.methods: unknown method 'cl'"),
        ({"experiments": ["nie2023"], "methods": ["mpt"], "backbones": ["minilm"]}, "selects no cell"),
    ],
)
def test_select_typos_are_config_errors_listing_the_choices(repo_root, select, expected):
    with pytest.raises(cl_config.ConfigError) as caught:
        cl_config.load(repo_root / "config" / "demo.yaml", {"select": select})
    assert expected in str(caught.value) and "\n" not in str(caught.value)
    if "choose from" in expected:  # the valid names follow
        assert str(caught.value).rsplit(": ", 1)[1].strip()


def _snakemake(repo_root, tmp_path, *config: str):
    """A dry run of the demo preset in a scratch results folder, with ``config`` overrides."""
    return snakemake_process(
        repo_root,
        "-n",
        "--cores",
        "1",
        "--configfile",
        "config/demo.yaml",
        "--config",
        f"results_dir={tmp_path}/results",
        f"resources_dir={tmp_path}/resources",
        *config,
    )


def test_documented_overrides_work_through_snakemake(repo_root, tmp_path):
    """The README's overrides, numbers and booleans given on the command line, through Snakemake itself."""
    done = _snakemake(
        repo_root,
        tmp_path,
        "training={batch_size: 32, lr: 0.0001}",
        "tables={partial: true}",
        "select={experiments: [nie2023], seeds: [42]}",
        "precision_override=bf16",
        "--printshellcmds",
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    out = done.stdout + done.stderr
    assert "contrastlab:" not in out
    # tables.partial renders the report from what exists: the tables and the figures, nothing trains
    assert re.search(r"^tables\s+1$", out, re.M), out[-2000:]
    assert not re.search(r"^(train|encode|evaluate)\s", out, re.M), out[-2000:]
    done = _snakemake(repo_root, tmp_path, "training={batch_size: 32, lr: 0.0001}", "select={seeds: [42]}")
    # The demo's 5 sentence cells of the tables, 8 of the figure sweeps (Nie Fig. 3, Li Fig. 6), 2 of
    # Li's conjecture runs (Fig. 5, 7-9) and the 6 search points that are not configured cells.
    assert done.returncode == 0 and re.search(r"^train\s+21$", done.stdout + done.stderr, re.M)


def test_select_typo_stops_snakemake_with_one_line(repo_root, tmp_path):
    """A select typo given with --config, as Snakemake parses it, stops the reading of the Snakefile with
    one line. In this process (rules/common.smk's checks, tests/e2e/workflow_start.py); test_dryrun.py
    ::test_bad_config_stops_the_workflow_with_one_line proves such a line end to end."""
    line = start_error(
        repo_root / "config" / "demo.yaml",
        f"results_dir={tmp_path}/results",
        f"resources_dir={tmp_path}/resources",
        "select={methods: [mptt]}",
    )
    assert line is not None and line.startswith("contrastlab: ") and "\n" not in line, line
    assert "select.methods: unknown method 'mptt'" in line, line
