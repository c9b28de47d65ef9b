"""Finished work checked before it is trusted (contrastlab.paths.read_metrics, workflow.finished): an
unreadable metrics file named by its reader; the weights' and metrics' size and sha256 recorded; a file
that no longer matches named and moved aside, so that the workflow makes that cell again."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from base64 import urlsafe_b64encode
from pathlib import Path
from types import SimpleNamespace

import pytest

from contrastlab import artifacts
from contrastlab.paths import Results, UnreadableMetricsError, link_or_copy, read_metrics, write_json
from contrastlab.workflow import finished
from contrastlab.workflow.job import logged_to
from contrastlab.workflow.recovery import runs_folder

CELL = "nie2023/tiny-bert/cl/seed42"
METRICS = {"scores": {"STS12": 70.0, "STSBenchmark": 75.5}, "sts_avg": 72.75, "alignment": 0.4}
METRICS.update(uniformity=-2.5, mode="test", training={"precision": "fp32"})


def truncated_metrics(root: Path) -> Path:
    """A finished cell's ``senteval.json`` cut to half, as the reliability run K1 left it."""
    path = Path(Results(root).metrics(CELL, "sentence"))
    path.parent.mkdir(parents=True)
    text = json.dumps(METRICS, indent=1)
    path.write_text(text[: len(text) // 2])
    return path


def _readers(root: Path):
    """Each job that reads a cell's metrics file, as the library call its script makes."""
    from contrastlab.figures.sweeps import sweep_metrics_frame
    from contrastlab.figures.training_curves import alignment_uniformity_frame
    from contrastlab.tables.metrics import collect_metrics

    metrics_root = Results(root).metrics()
    return {
        "figure_align_uniform": lambda: alignment_uniformity_frame(metrics_root, "nie2023"),
        "figure_lr_sweep": lambda: sweep_metrics_frame(metrics_root, "nie2023", {"cl": ("lr", 1e-5)}),
        "tables": lambda: collect_metrics(metrics_root),
    }


@pytest.mark.fault(
    "a finished cell's metrics JSON cut to half",
    "the figure and table jobs fail in one line naming the file and the fix",
)
@pytest.mark.parametrize("rule", ["figure_align_uniform", "figure_lr_sweep", "tables"])
def test_an_unparseable_metrics_file_is_named_with_the_fix(tmp_path, capsys, observed, rule):
    """Every job that reads a cut metrics file names it and the fix in one line."""
    path = truncated_metrics(tmp_path)
    log = tmp_path / "job.log"
    with pytest.raises(SystemExit):
        with logged_to(log, f"rule {rule} {CELL}"):
            _readers(tmp_path)[rule]()
    (line,) = capsys.readouterr().err.splitlines()
    observed(line)
    assert line.startswith(f"contrastlab: rule {rule} {CELL}: UnreadableMetricsError: metrics file {path} ")
    assert "cannot be read (JSONDecodeError: Unterminated string" in line
    assert "delete it and run the workflow again: only that evaluation is redone" in line


def test_a_metrics_file_that_holds_no_object_is_named_too(tmp_path):
    path = tmp_path / "senteval.json"
    path.write_text("[]")
    with pytest.raises(UnreadableMetricsError, match=f"metrics file {path} holds no JSON object"):
        read_metrics(path)
    path.write_text(json.dumps(METRICS))
    assert read_metrics(path) == METRICS
    path.write_bytes(b'{"a": "\xff"}')
    with pytest.raises(UnreadableMetricsError, match="UnicodeDecodeError"):
        read_metrics(path)


def finished_cell(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A results folder under ``tmp_path`` and its cell whose train and evaluate jobs ended: weights and
    metrics, each recorded by its job's frame (record_job, as Snakemake hands the job to its script)."""
    root = tmp_path / "results"
    results = Results(root)
    model, metrics = Path(results.checkpoint(CELL, "model")), Path(results.metrics(CELL, "sentence"))
    model.mkdir(parents=True)
    (model / "model.safetensors").write_bytes(bytes(range(256)) * 64)
    (model / "config.json").write_text("{}")
    write_json(metrics, METRICS)
    config = {"results_dir": str(root)}
    train = SimpleNamespace(
        output={"model": str(model), "log_jsonl": str(model.parent / "log")}, config=config
    )
    evaluate = SimpleNamespace(output={"metrics": str(metrics)}, config=config)
    records = finished.record_job(train) + finished.record_job(evaluate)
    assert [p.name for p in records] == ["model.json", "senteval.json.json"]
    assert finished.record_job(SimpleNamespace(output={"embeddings": str(root / "e")}, config=config)) == []
    return root, model, metrics


@pytest.mark.fault(
    "a finished cell's model.safetensors cut to half",
    "named in one line at the start of the run; its checkpoint moved aside, the other cells untouched",
)
def test_cut_weights_are_named_and_moved_aside_alone(tmp_path, observed):
    """Reliability K2: a truncated ``model.safetensors`` in a finished cell gave "Nothing to be done"."""
    root, model, metrics = finished_cell(tmp_path)
    other = Path(Results(root).metrics("nie2023/tiny-bert/mpt/seed42", "sentence"))
    write_json(other, {})  # a cell without a record (an older run): trusted as before
    weights = model / "model.safetensors"
    whole = weights.read_bytes()
    assert finished.set_aside_changed(root, [model, metrics, other]) == []  # all as their jobs wrote them
    weights.write_bytes(whole[: len(whole) // 2])
    (line,) = finished.set_aside_changed(root, [model, metrics, other])
    observed(line)
    aside = root / "state" / "set-aside" / "checkpoints" / CELL / "model"
    assert line == (
        f"contrastlab: {CELL}: {weights} is 8,192 bytes, not the 16,384 its job wrote; moved {model} aside "
        f"to {aside}: it is made again, with what depends on it"
    )
    assert not model.exists() and (aside / "model.safetensors").read_bytes() == whole[: len(whole) // 2]
    assert metrics.is_file() and other.is_file()  # the cell's metrics and the other cell stay
    assert not (root / "state" / "finished" / "checkpoints" / CELL / "model.json").exists()
    assert finished.set_aside_changed(root, [model, metrics, other]) == []  # nothing left to set aside


@pytest.mark.fault(
    "a finished cell's metrics JSON overwritten with other bytes of the same size",
    "named in one line; the metrics file moved aside, its weights kept",
)
def test_changed_metrics_are_found_by_their_digest(tmp_path, observed):
    root, model, metrics = finished_cell(tmp_path)
    text = metrics.read_text()
    stat = metrics.stat()
    metrics.write_text(text.replace("70.0", "71.0"))  # same size; even the modification time put back
    os.utime(metrics, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    (line,) = finished.set_aside_changed(root, [model, metrics])
    observed(line)
    assert line.startswith(
        f"contrastlab: {CELL}: {metrics} has the size its job wrote but not the same bytes"
    )
    assert not metrics.exists() and model.is_dir()


def test_a_copied_results_folder_is_digested_once_and_trusted(tmp_path):
    """Another modification time with the same bytes (``cp -r``): the digest decides, and the record is
    updated so that the next check reads sizes only."""
    root, model, metrics = finished_cell(tmp_path)
    weights = model / "model.safetensors"
    os.utime(weights, ns=(1, 10**18))
    assert finished.changed(root, model) is None and weights.exists()
    record = json.loads(finished.record_path(root, model).read_text())
    assert record["files"][f"checkpoints/{CELL}/model/model.safetensors"]["mtime_ns"] == 10**18


@pytest.mark.fault(
    "a finished cell's weights cut short while another run's record says it is executing on the folder",
    "named in one line; nothing moved (a second run never touches a folder in use)",
)
def test_nothing_is_moved_while_another_run_may_use_the_folder(tmp_path, observed):
    root, model, metrics = finished_cell(tmp_path)
    (model / "model.safetensors").write_bytes(b"cut")
    write_json(runs_folder(root) / "otherhost.123.456.json", {})
    (line,) = finished.set_aside_changed(root, [model, metrics])
    observed(line)
    assert line.startswith(f"contrastlab: {CELL}: {model / 'model.safetensors'} is 3 bytes")
    assert f"left in place while another run may use {root}" in line and model.is_dir()


@pytest.mark.fault(
    "a cell's model.safetensors cut to half, with no record (an older run), then its encode job",
    "one line naming the weights file and the fix (retrain the cell)",
)
def test_cut_weights_without_a_record_are_named_by_the_job_that_loads_them(tmp_path, capsys, observed):
    """Weights cut short with no record are named, with the fix, by the job that loads them."""
    from contrastlab.models.text import load_backbone
    from tests.hub_standin import save_tiny_bert

    model = Path(Results(tmp_path).checkpoint(CELL, "model"))
    save_tiny_bert(model)
    (model / "train_summary.json").write_text("{}")  # a trained cell's checkpoint
    weights = model / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    capsys.readouterr()  # save_pretrained's progress bar
    with pytest.raises(SystemExit):
        with logged_to(tmp_path / "encode.log", f"rule encode {CELL}"):
            load_backbone(model, device="cpu")
    (line,) = capsys.readouterr().err.splitlines()
    observed(line)
    assert line.startswith(
        f"contrastlab: rule encode {CELL}: UnreadableWeightsError: {weights} cannot be read"
    )
    assert f"retrain the cell: delete {model} and run the workflow again" in line


#: The changes of a finished state's ``state.json`` that keep the state: the file's text (None: no file).
STATE_INFOS = {
    "missing state.json": None,
    "state.json unreadable": "{finished",
    "state.json not an object": json.dumps([True]),
    "finished: false": json.dumps({"finished": False, "step": 300}),
    "finished: 'true'": json.dumps({"finished": "true"}),
    "finished: 1": json.dumps({"finished": 1}),
}


def _finished_state_case(root: Path, workdir: Path, change: str) -> tuple[Path, Path]:
    """A trained cell's state and weights folders under ``root``, all as the removal of finished states wants
    them, but for ``change``."""
    state, model = root / "state" / "train" / CELL, root / "checkpoints" / CELL / "model"
    state.mkdir(parents=True)
    info = STATE_INFOS.get(change, json.dumps({"finished": True, "step": 300}))
    if info is not None:
        (state / "state.json").write_text(info)
    if change != "weights missing":
        model.mkdir(parents=True)
    if change == "marked incomplete":  # Snakemake's marker: the urlsafe base64 of the output as keyed
        key = os.path.relpath(model, workdir)
        marker = workdir / ".snakemake" / "incomplete" / urlsafe_b64encode(key.encode()).decode()
        write_json(marker, {})
    if change == "another run on the folder":
        write_json(root / "state" / "runs" / "otherhost.1.2.json", {})
    return state, model


@pytest.mark.parametrize(
    "change", [*STATE_INFOS, "weights missing", "marked incomplete", "another run on the folder"]
)
def test_each_condition_of_the_finished_state_removal_keeps_the_state(tmp_path, change):
    """Each condition of forget_finished_states decides by itself: only a finished snapshot whose weights
    exist, are recorded by Snakemake and lie in a folder no other run uses goes."""
    root = tmp_path / "results"
    state, model = _finished_state_case(root, tmp_path, change)
    assert finished.forget_finished_states([(state, model)], root, tmp_path) == []
    assert state.is_dir()


def test_the_finished_state_of_an_accepted_cell_goes_and_only_its_own(tmp_path):
    root = tmp_path / "results"
    state, model = _finished_state_case(root, tmp_path, "none")
    other = root / "state" / "train" / "nie2023" / "tiny-bert" / "cl" / "seed43"  # its weights missing
    write_json(other / "state.json", {"finished": True})
    pairs = [(state, model), (other, model.parent.with_name("seed43") / "model")]
    assert finished.forget_finished_states(pairs, root, tmp_path) == [state]
    assert not state.exists() and other.is_dir()
    pairs[1][1].mkdir(parents=True)  # the tree's last finished state goes with the folders it leaves empty
    assert finished.forget_finished_states(pairs, root, tmp_path) == [other]
    assert not (root / "state" / "train").exists() and pairs[1][1].is_dir()
    # marked under the absolute spelling (a results_dir given as an absolute path): kept too
    state, model = _finished_state_case(tmp_path / "r2", tmp_path, "none")
    marker = tmp_path / ".snakemake" / "incomplete" / urlsafe_b64encode(str(model).encode()).decode()
    write_json(marker, {})
    assert finished.forget_finished_states([(state, model)], None, tmp_path) == [] and state.is_dir()


@pytest.mark.fault(
    "a cell's checkpoint folder made read-only before the run (a read-only bind mount) (B3)",
    "one contrastlab: line naming the folder and the fix when the run starts (no Snakemake traceback)",
)
def test_a_read_only_folder_a_missing_output_must_be_written_in_is_named(tmp_path, monkeypatch, observed):
    """A folder a missing output must be written in but the file system refuses (os.access: a read-only
    mount, no permission; root bypasses it, so the folders are given here) is named in one line."""
    root = tmp_path / "results"
    done = root / "checkpoints" / "nie2023" / "tiny-bert" / "cl" / "seed42"
    todo = done.with_name("seed43")
    (done / "model").mkdir(parents=True)
    todo.mkdir(parents=True)
    unborn = root / "checkpoints" / "macl" / "tiny-bert" / "cl" / "seed42" / "model"  # nothing made yet
    outputs = [done / "model", todo / "model", unborn]
    read_only = set()
    monkeypatch.setattr(finished.os, "access", lambda path, mode: Path(path) not in read_only)
    assert finished.read_only_problem(outputs) is None
    read_only.add(done)  # finished: only read, no line
    assert finished.read_only_problem(outputs) is None
    read_only.add(todo)
    line = finished.read_only_problem(outputs)
    observed(line)
    assert line == (
        f"{todo} cannot be written (read-only), and this run must write model there; make it writable "
        f"(chmod u+w {todo}, or remount it read-write) or set results_dir to a writable folder, then run the "
        "same command again"
    )
    read_only = {root / "checkpoints"}  # the nearest existing folder above an output still to be made
    assert finished.read_only_problem([unborn]).startswith(f"{root / 'checkpoints'} cannot be written")


# --- The weights' sha256 taken while the job goes on (issue 84 item 3): the record made when the job ends
# reads no checkpoint back when its writer hashed it already, and reads it back when that digest is not of
# the bytes on disk or was never taken.


def _read_back_counted(monkeypatch) -> list[str]:
    """The files the record reads back (sha256_file, wherever the record calls it), by name."""
    read, real = [], artifacts.sha256_file

    def counted(path):
        read.append(Path(path).name)
        return real(path)

    monkeypatch.setattr(artifacts, "sha256_file", counted)
    monkeypatch.setattr(finished, "sha256_file", counted)
    return read


def _recorded(root: Path, output: Path) -> dict:
    (record,) = finished.record_finished(root, [output])
    return {Path(k).name: v["sha256"] for k, v in json.loads(record.read_text())["files"].items()}


def test_the_exported_weights_record_the_digest_taken_when_they_were_written(
    tmp_path, tiny_bert, monkeypatch
):
    """A best checkpoint saved atomically and exported as a hard link, its state folder then deleted: the
    record holds the sha256 of the bytes on disk and reads back only the small files."""
    from transformers import AutoModel, AutoTokenizer

    from contrastlab.training import state as st
    from contrastlab.training.sentence_select import save_checkpoint

    model, tokenizer = AutoModel.from_pretrained(tiny_bert), AutoTokenizer.from_pretrained(tiny_bert)
    best = st.save_best(tmp_path / "state", 7, lambda folder: save_checkpoint(model, tokenizer, folder))
    output = tmp_path / "checkpoints" / "cell" / "model"
    output.mkdir(parents=True)
    for file in best.iterdir():
        link_or_copy(str(file), str(output / file.name))
    (output / "extra.safetensors").write_bytes(b"written without a digest")
    shutil.rmtree(tmp_path / "state")
    read = _read_back_counted(monkeypatch)
    recorded = _recorded(tmp_path, output)
    on_disk = {name: hashlib.sha256((output / name).read_bytes()).hexdigest() for name in recorded}
    assert recorded == on_disk and set(recorded) == {"model.safetensors", "extra.safetensors"}
    assert read == ["extra.safetensors"]


@pytest.mark.parametrize("how", ["rewritten", "copied", "hash failed"])
def test_a_digest_that_is_not_of_the_bytes_on_disk_sends_the_record_back_to_reading_them(
    tmp_path, monkeypatch, how
):
    """A file rewritten after its digest was taken, a copy instead of a hard link, a failed background hash:
    each record reads the file back and holds the sha256 of what is on disk."""
    output = tmp_path / "checkpoints" / "cell" / "model"
    output.mkdir(parents=True)
    weights = output / "model.safetensors"
    written = tmp_path / "written.safetensors" if how == "copied" else weights
    written.write_bytes(b"A" * 4096)
    if how == "hash failed":

        def fails(f, future):
            f.close()
            future.set_exception(OSError("read error"))

        monkeypatch.setattr(artifacts, "_hash_open_file", fails)
    artifacts.hash_when_written(written)
    if how == "rewritten":
        artifacts._WRITTEN[artifacts._identity(os.stat(weights))].result()  # the digest of the first bytes
        with open(weights, "r+b") as f:
            f.write(b"B" * 4096)
        os.utime(weights, ns=(1, 1))
    elif how == "copied":
        shutil.copy2(written, weights)
    read = _read_back_counted(monkeypatch)
    assert _recorded(tmp_path, output) == {
        "model.safetensors": hashlib.sha256(weights.read_bytes()).hexdigest()
    }
    assert read == ["model.safetensors"]
