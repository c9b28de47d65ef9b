"""contrastlab.workflow.sources: the loss modules a rule names as inputs are spelled relative to the working
directory, so a moved checkout plans nothing again; records of the old absolute spelling are migrated."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from contrastlab.workflow.sources import (
    loss_source,
    migrate_recorded_sources,
    missing_backbone_problem,
    source_path,
    with_locations,
    without_locations,
)


def checkout(tmp_path: Path, name: str = "repo") -> Path:
    """A checkout with a library file and a user loss of its own."""
    root = tmp_path / name
    (root / "src" / "contrastlab" / "losses").mkdir(parents=True)
    (root / "src" / "contrastlab" / "losses" / "nie2023.py").write_text("# a loss\n")
    (root / "mine.py").write_text("# the user's loss\n")
    return root


def test_a_file_under_the_working_directory_is_relative_and_one_outside_absolute(tmp_path):
    root = checkout(tmp_path)
    assert source_path(root / "mine.py", root, root, root) == "mine.py"
    outside = tmp_path / "theirs.py"
    outside.write_text("")
    assert source_path(outside, root, root, root) == str(outside)  # stays equal when only the checkout moves
    first, second = checkout(tmp_path, "home"), checkout(tmp_path, "scratch")  # a moved checkout: alike
    spelled = {loss_source("mpt", root, root, root) for root in (first, second)}
    assert spelled == {"src/contrastlab/losses/nie2023.py"}


def test_a_library_reached_through_a_link_is_named_through_the_workflows_folder(tmp_path):
    """The test copies' layout: the workflow's folder links src/ to the library imported from elsewhere."""
    library = checkout(tmp_path, "library")
    workflow = tmp_path / "copy"
    workflow.mkdir()
    (workflow / "src").symlink_to(library / "src")
    assert loss_source("infonce", workflow, workflow, library) == "src/contrastlab/losses/nie2023.py"
    # a workflow folder without that file: the file that runs, by its own (absolute) path
    other = tmp_path / "other"
    other.mkdir()
    assert loss_source("infonce", other, other, library) == str(library / "src/contrastlab/losses/nie2023.py")


def record(folder: Path, name: str, inputs: list[str]) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"rule": "train", "input": inputs, "record_format_version": 6}
    data["input_checksums"] = {p: f"sha256:{i}" for i, p in enumerate(inputs)}  # one per input
    path.write_text(json.dumps(data))
    return path


def test_records_of_the_absolute_spelling_are_migrated_once(tmp_path):
    root = checkout(tmp_path)
    metadata = root / ".snakemake" / "metadata"
    module = str(root / "src" / "contrastlab" / "losses" / "nie2023.py")
    marker = str(tmp_path / "results" / "state" / "data" / "corpus.ready.json")
    train = record(metadata, "train", [marker, module])
    moved = record(metadata, "moved", ["/gone/checkout/src/contrastlab/losses/nie2023.py"])  # an older place
    kept = record(metadata, "kept", [marker])
    before = kept.read_bytes()
    assert migrate_recorded_sources(metadata, root, root, root) == 2
    migrated = json.loads(train.read_text())
    assert migrated["input"] == sorted([marker, "src/contrastlab/losses/nie2023.py"])
    assert set(migrated["input_checksums"]) == set(migrated["input"])
    assert json.loads(moved.read_text())["input"] == ["src/contrastlab/losses/nie2023.py"]
    assert kept.read_bytes() == before  # no loss module: untouched
    assert migrate_recorded_sources(metadata, root, root, root) == 0  # again: nothing
    (metadata / "cut").write_text('{"input": ["/x.py"')  # an unreadable record is left alone
    assert migrate_recorded_sources(metadata, root, root, root) == 0
    assert (metadata / "cut").read_text() == '{"input": ["/x.py"'
    assert migrate_recorded_sources(root / "no-metadata", root, root, root) == 0  # no folder: left alone


def keyed(folder: Path, output: str, inputs: list[str], nested: bool = False) -> Path:
    """A record named as Snakemake names it: urlsafe base64 of its output (cut into ``@`` folders)."""
    name = base64.urlsafe_b64encode(output.encode()).decode()
    if nested:  # Snakemake's form for a name longer than the file system allows
        name = f"@{name[:10]}/{name[10:]}"
    return record(folder, name, inputs)


def test_a_backbone_in_a_moved_resources_folder_is_migrated_for_this_runs_results_only(tmp_path):
    root = checkout(tmp_path)
    metadata = root / ".snakemake" / "metadata"
    old = str(tmp_path / "home" / "models" / "tiny-bert")
    new = str(tmp_path / "scratch" / "models" / "tiny-bert")
    results = tmp_path / "results"
    ours = keyed(metadata, str(results / "checkpoints" / "cell" / "model"), [old], nested=True)
    theirs = keyed(metadata, str(tmp_path / "other-results" / "checkpoints" / "cell" / "model"), [old])
    unknown = keyed(metadata, str(results / "x"), [str(tmp_path / "home" / "models" / "other-bert")])
    backbones = {"tiny-bert": new}
    assert migrate_recorded_sources(metadata, root, root, root, results=results, backbones=backbones) == 1
    assert json.loads(ours.read_text())["input"] == [new]
    assert json.loads(theirs.read_text())["input"] == [old]  # another preset's run: its own spelling
    assert json.loads(unknown.read_text())["input"] == [str(tmp_path / "home" / "models" / "other-bert")]


def test_a_config_param_carries_settings_not_locations():
    config = {
        "resources_dir": "/a",
        "results_dir": "r",
        "data": {},
        "artifacts_lock": "x",
        "training": {"lr": 1},
    }
    assert without_locations(config) == {"training": {"lr": 1}}
    assert with_locations(without_locations(config), config) == config


def test_each_recorded_input_takes_exactly_its_own_spelling(tmp_path):
    """The migration spells each kind of input by value: a user's loss under the working directory relative,
    one outside absolute, a backbone-like folder outside ``models`` and a missing file as recorded; the
    inputs sorted, each checksum under its input's new name."""
    root = checkout(tmp_path)
    metadata = root / ".snakemake" / "metadata"
    outside = tmp_path / "theirs.py"
    outside.write_text("# a loss outside the checkout\n")
    look_alike = str(tmp_path / "home" / "data" / "tiny-bert")  # not <resources>/models/<alias>
    gone = str(tmp_path / "gone" / "loss.py")
    inputs = [str(root / "mine.py"), str(outside), look_alike, gone]
    results = tmp_path / "results"
    path = keyed(metadata, str(results / "checkpoints" / "cell" / "model"), inputs)
    backbones = {"tiny-bert": str(tmp_path / "scratch" / "models" / "tiny-bert")}
    assert migrate_recorded_sources(metadata, root, root, root, results=results, backbones=backbones) == 1
    migrated = json.loads(path.read_text())
    assert migrated["input"] == sorted(["mine.py", str(outside), look_alike, gone])
    assert migrated["input_checksums"] == {
        "mine.py": "sha256:0",
        str(outside): "sha256:1",
        look_alike: "sha256:2",
        gone: "sha256:3",
    }


