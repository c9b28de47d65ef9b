"""Snapshots off the critical path: the host copy taken at the step, the background write, its errors,
and the checkpoint written from the kept copy of the best weights."""

from __future__ import annotations

import errno
import hashlib
import threading
import time

import pytest
import torch

from contrastlab.training import state as st
from contrastlab.training.runtime import TrainingRun
from contrastlab.training.sentence import _load_model
from contrastlab.training.sentence_select import save_checkpoint
from contrastlab.training.snapshots import HostBuffers, SnapshotWriter


def test_the_host_copy_is_the_state_at_the_step_and_reuses_its_buffers():
    weights = torch.arange(6.0).reshape(2, 3)
    state = {"model": {"w": weights}, "optimizer": {"state": {0: {"step": torch.tensor(3.0)}}, "lr": [0.1]}}
    buffers = HostBuffers()
    first, ready = buffers.copy(state)
    assert ready is None  # on a CPU nothing is asynchronous
    weights.add_(100.0)  # the next step changes the weights in place
    assert torch.equal(first["model"]["w"], torch.arange(6.0).reshape(2, 3))
    assert first["optimizer"]["lr"] == [0.1] and first["optimizer"]["lr"] is not state["optimizer"]["lr"]
    second, _ = buffers.copy(state)
    # the same memory, refilled: a snapshot allocates nothing after the first one
    assert second["model"]["w"].data_ptr() == first["model"]["w"].data_ptr()
    assert torch.equal(second["model"]["w"], weights)
    grown, _ = buffers.copy({**state, "best": {"w": torch.ones(4)}})
    assert torch.equal(grown["best"]["w"], torch.ones(4))


def test_the_loop_goes_on_while_the_snapshot_is_written(tmp_path, monkeypatch):
    """Training goes on during the write; the file holds the snapshot step's weights, then ``after`` runs."""
    run = TrainingRun(tmp_path / "state", device="cpu", precision="fp32", state_every=2, progress=False)
    model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1)
    model(torch.ones(1, 3)).sum().backward()
    optimizer.step()
    run.begin(None, {}, {"settings": {}})
    stateful = {"model": model, "optimizer": optimizer}
    release, events = threading.Event(), []
    real_save_state = st.save_state

    def held_save_state(*args):
        release.wait(timeout=30)
        real_save_state(*args)
        events.append("written")

    monkeypatch.setattr(st, "save_state", held_save_state)
    at_step = {k: v.clone() for k, v in stateful["model"].state_dict().items()}
    run.save_snapshot(2, "fingerprint", stateful, {}, after=lambda: events.append("after"))
    assert run.snapshots.busy and not (tmp_path / "state" / st.STATE_FILE).exists()
    with torch.no_grad():
        stateful["model"].weight.add_(1.0)  # the next step
    release.set()
    run.wait_for_snapshot()
    assert events == ["written", "after"]
    saved = st.read_snapshot(tmp_path / "state" / st.STATE_FILE)
    assert all(torch.equal(saved["model"][k], at_step[k]) for k in at_step)
    assert saved["step"] == 2 and run.timings["state_s"] < 30


def test_a_run_stopped_by_an_error_leaves_the_snapshot_it_started(tmp_path, monkeypatch, train_tiny):
    """An error right after a snapshot is submitted waits for its write before it leaves the trainer: a
    warm-started job ends by os._exit, which does not wait for the writer, and a resume in the same
    process (the CUDA kill test) found the state folder mid-write and started over."""
    real_save_state, real_save_snapshot = st.save_state, TrainingRun.save_snapshot

    def slow_save_state(*args):
        time.sleep(0.5)
        real_save_state(*args)

    def save_then_die(self, *args, **kwargs):
        real_save_snapshot(self, *args, **kwargs)
        raise KeyboardInterrupt  # right after the first snapshot (step 4), its write in flight

    with monkeypatch.context() as patched:
        patched.setattr(st, "save_state", slow_save_state)
        patched.setattr(TrainingRun, "save_snapshot", save_then_die)
        with pytest.raises(KeyboardInterrupt):
            train_tiny(tmp_path / "killed")
    assert st.read_snapshot(tmp_path / "killed" / "state" / st.STATE_FILE)["step"] == 4
    assert train_tiny(tmp_path / "killed")["resumed_from"] == [4]


def test_the_best_checkpoint_written_from_the_kept_copy_is_the_models_own_save(tmp_path, tiny_bert):
    """The kept copy, written later, gives the model's own save at that step byte for byte."""
    from transformers import AutoTokenizer

    model, tokenizer = _load_model(tiny_bert, 0.1), AutoTokenizer.from_pretrained(tiny_bert)
    with torch.no_grad():
        for param in model.parameters():
            param.add_(torch.randn_like(param))
    kept = {k: v.detach().clone() for k, v in model.state_dict().items()}
    save_checkpoint(model, tokenizer, tmp_path / "own")
    with torch.no_grad():
        for param in model.parameters():  # training went on after the best step
            param.add_(1.0)
    save_checkpoint(model, tokenizer, tmp_path / "kept", kept)
    files = sorted(p.name for p in (tmp_path / "own").iterdir())
    assert "model.safetensors" in files and files == sorted(p.name for p in (tmp_path / "kept").iterdir())
    digest = {
        name: [hashlib.sha256((tmp_path / which / name).read_bytes()).digest() for which in ("own", "kept")]
        for name in files
    }
    assert all(a == b for a, b in digest.values()), digest


def test_a_write_waits_for_the_one_in_flight_and_none_runs_after_a_failure():
    """submit waits for the write in flight; a failed write raises once, at the next wait or submit."""
    writer, release, order = SnapshotWriter(), threading.Event(), []

    def first() -> None:
        release.wait(timeout=30)
        order.append("first")

    writer.submit(first)
    second = threading.Thread(target=writer.submit, args=(lambda: order.append("second"),))
    second.start()
    second.join(timeout=0.3)
    assert second.is_alive() and order == []  # the second submit waits for the first write
    release.set()
    second.join(timeout=30)
    writer.wait()
    assert order == ["first", "second"] and writer.writes == 2

    def full_disk() -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    writer.submit(full_disk)
    with pytest.raises(OSError) as err:  # the run's end waits: the error in the training thread
        writer.wait()
    assert err.value.errno == errno.ENOSPC  # the job frame's disk-full line reads it
    writer.wait()  # raised once
    writer.submit(full_disk)
    with pytest.raises(OSError):
        writer.submit(lambda: order.append("after the failure"))
    writer.wait()
    assert order == ["first", "second"] and writer.writes == 4 and not writer.busy

    inline = SnapshotWriter(background=False)
    with pytest.raises(OSError):
        inline.submit(full_disk)
    inline.submit(lambda: order.append("inline"))
    assert order[-1] == "inline" and inline.writes == 2 and not inline.busy
