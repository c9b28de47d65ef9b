"""contrastlab.versioning without Snakemake: dvc.yaml's stages agree with the presets and with what their
command writes, params.yaml's overlay, and DVC's whole-file rewrite of a config (``dvc exp run -S
config/demo.yaml:...``) told from a user's own edit. The DVC commands themselves run in
tests/e2e/test_dvc.py."""

from __future__ import annotations

import shlex
import shutil
import subprocess

import pytest
import yaml

from contrastlab import config as cl_config
from contrastlab.paths import REPO_ROOT
from contrastlab.versioning import (
    PLOTS_DIR,
    RESULTS_OUTPUTS,
    STAGE,
    SUMMARY_DIR,
    VersioningError,
    check_configs_untouched,
    overlay_args,
    params_overlay,
    preset_stages,
    stage_for,
)


def test_each_stage_runs_its_preset_into_the_preset_results_dir_and_versions_its_outputs():
    dvc_yaml = yaml.safe_load((REPO_ROOT / "dvc.yaml").read_text())
    stage = dvc_yaml["stages"][STAGE]
    presets = preset_stages(REPO_ROOT)
    assert list(presets) == ["demo"]  # `dvc repro` alone: the toy run; `dvc pull` needs each stage run
    for name, item in presets.items():
        assert stage_for(item["config"], REPO_ROOT) == f"{STAGE}@{name}"
    # The lines a user uncomments to run the other presets with DVC.
    lines = [line.strip().removeprefix("# ") for line in (REPO_ROOT / "dvc.yaml").read_text().splitlines()]
    offered = yaml.safe_load("\n".join(line for line in lines if line.startswith(("cpu: {", "full: {"))))
    assert list(offered) == ["cpu", "full"]
    for name, item in {**presets, **offered}.items():
        config = cl_config.load(REPO_ROOT / item["config"])
        assert config["results_dir"] == item["results"], name
    outs = [next(iter(out)) if isinstance(out, dict) else out for out in stage["do"]["outs"]]
    expected = [f"${{item.results}}/{name}" for name in RESULTS_OUTPUTS]
    assert outs == [*expected, f"{SUMMARY_DIR}/${{key}}.json", f"{PLOTS_DIR}/${{key}}"]
    flags = [next(iter(out.values())) for out in stage["do"]["outs"]]
    assert [flag.get("cache", True) for flag in flags] == [True] * len(RESULTS_OUTPUTS) + [False, False]
    assert all(flag.get("persist") for flag in flags)  # Snakemake reruns what changed; a refusal keeps them
    assert stage["do"]["cmd"] == '.venv/bin/python scripts/reproduce.py --configfile "${item.config}"'
    # DVC runs cmd in a shell: a preset named with a space (added to foreach) stays one word
    assert shlex.split(stage["do"]["cmd"].replace("${item.config}", "config/my demo.yaml"))[-1].endswith(
        "my demo.yaml"
    )
    assert stage["do"]["always_changed"] is True
    assert dvc_yaml["metrics"] == [SUMMARY_DIR] and dvc_yaml["plots"] == [PLOTS_DIR]


def test_docs_reproduction_lists_every_output_a_stage_versions():
    text = " ".join((REPO_ROOT / "docs" / "reproduction.md").read_text(encoding="utf-8").split())
    listed = text.split("Its outputs are:")[1].split("summary/<preset>.json")[0]
    assert [name for name in RESULTS_OUTPUTS if f"`{name}" not in listed] == []


def test_a_config_without_a_stage_is_named_with_the_ones_that_have_one():
    with pytest.raises(VersioningError, match=r"config.yaml has no stage in dvc.yaml \(presets with one: "):
        stage_for("config.yaml", REPO_ROOT)


def test_params_yaml_sets_nothing_until_an_experiment_does(tmp_path):
    assert params_overlay(REPO_ROOT) == {}  # every preset runs as its config says
    (tmp_path / "params.yaml").write_text("training:\n  lr: 1e-05\n  batch_size:\nseeds: null\n")
    assert params_overlay(tmp_path) == {"training": {"lr": 1e-05}}  # YAML 1.2, as DVC writes it
    assert params_overlay(tmp_path / "none") == {}


def test_the_overlay_reaches_snakemake_key_by_key_in_flow_style():
    args = overlay_args({"training": {"lr": 1e-05}, "seeds": [42, 43], "tables": {"partial": True}})
    assert args == ["--config", "training={lr: 1.0e-05}", "seeds=[42, 43]", "tables={partial: true}"]
    assert overlay_args({}) == []


@pytest.fixture
def committed_demo(tmp_path):
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    (tmp_path / "config").mkdir()
    shutil.copy(REPO_ROOT / "config" / "demo.yaml", tmp_path / "config" / "demo.yaml")
    identity = ["-c", "user.email=test@contrastlab", "-c", "user.name=test"]
    for args in (["init", "-q"], ["add", "-A"], [*identity, "commit", "-qm", "demo"]):
        subprocess.run(["git", *args], cwd=tmp_path, check=True)
    return tmp_path


def test_a_set_param_rewrite_of_a_config_is_undone_and_refused_naming_the_key(committed_demo):
    from dvc.utils.hydra import apply_overrides  # what `dvc exp run -S config/demo.yaml:...` does

    path = committed_demo / "config" / "demo.yaml"
    before = path.read_bytes()
    apply_overrides(path, ["training.lr=1e-4"])
    assert path.read_bytes() != before
    with pytest.raises(VersioningError, match=r"rewrote config/demo.yaml whole; restored it") as raised:
        check_configs_untouched(committed_demo, "HEAD")
    assert "dvc exp run -S 'training.lr=0.0001'" in str(raised.value)
    assert path.read_bytes() == before


def test_a_users_own_edit_of_a_config_is_part_of_the_experiment(committed_demo):
    path = committed_demo / "config" / "demo.yaml"
    edited = path.read_text().replace("lr: 3.0e-5", "lr: 1.0e-4")
    assert edited != path.read_text()
    path.write_text(edited)
    check_configs_untouched(committed_demo, "HEAD")
    assert path.read_text() == edited