def _backbone_case(tmp_path: Path, moved: bool, finished: int):
    """Three sentence cells on tiny-bert (``finished`` of them with their weights) and its folder in this
    run's resources folder, moved away (``moved``) or in place."""
    backbones = {"tiny-bert": str(tmp_path / "resources" / "models" / "tiny-bert")}
    if not moved:
        Path(backbones["tiny-bert"]).mkdir(parents=True)
    cells = []
    for seed in range(3):
        weights = (
            tmp_path / "results" / "checkpoints" / "nie2023" / "tiny-bert" / "cl" / f"seed{seed}" / "model"
        )
        if seed < finished:
            weights.mkdir(parents=True)
        cells.append(("tiny-bert", str(weights)))
    return cells, backbones


@pytest.mark.fault(
    "the resources folder moved (`mv resources <elsewhere>`), the config not told; then one more seed (V3)",
    "one line naming the missing backbone, its finished cells, resources_dir and the fix; nothing retrained",
)
def test_a_backbone_missing_under_finished_cells_stops_the_run_in_one_line(tmp_path, observed):
    cells, backbones = _backbone_case(tmp_path, moved=True, finished=2)
    folder = backbones["tiny-bert"]
    line = missing_backbone_problem(cells, backbones)
    observed(line)
    assert line == (
        f"{folder} (backbone tiny-bert) is missing, but 2 finished cell(s) of this results folder were "
        "trained on it, and fetching it again retrains them; if you moved the resources folder, set "
        "resources_dir to its new place (--config resources_dir=<folder>); to fetch it again and retrain "
        f"them, fetch it alone first (the same command with the target {folder})"
    )
    assert missing_backbone_problem(cells, backbones, ["results/report.md"]) == line
    assert missing_backbone_problem(cells, backbones, [folder + "/"]) is None  # the fix: fetched alone


@pytest.mark.parametrize(("moved", "finished"), [(False, 2), (True, 0)])
def test_no_line_for_a_backbone_in_place_or_one_no_finished_cell_read(tmp_path, moved, finished):
    cells, backbones = _backbone_case(tmp_path, moved, finished)
    assert missing_backbone_problem(cells, backbones) is None
    assert missing_backbone_problem([("other-bert", cells[0][1])], backbones) is None  # not this run's
