"""A finished cell's state is kept until Snakemake has accepted its outputs (E1, E3), for both tracks:
``forget_finished_states`` removes it only once the outputs are recorded, and a rerun re-exports from
it without a training step."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from contrastlab.training import loop
from contrastlab.training import state as st
from contrastlab.training.cells import train_cell, train_vision_cell
from contrastlab.workflow.finished import forget_finished_states, marked_incomplete
from tests.training.conftest import TINY_SENTENCE


def _mark_incomplete(output: str) -> Path:
    """What Snakemake's ``persistence.started(job)`` leaves for ``output`` in ``.snakemake/incomplete``,
    written by Snakemake's own code so that its spelling of the marker is the one checked."""
    from snakemake.persistence.file import FilePersistence

    persistence = FilePersistence.__new__(FilePersistence)  # only its marker path: no DAG, no workflow
    persistence._max_len = None
    incomplete = Path(".snakemake", "incomplete")
    incomplete.mkdir(parents=True, exist_ok=True)
    marker = Path(persistence._record_path(str(incomplete), output))
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(json.dumps({"external_jobid": None}))
    return marker


def _no_training_step(monkeypatch):
    """Any training step from here on fails the test (both tracks train through loop.train_steps)."""

    def train_steps(*args, **kwargs):
        raise AssertionError("a finished cell trained again")

    monkeypatch.setattr(loop, "train_steps", train_steps)


def _sentence_job(tmp_path, sentence_data):
    cell = Path("results", "checkpoints", "nie2023", "tiny-bert", "cl", "seed42")
    out, log, state = cell / "model", cell / "train_log.jsonl", Path("results", "state", "train", "cl")
    settings = {**TINY_SENTENCE, "max_steps": 4, "eval_every": 2}
    where = dict(out_dir=out, log_path=log, state_dir=state, cache_dir=tmp_path / "cache", **sentence_data)

    def job():  # as scripts/train.py runs it
        return train_cell(settings, point=None, previous_selection=None, **where, keep_state=True)

    return job, out, log, state, "train_summary.json"


def _image_job(vision_settings):
    cell = Path("results", "checkpoints", "macl_cifar10", "resnet18-w4", "ntxent", "seed42")
    out, log, state = cell / "encoder", cell / "train_log.jsonl", Path("results", "state", "train", "ntxent")

    settings = vision_settings(max_steps=6, state_every=3)
    where = dict(out_dir=out, log_path=log, state_dir=state, data_root=None, device="cpu")

    def job():  # as scripts/train_vision.py runs it
        return train_vision_cell(settings, point=False, **where, keep_state=True)

    return job, out, log, state, "settings.json"


@pytest.fixture(params=["sentence", "image"])
def cell_job(request, tmp_path, monkeypatch):
    """``(job, weights folder, log, state folder, summary file name)`` of a tiny cell of
    ``request.param``'s track, run in ``tmp_path`` (Snakemake's working directory)."""
    monkeypatch.chdir(tmp_path)
    if request.param == "sentence":
        return _sentence_job(tmp_path, request.getfixturevalue("sentence_data"))
    return _image_job(request.getfixturevalue("vision_settings"))


def _events(log: Path) -> list[str]:
    return [json.loads(line)["event"] for line in log.read_text().splitlines()]


@pytest.mark.fault(
    "Snakemake SIGKILLed after a training job ended, before it recorded its outputs; `-n`, then a run (E1)",
    "the next run's check keeps the finished state (.snakemake/incomplete marks the outputs); the rerun "
    "of the incomplete job re-exports: 0 steps trained, sentence and image cells",
)
def test_a_kill_between_the_job_and_its_record_retrains_nothing(cell_job, monkeypatch, observed):
    job, out, log, state, summary_file = cell_job
    marker = _mark_incomplete(str(out))  # persistence.started(job): before the job runs
    assert job() == "trained"
    first = json.loads((out / summary_file).read_text())
    pairs = [(state, out)]
    # Snakemake killed here: the outputs exist, the marker stays. The next run (`-n` or not) reads the
    # Snakefile: nothing is forgotten.
    assert marked_incomplete(out) and forget_finished_states(pairs, "results") == []
    assert json.loads((state / st.STATE_INFO).read_text()) == {"finished": True}
    # Its rerun of the incomplete job: Snakemake removes the outputs first, then the job runs again.
    shutil.rmtree(out)
    log.unlink()
    _no_training_step(monkeypatch)
    assert job() == "trained"
    assert json.loads((out / summary_file).read_text()) == first
    assert _events(log).count("start") == 1 and "resume" not in _events(log)
    marker.unlink()  # persistence.finished(job): recorded
    assert not marked_incomplete(out)
    assert forget_finished_states(pairs, "results") == [state] and not state.exists()
    observed(f"{out}: kept while marked incomplete, re-exported without a step, forgotten once recorded")


def _removed_outputs_re_exported(cell_job, monkeypatch) -> str:
    """The cell trained, its outputs removed after the job (Snakemake's "Removing output files of failed
    job"), rerun: its finished state was kept, the rerun re-exports the same outputs and log without a
    training step, and the state goes once the outputs are accepted. Returns what was seen."""
    job, out, log, state, summary_file = cell_job
    assert job() == "trained"
    first, ended = json.loads((out / summary_file).read_text()), _events(log)
    weights = {p.name: p.read_bytes() for p in out.glob("*.safetensors")}
    assert state.is_dir() and json.loads((state / st.STATE_INFO).read_text()) == {"finished": True}
    shutil.rmtree(out)
    log.unlink()
    _no_training_step(monkeypatch)
    started = time.perf_counter()
    assert job() == "trained"
    elapsed = time.perf_counter() - started
    assert json.loads((out / summary_file).read_text()) == first and _events(log) == ended
    assert weights and {p.name: p.read_bytes() for p in out.glob("*.safetensors")} == weights
    assert ended.count("start") == 1 and "resume" not in ended
    if summary_file == "settings.json":  # an image cell's export is its finished encoder folder
        assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in (state / "encoder").iterdir())
    assert state.exists()  # still not accepted: kept
    assert forget_finished_states([(state, out)]) == [state] and not state.exists()  # accepted: removed
    return f"{out}: re-exported in {elapsed:.2f}s without a step, one start; state removed once accepted"


@pytest.mark.fault(
    "Snakemake removes a finished cell's outputs after the job (its benchmark write failed, disk full) (F1)",
    "the cell's finished state is kept until the outputs are accepted; the rerun only re-exports",
)
def test_a_sentence_cell_whose_outputs_were_removed_after_its_job_only_re_exports(
    tmp_path, monkeypatch, sentence_data, observed
):
    monkeypatch.chdir(tmp_path)
    observed(_removed_outputs_re_exported(_sentence_job(tmp_path, sentence_data), monkeypatch))


@pytest.mark.fault(
    "an image cell's outputs removed after its job ended (its benchmark write failed, disk full) (E3)",
    "the image cell's finished state (its encoder among it) is kept; the rerun only re-exports",
)
def test_an_image_cell_whose_outputs_were_removed_after_its_job_only_re_exports(
    tmp_path, monkeypatch, vision_settings, observed
):
    monkeypatch.chdir(tmp_path)
    observed(_removed_outputs_re_exported(_image_job(vision_settings), monkeypatch))
