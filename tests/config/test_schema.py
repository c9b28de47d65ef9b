"""Command-line overrides mean what they mean in a config file (contrastlab.config.schema.coerce_scalars);
through Snakemake itself: tests/e2e/test_overrides.py."""

from __future__ import annotations

import pytest

from contrastlab import config as cl_config
from tests.config.test_refused_at_validation import refused


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
    typed = (training["batch_size"], training["lr"], training["max_steps"], training["dropout"])
    assert typed == (32, 1e-4, 1000, 0.2)
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
        ({"training": {"protocol": "1"}}, "config key training.protocol: '1' is not one of"),  # strings stay
    ],
)
def test_text_that_is_not_the_type_still_fails_naming_the_key(repo_root, override, expected):
    assert refused(cl_config.load, repo_root / "config" / "demo.yaml", override).startswith(expected)
