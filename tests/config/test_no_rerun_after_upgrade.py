"""An upgrade reruns no finished cell: a train job reruns when its params or inputs change (the profiles'
``rerun-triggers``); a cell's params are its resolved settings, and its loss's code (the stamp of its
module, contrastlab.workflow.sources) is one of its inputs.

The digests below are each built-in loss module's bytes at 0.2.0 (what a record made before the code
stamps holds), its code, and every cell's settings of each preset as the workflow resolves them. A change
that means to retrain cells updates a digest and says so in CHANGELOG.md (config/cpu.yaml's 30 steps,
config/gpu-check.yaml's 125 steps and its fp16 cell's snapshots every 50 did).
"""

from __future__ import annotations

import hashlib
import json

import pytest
from test_papers import FOUR_PAPERS

from contrastlab import config as cl_config
from contrastlab.losses.catalog import LOSSES
from contrastlab.losses.user import module_path
from contrastlab.papers import paper_for, paper_of
from contrastlab.workflow.sources import RECORDED_BEFORE_STAMPS, code_digest

#: sha256[:16] of each built-in loss's module at 0.2.0 (29003947), its cells' train input until the code
#: stamps (rules/common.smk's ``loss_source``): their records hold these bytes.
LOSS_MODULES_AT_0_2_0 = {
    "li2024": "19dc4c156f4a2e1b",
    "macl": "0bf4c00d55994119",
    "nie2023": "3f79900b613d959c",
    "oar": "ed158811589b39ca",
    "vision": "656b4f18bd3dbf1a",
}
#: code_digest[:32] of each built-in loss's module at 0.2.0 (the library's table, never updated)
LOSS_CODE_AT_0_2_0 = {
    "li2024": "48ecbd57b4f02fb635cf1b291057de28",
    "macl": "352126122436ab31af3265a049b6b79a",
    "nie2023": "2f0d80e13c86cb07594dbdf41dc7b4c4",
    "oar": "7767502526f31813fc1eabea105ac4d7",
    "vision": "fdcfd2b387b6fbfd558ce51f61e3d119",
}
#: code_digest[:32] of each built-in loss's module now: a change of code that means to retrain its cells
#: updates its entry here (the table above stays) and says so in CHANGELOG.md.
LOSS_CODE_NOW = dict(LOSS_CODE_AT_0_2_0)
#: preset -> (cells, sha256[:16] of their sorted settings) at 19dfe09
SETTINGS_AT_19DFE09 = {
    "config.yaml": (369, "743e2494babac8d6"),
    "config/demo.yaml": (23, "fa5a53946bcdd6d8"),
    "config/cpu.yaml": (1, "ed11004c613aad4e"),  # 30 steps since 2026-11-27 (the docstring)
    "config/gpu-check.yaml": (6, "fc550baf2905868e"),  # 125 steps, fp16's state_every 50 (the docstring)
}


def settings_digest(preset, overrides=None) -> tuple[int, str]:
    grid = cl_config.Grid(cl_config.load(preset, overrides))
    rows = sorted(
        json.dumps([c.experiment, c.backbone, c.method, grid.settings_copy(c)], sort_keys=True, default=str)
        for c in grid.every_cell()
        if paper_for(c.experiment) is None or paper_of(c.experiment) in FOUR_PAPERS  # not a paper added since
    )
    return len(rows), hashlib.sha256("\n".join(rows).encode()).hexdigest()[:16]


@pytest.mark.parametrize("preset", sorted(SETTINGS_AT_19DFE09))
def test_every_cells_params_are_those_before_the_gpu_defaults(repo_root, preset):
    assert settings_digest(repo_root / preset) == SETTINGS_AT_19DFE09[preset]


def test_the_digest_sees_a_changed_setting(repo_root):
    """The check can fail: one setting changed in one cell changes the digest."""
    changed = settings_digest(repo_root / "config" / "demo.yaml", {"training": {"cuda_graph": False}})
    assert changed[0] == SETTINGS_AT_19DFE09["config/demo.yaml"][0]
    assert changed[1] != SETTINGS_AT_19DFE09["config/demo.yaml"][1]  # an explicit value is a param


def test_every_loss_modules_code_is_the_one_finished_cells_trained_with(repo_root):
    """Each module's code is the one above (its docstrings, comments and layout may change), and the
    library's record of 0.2.0's bytes and code, by which the upgrade keeps the cells trained before the
    code stamps, is 0.2.0's."""
    modules = {repo_root / module_path(name) for name in LOSSES}
    assert {path.stem: code_digest(path.read_bytes())[:32] for path in modules} == LOSS_CODE_NOW
    recorded = {name: (shipped[:16], code) for name, (shipped, code) in RECORDED_BEFORE_STAMPS.items()}
    assert recorded == {
        name: (LOSS_MODULES_AT_0_2_0[name], LOSS_CODE_AT_0_2_0[name]) for name in LOSS_MODULES_AT_0_2_0
    }
