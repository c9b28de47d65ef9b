"""contrastlab.paths: the results layout (one spelling of a cell's place, for the rules and the library),
and the one atomic write (a file or a folder is replaced whole or not at all)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from contrastlab.config import Cell
from contrastlab.paths import (
    CELL_PATH,
    REPO_ROOT,
    Resources,
    Results,
    atomic_dir,
    atomic_write,
    cell_path,
    read_yaml,
)


def test_atomic_dir_replaces_the_folder_whole(tmp_path):
    target = tmp_path / "model"
    (target / "old").mkdir(parents=True)
    with atomic_dir(target) as tmp:
        assert tmp.parent == tmp_path and tmp.name == f".model.{os.getpid()}.partial" and not tmp.exists()
        (tmp / "sub").mkdir(parents=True)
        (tmp / "sub" / "weights").write_text("new")
        assert not (target / "sub").exists()  # nothing is visible before the block ends
    assert sorted(p.name for p in target.iterdir()) == ["sub"]
    assert (target / "sub" / "weights").read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]


def test_atomic_dir_keeps_the_old_folder_when_the_write_fails(tmp_path):
    target = tmp_path / "model"
    target.mkdir()
    (target / "weights").write_text("old")
    with pytest.raises(OSError, match="No space left"), atomic_dir(target, fsync=True) as tmp:
        tmp.mkdir()
        (tmp / "weights").write_text("half")
        raise OSError(28, "No space left on device")
    assert (target / "weights").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]  # no leftover


def test_a_file_and_a_folder_use_one_temporary_name(tmp_path):
    with atomic_write(tmp_path / "a.json") as file_tmp, atomic_dir(tmp_path / "b") as dir_tmp:
        file_tmp.write_text("{}")
        dir_tmp.mkdir()
    assert (file_tmp.name, dir_tmp.name) == (f".a.json.{os.getpid()}.partial", f".b.{os.getpid()}.partial")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json", "b"]


# The results layout (Results): one spelling of every path, a file's or a rule's pattern.

CELL = Cell("nie2023", "bert-base", "mpt", 42)
PATTERN = Cell("{experiment}", "{backbone}", "{method}", "{seed}")


def test_a_cell_has_one_path_from_a_cell_its_wildcards_or_a_mapping():
    wildcards = SimpleNamespace(experiment="nie2023", backbone="bert-base", method="mpt", seed="42")
    assert CELL.path == cell_path(wildcards) == cell_path(vars(wildcards)) == "nie2023/bert-base/mpt/seed42"
    assert cell_path(PATTERN) == CELL_PATH == "{experiment}/{backbone}/{method}/seed{seed}"


def test_results_paths_of_a_cell_are_the_layout_the_readers_expect(tmp_path):
    r = Results("results/demo")
    cell = "results/demo/{}/nie2023/bert-base/mpt/seed42"
    assert r.checkpoint(CELL, "model") == cell.format("checkpoints") + "/model"
    assert r.checkpoint(CELL) == cell.format("checkpoints") and r.checkpoint() == "results/demo/checkpoints"
    assert r.metrics(CELL, "sentence") == cell.format("metrics") + "/senteval.json"
    assert r.metrics(CELL, "vision") == cell.format("metrics") + "/vision.json"
    assert r.metrics(CELL) == cell.format("metrics") and r.metrics() == "results/demo/metrics"
    assert r.card(CELL) == cell.format("cards") + "/README.md"
    assert r.log("train", CELL) == cell.format("logs/train") + ".log"
    assert r.log("tables") == "results/demo/logs/tables.log"
    assert r.benchmark("train_vision", CELL) == cell.format("benchmarks/train_vision") + ".tsv"
    assert r.benchmark("oar_synthetic") == "results/demo/benchmarks/oar_synthetic.tsv"
    assert r.state("train", CELL) == cell.format("state/train")
    assert r.state("data", "corpus.ready.json") == "results/demo/state/data/corpus.ready.json"
    assert r.tensorboard(CELL) == cell.format("tensorboard")
    assert r.mteb(CELL) == cell.format("mteb") and r.mteb() == "results/demo/mteb"
    stage = r.search_stage("nie2023", "bert-base", "mpt", 2)
    assert stage == "results/demo/search/nie2023/bert-base/mpt/stage2.json"
    want = ("results/demo/tables", "results/demo/figures", "results/demo/report.md")
    assert (r.tables, r.figures, r.report) == want
    assert Results(tmp_path).calibration == f"{tmp_path}/calibration.json"


def test_results_give_the_rules_patterns_from_a_cell_of_wildcards():
    r = Results("results")
    place, pretrained = "{experiment}/{backbone}/{method}/seed{seed}", "pretrained/{backbone}"
    assert r.checkpoint(PATTERN, "model") == f"results/checkpoints/{place}/model"
    benchmarks = "results/benchmarks/encode_pretrained"
    assert r.benchmark("encode_pretrained", pretrained) == f"{benchmarks}/{pretrained}.tsv"
    assert r.metrics(pretrained, "sentence") == f"results/metrics/{pretrained}/senteval.json"


def test_resources_give_a_backbones_folder_and_the_rules_pattern():
    """The resources layout beside Results; a wildcard alias gives the fetch rule's pattern."""
    resources = Resources("/data/resources")
    assert resources.backbone_dir("tiny-bert") == "/data/resources/models/tiny-bert"
    assert resources.backbone_dir("{backbone}") == "/data/resources/models/{backbone}"
    assert repr(resources) == "Resources('/data/resources')"


