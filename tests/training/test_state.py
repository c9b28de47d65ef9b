"""Snapshots (contrastlab.training.state) are loaded without unpickling objects: a planted or older
snapshot is refused, a corrupted one named with its fix, and neither is retried (S3, K3)."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
import torch

from contrastlab.training import state as st
from contrastlab.training.runtime import TrainingRun
from contrastlab.workflow.job import logged_to

FINGERPRINT = "0123456789abcdef"


class Payload:
    """Unpickling this creates ``marker`` (a stand-in for any code a planted pickle would run)."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def plain_snapshot() -> dict:
    """A snapshot as the trainer writes it: tensors, state dicts and plain values (and every RNG)."""
    model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.999))
    model(torch.ones(1, 3)).sum().backward()
    optimizer.step()
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda k: 1.0 - k / 10)
    return {
        "fingerprint": FINGERPRINT,
        "runtime": {"device_type": "cpu", "precision": "fp32"},
        "step": 4,
        "resumed_from": [2],
        "timings": {"train_s": 1.5},
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        "rng": st.capture_rng(torch.device("cpu")),
        "interval": (0.25, 2, 64),
        "evals": [{"step": 0, "dev_spearman": 12.5}],
        "best": None,
    }


def test_a_snapshot_loads_safely_and_restores_every_rng_draw_for_draw(tmp_path):
    """A snapshot loads with weights_only=True and its RNGs draw what the uninterrupted ones draw next."""
    random.seed(1), np.random.seed(2), torch.manual_seed(3)
    np.random.standard_normal()  # a cached Gaussian in numpy's state
    st.save_state(tmp_path, plain_snapshot(), {"step": 4})
    straight = (random.random(), np.random.standard_normal(3), torch.rand(3))
    random.seed(9), np.random.seed(9), torch.manual_seed(9)

    torch.load(tmp_path / st.STATE_FILE, weights_only=True)  # tensors and plain values only
    saved = st.load_state(tmp_path, FINGERPRINT)
    st.restore_rng(saved["rng"], torch.device("cpu"))
    resumed = (random.random(), np.random.standard_normal(3), torch.rand(3))
    assert resumed[0] == straight[0]
    assert np.array_equal(resumed[1], straight[1]) and torch.equal(resumed[2], straight[2])
    assert saved["interval"] == (0.25, 2, 64)
    assert saved["optimizer"]["param_groups"][0]["betas"] == (0.9, 0.999)
    assert st.load_state(tmp_path, "another-run") is None  # another run's snapshot: start afresh


def refused(path) -> str:
    """The one-line refusal of the snapshot in the state folder ``path``, which names the file and the fix."""
    with pytest.raises(st.SnapshotUnreadableError) as caught:
        st.load_state(path, FINGERPRINT)
    message = str(caught.value)
    assert "\n" not in message and str(path / st.STATE_FILE) in message
    assert f"delete the cell's state folder {path} to restart the cell" in message
    return message


@pytest.mark.fault("a planted pickle (__reduce__ creates a file) as a cell's state.pt", "refused; never run")
def test_a_planted_pickle_in_the_snapshot_is_refused_and_never_run(tmp_path, observed):
    state_dir, marker = tmp_path / "state", tmp_path / "PWNED"
    state_dir.mkdir()
    torch.save({"fingerprint": FINGERPRINT, "step": 4, "rng": Payload(marker)}, state_dir / st.STATE_FILE)
    message = refused(state_dir)
    assert not marker.exists()
    assert "io.open" in message and "not loaded" in message
    assert (state_dir / st.STATE_FILE).exists()  # left for the user to look at, not deleted silently
    observed(message)


@pytest.mark.fault(
    "a snapshot of an older version (numpy RNG state pickled)", "refused in one line with the fix"
)
def test_an_older_snapshot_that_needs_more_than_weights_is_refused(tmp_path, observed):
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    older = {"fingerprint": FINGERPRINT, "step": 4, "rng": {"numpy": np.random.get_state()}}
    torch.save(older, state_dir / st.STATE_FILE)
    message = refused(state_dir)
    assert "numpy" in message and "older" in message
    observed(message)


