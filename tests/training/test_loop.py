"""The shared training loop (training.loop) on a toy track: its cadences, its batches and its resume."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from contrastlab.training import loop
from contrastlab.training import state as st
from contrastlab.training.runtime import NonFiniteLossError, TrainingRun


class ToyTrack(loop.Track):
    """A linear layer on rows numbered by epoch (epoch e's order: 100 e + 0..7, four steps of two)."""

    items = "toys"

    def __init__(self, run: TrainingRun, total: int, *, nan_at: int | None = None) -> None:
        torch.manual_seed(0)
        self.run, self.total, self.steps_per_epoch, self.nan_at = run, total, 4, nan_at
        self.s = SimpleNamespace(loss="toy", loss_hp={"p": 1}, batch_size=2, log_every=3, to_dict=dict)
        self.model = torch.nn.Linear(1, 1)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)
        self.stateful = {"model": self.model, "optimizer": self.optimizer}
        self.fingerprint, self.desc = "toy", "toy"
        self.trained, self.calls, self.restored = [], [], None
        self.evaluations = [
            loop.Evaluation(4, lambda step, epoch: self.calls.append(("dev", step, epoch)), at_start=True),
            loop.Evaluation(5, lambda step, epoch: self.calls.append(("probe", step, epoch))),
        ]

    def loss_fn(self, h1, h2, with_stats=False):
        return SimpleNamespace(loss=(h1 - h2).pow(2).mean(), stats={"gap": 1.0})

    def epoch(self, epoch: int) -> np.ndarray:
        return np.arange(8) + 100 * epoch

    def lr(self, logging: bool) -> float:
        return self.optimizer.param_groups[0]["lr"]

    def step(self, step: int, rows, logging: bool) -> loop.StepOutput:
        self.trained.append(rows.tolist())
        h1 = self.model(torch.tensor(rows, dtype=torch.float32)[:, None] / 100)
        h2 = torch.zeros_like(h1) * (float("nan") if step == self.nan_at else 1.0)
        out = self.loss_fn(h1, h2)
        out.loss.backward()
        grad_norm = self.run.optimizer_step(self.optimizer, list(self.model.parameters()), 1.0)
        return loop.StepOutput(out, h1.detach(), h2, out.loss.detach(), grad_norm, len(rows))

    def stats(self, result: loop.StepOutput) -> dict:
        return dict(result.out.stats)

    def snapshot(self) -> dict:
        return {"extra": {"calls": list(self.calls)}, "info": {"toy": True}}

    def restore(self, saved) -> None:
        self.restored = saved["calls"]


def _run(folder, state_every=4) -> TrainingRun:
    return TrainingRun(folder, device="cpu", precision="fp32", state_every=state_every, progress=False)


def _events(folder) -> list[tuple]:
    records = [json.loads(line) for line in (folder / st.LOG_FILE).read_text().splitlines()]
    return [(r["event"], r.get("step")) for r in records]


def test_the_loop_trains_each_batch_and_logs_evaluates_and_snapshots_at_their_cadences(tmp_path):
    """A record: its step's ``loss_last``, ``grad_norm``; ``loss`` the mean since the last (3, 3, 3, 1)."""
    run = _run(tmp_path / "state")
    track = ToyTrack(run, total=10)
    taken, real_step = {}, track.step

    def step(number, rows, logging):
        result = real_step(number, rows, logging)
        taken[number] = (result.loss.item(), None if result.grad_norm is None else result.grad_norm.item())
        return result

    track.step = step
    start = loop.begin(run, track, None, {"cell": "toy"}, ["a note"])
    loop.train_steps(run, track, start)
    run.wait_for_snapshot()
    assert start == 0 and track.trained[:5] == [[0, 1], [2, 3], [4, 5], [6, 7], [100, 101]]
    # dev every 4 steps, the probe every 5, both at the last step; only dev at step 0 (at_start)
    calls = [("dev", 0, 0), ("dev", 4, 0), ("probe", 5, 1), ("dev", 8, 1), ("dev", 10, 2), ("probe", 10, 2)]
    assert track.calls == calls
    events = [("start", None), ("note", None), ("train", 3), ("train", 6), ("train", 9), ("train", 10)]
    assert _events(tmp_path / "state") == events
    lines = [json.loads(line) for line in (tmp_path / "state" / st.LOG_FILE).read_text().splitlines()]
    assert lines[0]["cell"] == "toy" and lines[0]["settings"] == {} and "meta" in lines[0]
    assert [r["epoch"] for r in lines[2:]] == [0, 1, 2, 2] and lines[2]["stats"] == {"gap": 1.0}
    assert list(lines[2])[-2:] == ["steps_per_s", "toys_per_s"]
    info = json.loads((tmp_path / "state" / st.STATE_INFO).read_text())
    assert info["step"] == 8 and info["toy"] is True  # every 4 steps, never at the last one
    records, first = lines[2:], 1
    assert sorted(taken) == list(range(1, 11))
    for record in records:
        losses = [taken[s][0] for s in range(first, record["step"] + 1)]
        assert record["loss"] == pytest.approx(sum(losses) / len(losses), rel=1e-6)
        assert record["loss_last"] == pytest.approx(taken[record["step"]][0], rel=1e-6)
        assert record["grad_norm"] == pytest.approx(taken[record["step"]][1], rel=1e-6)
        first = record["step"] + 1
    assert len({r["loss"] for r in records}) == 4 and records[0]["loss"] != records[0]["loss_last"]


def test_a_resumed_loop_takes_up_the_snapshot_and_runs_no_step_0_evaluation(tmp_path):
    first = _run(tmp_path / "state")
    track = ToyTrack(first, total=6)
    loop.train_steps(first, track, loop.begin(first, track, None, {}, []))
    first.wait_for_snapshot()
    weights = track.model.weight.detach().clone()

    again = _run(tmp_path / "state")
    resumed = ToyTrack(again, total=6)
    start = loop.begin(again, resumed, again.load_snapshot("toy"), {}, [])
    assert start == 4 and [tuple(call) for call in resumed.restored] == [("dev", 0, 0), ("dev", 4, 0)]
    loop.train_steps(again, resumed, start)
    assert resumed.trained == [[100, 101], [102, 103]]
    assert resumed.calls == [("probe", 5, 1), ("dev", 6, 1), ("probe", 6, 1)]
    assert torch.equal(resumed.model.weight, weights)  # the same steps again: the same weights
    assert _events(tmp_path / "state") == [("start", None), ("train", 3), ("resume", 4), ("train", 6)]


def test_a_non_finite_loss_stops_the_loop_naming_the_track_s_loss(tmp_path):
    run = _run(tmp_path / "state")
    track = ToyTrack(run, total=10, nan_at=2)
    with pytest.raises(NonFiniteLossError, match=r"loss 'toy' \(hp \{\"p\": 1\}\) is not finite at step 2"):
        loop.train_steps(run, track, loop.begin(run, track, None, {}, []))


def test_a_fingerprint_is_the_settings_and_the_run_s_identity():
    settings = SimpleNamespace(to_dict=lambda: {"lr": 0.1, "compile": False})
    at_default, later = SimpleNamespace(to_dict=lambda: {"lr": 0.1}), {"compile": False}
    assert loop.fingerprint(settings, later, 3, "x") == loop.fingerprint(at_default, later, 3, "x")
    assert loop.fingerprint(settings, {}, 3, "x") != loop.fingerprint(settings, {}, 4, "x")