@pytest.mark.parametrize(
    ("spelling", "folders", "suffixes"),
    [
        # f"{root}/models/{alias}", Path(root, "models", alias): through Resources.backbone_dir only
        (r"models/\{|\"models\", ", ("src", "rules", "scripts"), (".py", ".smk")),
        # {a}/{b}/{c}/seed{d}, with any braces inside: through CELL_PATH only
        (
            r"(\{[^{}/]*\}+/){3}seed\{",
            ("src", "rules", "scripts", "report"),
            (".py", ".smk", ".yaml", ".rst"),
        ),
    ],
    ids=["backbone-folder", "cell-path"],
)
def test_a_place_is_spelled_once_in_the_project(spelling, folders, suffixes):
    """Rules, scripts and library spell a backbone's folder and a cell's place in paths.py only."""
    files = [REPO_ROOT / "Snakefile"] + [
        path for folder in folders for path in (REPO_ROOT / folder).rglob("*") if path.suffix in suffixes
    ]
    spelled = sorted(
        p.relative_to(REPO_ROOT).as_posix()
        for p in files
        if re.search(spelling, p.read_text(encoding="utf-8"))
    )
    assert spelled == ["src/contrastlab/paths.py"]


@pytest.mark.fault("the new folder cannot be renamed into place", "the previous folder is still there, whole")
def test_atomic_dir_removes_the_old_folder_only_after_the_new_one_is_in_place(
    tmp_path, monkeypatch, observed
):
    import contrastlab.paths as cl_paths

    target = tmp_path / "model"
    target.mkdir()
    (target / "weights").write_text("old")
    real_replace = os.replace

    def failing_replace(src, dst):
        if os.fspath(src).endswith(".partial"):
            raise OSError(28, "No space left on device")
        real_replace(src, dst)

    monkeypatch.setattr(cl_paths.os, "replace", failing_replace)
    with pytest.raises(OSError, match="No space left"), atomic_dir(target) as tmp:
        tmp.mkdir()
        (tmp / "weights").write_text("new")
    monkeypatch.undo()
    assert (target / "weights").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]  # no leftover
    observed("the rename failed; model/ kept whole")


@pytest.mark.fault(
    "disk full while the tables and report are re-rendered", "every previous file keeps its content"
)
def test_tables_and_report_are_written_atomically(tmp_path, monkeypatch, observed):
    from contrastlab.report import build_report

    config = {"seeds": [42], "experiments": {"macl": {"backbones": ["bert-base"], "methods": {}}}}
    written = build_report(Results(tmp_path), config)
    before = {path: path.read_bytes() for path in written}
    real_write_text = Path.write_text

    def half_then_full(self, data, *args, **kwargs):
        real_write_text(self, data[: len(data) // 2], *args, **kwargs)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Path, "write_text", half_then_full)
    with pytest.raises(OSError, match="No space left"):
        build_report(Results(tmp_path), config)
    monkeypatch.undo()
    changed = [path.name for path, data in before.items() if path.read_bytes() != data]
    assert not changed, changed
    leftovers = [p.name for p in tmp_path.rglob("*.partial")]
    assert not leftovers, leftovers
    observed(f"{len(before)} files, none changed, no .partial left")


def test_read_yaml_gives_safe_loads_objects_for_every_yaml_file_the_project_ships():
    """paths.read_yaml reads every shipped YAML file to the same objects as yaml.safe_load."""
    shipped = [
        path
        for pattern in ("*.yaml", "config/*.yaml", "schemas/*.yaml", "profiles/*/*.yaml", "src/**/*.yaml")
        for path in REPO_ROOT.glob(pattern)
    ]
    assert len(shipped) >= 25, shipped
    for path in shipped:
        assert read_yaml(path) == yaml.safe_load(path.read_text(encoding="utf-8")), path
