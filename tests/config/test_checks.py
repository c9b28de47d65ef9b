"""``select`` typos are config errors naming the choices (contrastlab.config.checks); through Snakemake:
tests/e2e/test_overrides.py."""

from __future__ import annotations

import pytest

from contrastlab import config as cl_config


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