@pytest.mark.fault(
    "a training snapshot truncated, then a resume",
    "one line naming state.pt and the fix; failed.json says a retry cannot help",
)
@pytest.mark.parametrize("keep", ["a third", "all but 64 bytes"])
def test_a_truncated_snapshot_is_named_with_its_fix_and_not_retried(tmp_path, keep, capsys, observed):
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    st.save_state(state_dir, plain_snapshot(), {"step": 4})
    whole = (state_dir / st.STATE_FILE).read_bytes()
    cut = len(whole) // 3 if keep == "a third" else len(whole) - 64
    (state_dir / st.STATE_FILE).write_bytes(whole[:cut])

    record, label = tmp_path / "failed.json", "rule train nie2023/tiny-bert/cl/seed42"
    with pytest.raises(SystemExit):
        with logged_to(tmp_path / "train.log", label, failure_record=record, run="1:2"):
            st.load_state(state_dir, FINGERPRINT)
    line = capsys.readouterr().err.strip()
    assert "\n" not in line and line.startswith(f"contrastlab: {label}: SnapshotUnreadableError: ")
    assert f"the snapshot {state_dir / st.STATE_FILE} cannot be read" in line and "truncated" in line
    assert f"delete the cell's state folder {state_dir} to restart the cell" in line
    assert json.loads(record.read_text())["retry_can_help"] is False
    observed(line)


@pytest.mark.parametrize("content", [b"", b"not a snapshot at all", "tensor"])
def test_an_empty_foreign_or_non_dict_snapshot_is_named_with_its_fix(tmp_path, content):
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    if content == "tensor":
        torch.save(torch.zeros(2), state_dir / st.STATE_FILE)
    else:
        (state_dir / st.STATE_FILE).write_bytes(content)
    refused(state_dir)


# ------------------------------------------------- the CUDA RNG: the run's own device only (review C2)


class FakeCuda:
    """``gpus`` CUDA generators for a CPU (the ``torch.cuda`` calls of RNG capture and restore), each a
    distinct byte tensor; an index the machine lacks fails as CUDA does ("invalid device ordinal")."""

    NAMES = ("is_available", "is_initialized", "device_count", "current_device", "get_rng_state",
             "set_rng_state", "get_rng_state_all", "set_rng_state_all")  # fmt: skip

    def __init__(self, monkeypatch, gpus: int) -> None:
        self.gpus = gpus
        self.states = {i: torch.full((8,), 10 * gpus + i, dtype=torch.uint8) for i in range(gpus)}
        for name in self.NAMES:
            monkeypatch.setattr(torch.cuda, name, getattr(self, name))

    def is_available(self) -> bool:
        return self.gpus > 0

    def is_initialized(self) -> bool:
        return True

    def device_count(self) -> int:
        return self.gpus

    def current_device(self) -> int:
        return 0

    def _index(self, device) -> int:
        index = device if isinstance(device, int) else torch.device(device).index
        index = 0 if index is None else index
        if index >= self.gpus:
            raise RuntimeError(
                f"CUDA error: invalid device ordinal (cuda:{index} on a {self.gpus}-GPU machine)"
            )
        return index

    def get_rng_state(self, device="cuda") -> torch.Tensor:
        return self.states[self._index(device)].clone()

    def set_rng_state(self, state, device="cuda") -> None:
        self.states[self._index(device)] = state.clone()

    def get_rng_state_all(self) -> list[torch.Tensor]:
        return [self.get_rng_state(i) for i in range(self.gpus)]

    def set_rng_state_all(self, states) -> None:
        for i, state in enumerate(states):
            self.set_rng_state(state, i)


