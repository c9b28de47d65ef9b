"""contrastlab.workflow.sources: a rule names a loss's code stamp, rewritten only when the module's code
changes, spelled relative to the working directory, so a moved checkout plans nothing again; records of
the module itself, relative or absolute, are migrated to its stamp."""

from __future__ import annotations

import base64
import hashlib
import json
import os
from pathlib import Path

import pytest

from contrastlab.paths import REPO_ROOT, write_text
from contrastlab.workflow.sources import (
    RECORDED_BEFORE_STAMPS,
    code_digest,
    code_stamp,
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
    write_text(root / "src" / "contrastlab" / "losses" / "nie2023.py", "# a loss\n")
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


def record(folder: Path, name: str, inputs: list[str], checksums: dict | None = None) -> Path:
    """A job's record of ``inputs``, each checksum ``sha256:<its index>`` unless ``checksums`` gives it."""
    data = {"rule": "train", "input": inputs, "record_format_version": 6}
    data["input_checksums"] = {p: f"sha256:{i}" for i, p in enumerate(inputs)} | (checksums or {})
    return write_text(folder / name, json.dumps(data))


def stamp_of(module: str) -> str:
    return f".snakemake/contrastlab/code/{module}.code"


def checksum(path: Path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_code_digest_sees_code_not_docstrings_comments_or_layout():
    code = '"""A loss."""\ndef loss(x, y):\n    """Its formula."""\n    return x + y  # why\n'
    laid_out = "def loss(x,\n         y):\n    # a comment\n    return (x\n            + y)\n"
    assert code_digest(code) == code_digest(laid_out) == code_digest(code.replace("A loss", "Eq. 3"))
    assert code_digest(code) != code_digest(code.replace("x + y", "x - y"))
    assert code_digest(code) != code_digest(code + "SCALE = 'a string that is code'\n")
    assert code_digest("def loss():\n    pass\n") == code_digest('def loss():\n    """Only a docstring."""\n')
    assert code_digest(b"\xef\xbb\xbf" + code.encode()) == code_digest(code)  # a BOM: the same code
    # the digest Pythons 3.10 to 3.13 give (3.12's parser adds an empty text part to this f-string)
    nested = 'def f(x, w):\n    match x:\n        case 1:\n            return f"{x:>{w}}"\n'
    assert code_digest(nested)[:16] == "b80a098ecd87c034"


def test_a_stamp_takes_its_modules_date_and_changes_only_with_its_code(tmp_path):
    root = checkout(tmp_path)
    module = root / "src" / "contrastlab" / "losses" / "nie2023.py"
    module.write_text("def loss(x):\n    return x\n")
    os.utime(module, (1_000_000_000, 1_000_000_000))
    relative = "src/contrastlab/losses/nie2023.py"
    stamp = root / stamp_of(relative)
    assert code_stamp(relative, root) == stamp_of(relative)
    assert stamp.read_text() == code_digest(module.read_text()) and stamp.stat().st_mtime == 1_000_000_000
    module.write_text('"""Documented."""\n\n\ndef loss(x):  # unchanged code\n    return x\n')
    assert code_stamp(relative, root) == stamp_of(relative) and stamp.stat().st_mtime == 1_000_000_000
    module.write_text("def loss(x):\n    return 2 * x\n")
    assert code_stamp(relative, root) == stamp_of(relative) and stamp.stat().st_mtime > 1_000_000_000
    assert stamp.read_text() == code_digest(module.read_text())
    module.write_text("def loss(x):\n    return (\n")  # the loss's own check names the error
    assert code_stamp(relative, root) == relative
    assert code_stamp("gone.py", root) == "gone.py"  # Snakemake names it missing


def test_a_stamp_of_a_module_outside_the_working_directory_moves_with_its_checkout(tmp_path):
    """A run whose working directory is outside the checkout stamps a built-in module at its absolute
    path: after the checkout moved, the record names the stamp at the new place, its checksum kept (the
    stamp's, which the same code gives again)."""
    library, workdir = checkout(tmp_path), tmp_path / "work"
    workdir.mkdir()
    old = ".snakemake/contrastlab/code/@/gone/checkout/src/contrastlab/losses/nie2023.py.code"
    path = record(workdir / ".snakemake" / "metadata", "train", [old])
    assert migrate_recorded_sources(workdir / ".snakemake" / "metadata", workdir, workdir, library) == 1
    new = f".snakemake/contrastlab/code/@{library}/src/contrastlab/losses/nie2023.py.code"
    assert json.loads(path.read_text())["input_checksums"] == {new: "sha256:0"}
    assert (workdir / new).read_text() == code_digest(
        (library / "src/contrastlab/losses/nie2023.py").read_text()
    )


def test_records_of_the_module_are_migrated_to_its_stamp_once(tmp_path):
    """A record naming the module (relative, or absolute in this or an older checkout) names its stamp
    after the migration, with the stamp's checksum where the module's bytes are the recorded ones."""
    root = checkout(tmp_path)
    metadata = root / ".snakemake" / "metadata"
    relative = "src/contrastlab/losses/nie2023.py"
    module = root / relative
    marker = str(tmp_path / "results" / "state" / "data" / "corpus.ready.json")
    # these two recorded the module's bytes as they are
    train = record(metadata, "train", [marker, str(module)], {str(module): checksum(module)})
    before_stamps = record(metadata, "before", [relative], {relative: checksum(module)})
    moved = record(metadata, "moved", ["/gone/checkout/src/contrastlab/losses/nie2023.py"])  # an older place
    kept = record(metadata, "kept", [marker])
    before = kept.read_bytes()
    assert migrate_recorded_sources(metadata, root, root, root) == 3
    migrated = json.loads(train.read_text())
    stamp = checksum(root / stamp_of(relative))
    assert migrated["input"] == sorted([marker, stamp_of(relative)])
    assert migrated["input_checksums"] == {marker: "sha256:0", stamp_of(relative): stamp}
    assert json.loads(before_stamps.read_text())["input_checksums"] == {stamp_of(relative): stamp}
    assert json.loads(moved.read_text())["input_checksums"] == {stamp_of(relative): "sha256:0"}  # other bytes
    assert kept.read_bytes() == before  # no loss module: untouched
    assert migrate_recorded_sources(metadata, root, root, root) == 0  # again: nothing
    (metadata / "cut").write_text('{"input": ["/x.py"')  # an unreadable record is left alone
    assert migrate_recorded_sources(metadata, root, root, root) == 0
    assert (metadata / "cut").read_text() == '{"input": ["/x.py"'
    assert migrate_recorded_sources(root / "no-metadata", root, root, root) == 0  # no folder: left alone


@pytest.mark.parametrize("edit, same", [("# a comment since 0.2.0\n", True), ("EDITED = 1\n", False)])
def test_a_record_of_0_2_0s_bytes_is_of_todays_code_while_its_code_is_the_same(tmp_path, edit, same):
    """0.2.0's records hold its modules' bytes: a module edited since in its comments alone keeps them,
    one whose code changed is left to the dates."""
    root = checkout(tmp_path)
    relative = "src/contrastlab/losses/nie2023.py"
    (root / relative).write_text((REPO_ROOT / relative).read_text() + edit)
    shipped = "sha256:" + RECORDED_BEFORE_STAMPS["nie2023"][0] + "0" * 32
    path = record(root / ".snakemake" / "metadata", "train", [relative], {relative: shipped})
    assert migrate_recorded_sources(root / ".snakemake" / "metadata", root, root, root) == 1
    carried = json.loads(path.read_text())["input_checksums"][stamp_of(relative)]
    assert carried == (checksum(root / stamp_of(relative)) if same else shipped)


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
    """The migration spells each kind of input by value: a user's loss under the working directory by its
    stamp at its relative path, one outside at its absolute path, a backbone-like folder outside ``models``
    and a missing file as recorded; the inputs sorted, each checksum under its input's new name."""
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
    outside_stamp = f".snakemake/contrastlab/code/@{outside}.code"
    assert migrated["input"] == sorted([stamp_of("mine.py"), outside_stamp, look_alike, gone])
    assert migrated["input_checksums"] == {
        stamp_of("mine.py"): "sha256:0",
        outside_stamp: "sha256:1",
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