def test_a_snapshot_keeps_its_devices_rng_only_and_resumes_on_a_one_gpu_machine(tmp_path, monkeypatch):
    """A cuda:1 run stores cuda:1's generator only and resumes with it on another machine's one GPU."""
    snapshot = plain_snapshot()  # its optimiser step before torch.cuda is stubbed
    two = FakeCuda(monkeypatch, gpus=2)
    rng = st.capture_rng(torch.device("cuda", 1))
    assert isinstance(rng["cuda"], torch.Tensor) and torch.equal(rng["cuda"], two.states[1])
    st.save_state(tmp_path, {**snapshot, "rng": rng}, {"step": 4})

    one = FakeCuda(monkeypatch, gpus=1)
    st.restore_rng(st.load_state(tmp_path, FINGERPRINT)["rng"], torch.device("cuda", 0))
    assert torch.equal(one.states[0], two.states[1])


def test_an_older_snapshot_with_every_gpus_rng_resumes_with_its_devices(monkeypatch):
    """An older per-GPU list: the run's device index's state, or the first where the list is shorter."""
    old = [torch.full((8,), v, dtype=torch.uint8) for v in (70, 71)]
    rng = {**st.capture_rng(torch.device("cpu")), "cuda": old}
    one = FakeCuda(monkeypatch, gpus=1)
    st.restore_rng(rng, torch.device("cuda", 0))
    assert torch.equal(one.states[0], old[0])
    two = FakeCuda(monkeypatch, gpus=2)
    st.restore_rng(rng, torch.device("cuda", 1))
    assert torch.equal(two.states[1], old[1])
    assert torch.equal(two.states[0], torch.full((8,), 20, dtype=torch.uint8))
    four = FakeCuda(monkeypatch, gpus=4)
    st.restore_rng(rng, torch.device("cuda", 3))  # written on a 2-GPU machine: its first GPU's
    assert torch.equal(four.states[3], old[0])


def test_a_cpu_run_keeps_no_cuda_rng_even_where_cuda_is_initialised(monkeypatch):
    machine = FakeCuda(monkeypatch, gpus=2)
    rng = st.capture_rng(torch.device("cpu"))
    assert "cuda" not in rng
    st.restore_rng({**rng, "cuda": [torch.zeros(8, dtype=torch.uint8)] * 2}, torch.device("cpu"))
    assert torch.equal(machine.states[0], torch.full((8,), 20, dtype=torch.uint8))  # left alone


def test_the_trainer_snapshots_and_restores_its_own_devices_rng(tmp_path, monkeypatch):
    """TrainingRun.save_snapshot and begin hand the state functions the run's device (cuda:1 here)."""
    FakeCuda(monkeypatch, gpus=2)
    run = TrainingRun(tmp_path / "state", device="cpu", precision="fp32", state_every=None, progress=False)
    run.begin(None, {}, {"settings": {}})
    run.device = torch.device("cuda", 1)  # as if placed there (a CPU cannot hold CUDA tensors: the
    monkeypatch.setattr(run, "_interval", lambda *_: None)  # log interval's device scalars are left out)
    seen = []
    capture, restore = st.capture_rng, st.restore_rng
    monkeypatch.setattr(st, "capture_rng", lambda *args: seen.append(("capture", *args)) or capture(*args))
    monkeypatch.setattr(
        st, "restore_rng", lambda *args: seen.append(("restore", *args[1:])) or restore(*args)
    )
    run.save_snapshot(2, FINGERPRINT, {}, {})
    rng = capture(run.device)
    saved = {"scaler": run.scaler.state_dict(), "timings": {}, "resumed_from": [], "step": 2,
             "interval": (0.0, 0, 0), "log_offset": 0, "rng": rng}  # fmt: skip
    assert run.begin(saved, {}, {}) == 2
    assert seen == [("capture", torch.device("cuda", 1)), ("restore", torch.device("cuda", 1))]
