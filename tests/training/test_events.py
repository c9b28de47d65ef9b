"""TensorBoard events of a training cell (training.events): the curves, a killed cell's resumed curves,
write failures that do not fail the cell, the switch, and a real TensorBoard server over the files."""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
import torch
import yaml
from torch.utils.tensorboard import SummaryWriter

from contrastlab.paths import REPO_ROOT, Results
from contrastlab.training.events import (
    TensorBoardLog,
    headline_test_scores,
    log_test_scores,
    scalars,
    write_test_scores,
)
from contrastlab.training.vision import VisionTrainSettings, load_weights
from tests import forked
from tests.make_command import make_command, make_env

RUNNER = Path(__file__).with_name("_run_vision.py")
# Over the tiny image cell (vision_settings), a cell with every kind of record: train lines every 3 steps,
# snapshots every 5, and a validation loss at the end of each 11-step epoch (0.75 of the digits held out:
# 359 training images, batch 32).
CELL = {"max_steps": 16, "val_fraction": 0.75, "keep": "best_val_loss"}
TIMING_TAGS = ("train/steps_per_s", "train/images_per_s", "train/ms_per_step")
# The killed run: the runner's own, with every event written through to its file at once, so that the
# steps after the snapshot are on disk when it dies (the resume must drop them).
KILLED = f"""
import runpy, sys
from contrastlab.paths import REPO_ROOT
from contrastlab.training.events import TensorBoardLog
write = TensorBoardLog.write
TensorBoardLog.write = lambda self, record: (write(self, record), self.flush())
sys.argv = sys.argv[1:]
runpy.run_path({str(RUNNER)!r}, run_name="__main__")
"""


@pytest.fixture(scope="module")
def reference(tmp_path_factory, vision_settings, train_image) -> Path:
    workdir = tmp_path_factory.mktemp("reference")
    train_image(vision_settings(**CELL), workdir)
    return workdir


def test_log_records_become_scalars_at_their_steps():
    train = {"event": "train", "step": 6, "epoch": 0, "loss": 2.5, "lr": 1e-3, "grad_norm": 0.5}
    train |= {"loss_scale": 65536.0, "skipped_steps": 1, "steps_per_s": 4.0, "stats": {"gd_active": 0.25}}
    assert scalars(train) == {
        "train/loss": 2.5,
        "train/lr": 1e-3,
        "train/grad_norm": 0.5,
        "train/loss_scale": 65536.0,
        "train/skipped_steps": 1.0,
        "train/steps_per_s": 4.0,
        "train/stats/gd_active": 0.25,
        "train/ms_per_step": 250.0,
    }
    dev = {"event": "eval", "step": 4, "dev_task": "STSBenchmark", "dev_spearman": 60.0, "dev_align": 0.3}
    dev_scalars = scalars(dev | {"best_dev_spearman": 61.0, "best_step": 2})
    assert dev_scalars == {"dev/spearman": 60.0, "dev/align": 0.3, "dev/best_dev_spearman": 61.0}
    probe = {"event": "geometry", "step": 5, "probe_sentences": 64, "probe_heldout": False, "align": 0.2}
    probe |= {"ratio": {"met": 1.5}, "hist": {"pos": [1, 2]}, "dev_l_cl": 3.0}
    assert scalars(probe) == {"probe/align": 0.2, "probe/ratio/met": 1.5, "probe/dev_l_cl": 3.0}
    assert scalars({"event": "val", "step": 11, "epoch": 0, "val_loss": 4.0}) == {"val/loss": 4.0}
    assert scalars({"event": "start", "settings": {"lr": 1.0}}) == {}
    assert scalars({"event": "resume", "step": 5}) == {}


def _killed_run(folder: Path) -> None:
    """The events of a run in ``folder`` that wrote the losses of steps 1-10, then died (never closed)."""
    killed = TensorBoardLog(folder)
    killed.start(resume_step=None)
    for step in range(1, 11):
        killed.write({"event": "train", "step": step, "loss": float(step)})
    killed.flush()


def test_a_resumed_writer_keeps_the_steps_up_to_its_snapshot_and_only_those(tmp_path, read_curves):
    _killed_run(tmp_path)
    resumed = TensorBoardLog(tmp_path)
    resumed.start(resume_step=4)  # its snapshot: step 4
    for step in range(5, 9):
        resumed.write({"event": "train", "step": step, "loss": 100.0 + step})
    resumed.close()
    expected = [(s, float(s)) for s in range(1, 5)] + [(s, 100.0 + s) for s in range(5, 9)]
    assert read_curves(tmp_path)["train/loss"] == expected
    assert len(list(tmp_path.glob("events.out.tfevents.*"))) == 1  # readers without purges agree
    fresh = TensorBoardLog(tmp_path)
    fresh.start(resume_step=None)  # a fresh start of the cell starts its curves over
    fresh.write({"event": "train", "step": 3, "loss": 7.0})
    fresh.close()
    assert read_curves(tmp_path) == {"train/loss": [(3, 7.0)]}


def _records(path: Path) -> list[tuple[int, int]]:
    """(start, end) byte offsets of each TFRecord of an event file (a u64 length, its crc, the data, its
    crc)."""
    data, at, found = path.read_bytes(), 0, []
    while at < len(data):
        end = at + 12 + int.from_bytes(data[at : at + 8], "little") + 4
        found.append((at, end))
        at = end
    return found


def _damage(path: Path, how: str) -> None:
    data = bytearray(path.read_bytes())
    if how == "every 97th byte flipped":  # as reliability review L2 did it
        for at in range(0, len(data), 97):
            data[at] ^= 0xFF
    elif how == "one byte of step 5's record flipped":
        start, end = _records(path)[5]  # record 0 is the file's version, then one per step
        data[(start + end) // 2] ^= 0x01
    else:  # a killed writer's last record, cut short: no step up to the snapshot is in it
        data = data[: _records(path)[-1][0] + 20]
    path.write_bytes(bytes(data))


_DAMAGED = pytest.mark.fault(
    "the event file of a killed run damaged (bytes flipped) before its resume (L2)",
    "one warning line naming the file and the steps lost; the resumed curves go on",
)


@pytest.mark.parametrize(
    ("how", "warning", "kept"),
    [
        pytest.param(
            "every 97th byte flipped",
            "is damaged at byte 0 (a record fails its crc32 check): its steps up to 8 are lost from the "
            "curves; the resumed run writes from step 9",
            [],
            marks=_DAMAGED,
        ),
        pytest.param(
            "one byte of step 5's record flipped",
            "is damaged at byte {byte} (a record fails its crc32 check): its steps 5-8 are lost from the "
            "curves; the resumed run writes from step 9",
            [1, 2, 3, 4],
            marks=_DAMAGED,
        ),
        ("last record cut short", None, [1, 2, 3, 4, 5, 6, 7, 8]),  # a kill's: nothing lost, no warning
    ],
)
def test_a_damaged_event_file_is_one_warning_naming_the_steps_lost(
    tmp_path, read_curves, caplog, observed, how, warning, kept
):
    _killed_run(tmp_path)  # its snapshot was step 8
    (damaged,) = tmp_path.glob("events.out.tfevents.*")
    byte = _records(damaged)[5][0]
    _damage(damaged, how)
    resumed = TensorBoardLog(tmp_path)
    with caplog.at_level(logging.WARNING, logger="contrastlab.training.events"):
        resumed.start(resume_step=8)
        for step in range(9, 13):
            resumed.write({"event": "train", "step": step, "loss": 100.0 + step})
        resumed.close()
    warnings = [r.getMessage() for r in caplog.records if r.name == "contrastlab.training.events"]
    observed(warnings[0] if warnings else "no warning")
    expected = [] if warning is None else [f"TensorBoard events file {damaged} {warning.format(byte=byte)}"]
    assert warnings == expected
    assert read_curves(tmp_path)["train/loss"] == [(s, float(s)) for s in kept] + [
        (s, 100.0 + s) for s in range(9, 13)
    ]


def test_a_cell_writes_its_curves_at_the_log_points(reference, read_curves):
    summary = json.loads((reference / "encoder" / "settings.json").read_text())
    assert summary["events_dir"] == str(reference / "state.tensorboard")
    curves = read_curves(reference / "state.tensorboard")
    log_steps = [3, 6, 9, 12, 15, 16]
    for tag in ("train/loss", "train/lr", "train/grad_norm", "train/images_per_s", "train/ms_per_step"):
        assert [step for step, _ in curves[tag]] == log_steps, tag
    assert {"train/stats/align", "train/stats/tau_a", "train/stats/weight_mean"} <= set(curves)
    assert [step for step, _ in curves["val/loss"]] == [11, 16]
    lines = [json.loads(line) for line in (reference / "train_log.jsonl").read_text().splitlines()]
    assert [v for _, v in curves["train/loss"]] == pytest.approx([r["loss"] for r in lines if "loss" in r])


def test_a_sentence_cell_writes_its_settings_beside_its_best_dev_score_as_hparams(
    tmp_path, train_tiny, read_curves
):
    """The HParams session holds the cell's settings; the last ``dev/best_dev_spearman`` is the summary's."""
    from contrastlab.training.sentence import TrainSettings

    summary = train_tiny(tmp_path, max_steps=4, eval_every=2, log_every=2, state_every=None)
    folder = tmp_path / "state.tensorboard"
    [(step, values)] = _sessions(folder)  # the HParams plugin's only tag
    assert step == 0
    assert set(values) == set(TrainSettings(loss="infonce").to_dict())  # every setting a column
    wanted = {"loss": "infonce", "lr": 1e-4, "batch_size": 32, "max_steps": 4, "eval_every": 2}
    wanted |= {"log_every": 2, "tensorboard": True, "state_every": "null", "loss_hp": "{}"}
    assert {key: values[key] for key in wanted} == wanted
    best = read_curves(folder)["dev/best_dev_spearman"]
    assert [step for step, _ in best] == [2, 4]
    assert best[-1][1] == pytest.approx(summary["best_dev_spearman"], rel=1e-6)


# A sentence cell's metrics file, as far as its test scores go, and the cell's wildcards.
SENTENCE_METRICS = {"scores": {"STS12": 70.0, "MR": 80.0}, "sts_avg": 76.25, "tr_avg": 81.5}
PLACE = {"experiment": "nie2023", "backbone": "tiny-bert", "method": "infonce", "seed": "42"}


def _trained_run(results: Path) -> Path:
    """The TensorBoard run folder of :data:`PLACE` under ``results`` as its training leaves it: the
    HParams session, a train and a dev record at step 25."""
    folder = results / "tensorboard" / "nie2023" / "tiny-bert" / "infonce" / "seed42"
    events = TensorBoardLog(folder, {"loss": "infonce", "lr": 3e-05})
    events.start(resume_step=None)
    events.write({"event": "train", "step": 25, "loss": 1.5})
    events.write({"event": "eval", "step": 25, "dev_spearman": 61.5, "best_dev_spearman": 61.5})
    events.close()
    return folder


def test_the_evaluation_writes_the_test_scores_into_the_cells_run_once_per_evaluation(tmp_path, read_curves):
    """Test scores join the run folder at its last step; another evaluation replaces them, training's stay."""
    folder, results = _trained_run(tmp_path), Results(tmp_path)
    logged = log_test_scores(SENTENCE_METRICS, PLACE, results, None)
    assert logged == {"test/sts_avg": 76.25, "test/tr_avg": 81.5}
    curves = read_curves(folder)
    assert (curves["test/sts_avg"], curves["test/tr_avg"]) == ([(25, 76.25)], [(25, 81.5)])
    rerun = log_test_scores(SENTENCE_METRICS | {"sts_avg": 77.0, "tr_avg": None}, PLACE, results, None)
    assert rerun == {"test/sts_avg": 77.0}
    curves = read_curves(folder)
    assert curves["test/sts_avg"] == [(25, 77.0)] and "test/tr_avg" not in curves
    assert len(list(folder.glob("events.out.tfevents.*.test"))) == 1
    assert (curves["train/loss"], curves["dev/best_dev_spearman"]) == ([(25, 1.5)], [(25, 61.5)])
    assert [step for step, _ in _sessions(folder)] == [0]


def test_test_scores_go_only_to_a_run_that_has_a_session(tmp_path):
    """No events without a run folder or a cell; an image cell's scores are its probes' top-1 accuracies."""
    results = Results(tmp_path)
    assert log_test_scores(SENTENCE_METRICS, {"backbone": "tiny-bert"}, results, None) == {}
    assert write_test_scores(tmp_path / "tensorboard" / "nie2023", {"test/sts_avg": 76.25}) is False
    logged = log_test_scores(SENTENCE_METRICS, PLACE, results, None)
    assert logged == {"test/sts_avg": 76.25, "test/tr_avg": 81.5}
    assert not (tmp_path / "tensorboard").exists()
    vision = {"scores": {"linear_top1": 88.5, "knn_top1": 85.0, "ffn10_top1": 60.0, "ffn10_top5": 90.0}}
    vision["scores"] |= {"embedding_variance": 0.25, "effective_rank_95": 12.0}
    headline = headline_test_scores(vision)
    assert headline == {"test/linear_top1": 88.5, "test/knn_top1": 85.0, "test/ffn10_top1": 60.0}


@pytest.mark.fault(
    "SIGKILL of a cell that writes TensorBoard events", "its curves equal an uninterrupted run's"
)
def test_a_killed_and_resumed_cell_has_the_curves_of_an_uninterrupted_one(
    tmp_path, reference, read_curves, observed, vision_settings, train_image
):
    cell = json.dumps(vision_settings(**CELL))
    killed = forked.start(KILLED, [str(RUNNER), cell, str(tmp_path), "13"], tmp_path / "run.log")
    killed.join(timeout=300)
    assert killed.exitcode == -9  # killed after step 13: snapshot of step 10
    before = read_curves(tmp_path / "state.tensorboard")
    assert max(step for step, _ in before["train/loss"]) == 12 and before["val/loss"][-1][0] == 11
    train_image(vision_settings(**CELL), tmp_path)  # resumes from step 10: writes 11-16 again
    resumed = read_curves(tmp_path / "state.tensorboard")
    straight = read_curves(reference / "state.tensorboard")
    assert resumed.keys() == straight.keys()
    for tag in straight:
        assert [s for s, _ in resumed[tag]] == [s for s, _ in straight[tag]], tag
        if tag not in TIMING_TAGS:  # and the values: a resumed CPU run is bit-identical
            assert resumed[tag] == straight[tag], tag
    assert len(list((tmp_path / "state.tensorboard").glob("events.out.tfevents.*"))) == 1
    assert _sessions(tmp_path / "state.tensorboard") == _sessions(reference / "state.tensorboard")
    assert len(_sessions(reference / "state.tensorboard")) == 1  # the fresh start's, kept once
    observed("killed after step 13 (on disk up to 12), resumed from 10: every tag's steps and values equal")


def _sessions(folder: Path) -> list[tuple[int, dict]]:
    """The HParams sessions of a run folder, read by TensorBoard's own loader and hparams metadata:
    [(step, {setting: value}), ...]; the session is the plugin's only tag."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import metadata

    accumulator = EventAccumulator(str(folder), size_guidance={"tensors": 0})
    accumulator.Reload()
    contents = accumulator.PluginTagToContent(metadata.PLUGIN_NAME)
    assert list(contents) == [metadata.SESSION_START_INFO_TAG]
    session = metadata.parse_session_start_info_plugin_data(contents[metadata.SESSION_START_INFO_TAG])
    values = {name: getattr(value, value.WhichOneof("kind")) for name, value in session.hparams.items()}
    return [(event.step, values) for event in accumulator.Tensors(metadata.SESSION_START_INFO_TAG)]


def _hparams_experiment(port: int) -> dict:
    """What the HParams view of the TensorBoard on ``port`` shows: its plugin's experiment answer."""
    request = urllib.request.Request(
        f"http://localhost:{port}/data/plugin/hparams/experiment",
        data=json.dumps({"experimentName": ""}).encode(),
        headers={"Content-Type": "application/json", "X-XSRF-Protected": "1"},
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.loads(answer.read())


AS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
FAULTS = (
    pytest.param("read-only folder", marks=pytest.mark.skipif(AS_ROOT, reason="root writes into it")),
    "folder under a file",  # cannot be made, even by root
    "add_scalar raises",
)


def _inject(fault: str, tmp: Path, monkeypatch) -> Path:
    """Inject ``fault``; returns the events folder the cell is given."""
    if fault == "read-only folder":
        (tmp / "tb").mkdir()
        (tmp / "tb").chmod(0o555)
        return tmp / "tb"
    if fault == "folder under a file":
        (tmp / "file").write_text("")
        return tmp / "file" / "tb"

    def disk_full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(SummaryWriter, "add_scalar", disk_full)
    return tmp / "tb"


@pytest.mark.fault("TensorBoard folder unwritable or a write error", "one warning line; the cell trains on")
@pytest.mark.parametrize("fault", FAULTS)
def test_events_that_cannot_be_written_are_one_warning_and_the_cell_trains(
    tmp_path, reference, fault, monkeypatch, caplog, observed, vision_settings, train_image
):
    events_dir = _inject(fault, tmp_path, monkeypatch)
    with caplog.at_level(logging.WARNING, logger="contrastlab.training.events"):
        train_image(vision_settings(**CELL), tmp_path / "cell", events_dir=events_dir)
    warnings = [r.getMessage() for r in caplog.records if r.name == "contrastlab.training.events"]
    assert len(warnings) == 1 and "\n" not in warnings[0] and "training goes on" in warnings[0]
    got, expected = load_weights(tmp_path / "cell" / "encoder"), load_weights(reference / "encoder")
    assert all(torch.equal(got[k], expected[k]) for k in expected)  # the same cell, trained to its end
    what = re.search(r"events (cannot \w+) .* \((\w+):", warnings[0]).groups()
    observed(f"one warning ({what[0]}: {what[1]}); encoder equal to the reference")


def test_tensorboard_false_writes_no_events(tmp_path, vision_settings, train_image):
    summary = train_image(vision_settings(**CELL | {"max_steps": 3, "tensorboard": False}), tmp_path)
    assert summary["events_dir"] is None and not (tmp_path / "state.tensorboard").exists()
    with pytest.raises(ValueError, match="tensorboard must be true or false"):
        VisionTrainSettings(tensorboard="no")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.slow  # a real TensorBoard server, started by make monitor: CI's make test, not test-fast
def test_make_monitor_serves_the_presets_cell_folders(tmp_path):
    """``make monitor`` serves the preset's cell folders by path, HParams with the scores as metrics."""
    config = yaml.safe_load((REPO_ROOT / "config" / "demo.yaml").read_text())
    config["results_dir"] = str(tmp_path / "results")
    configfile = tmp_path / "c.yaml"
    configfile.write_text(yaml.safe_dump(config, sort_keys=False))
    cell = _trained_run(tmp_path / "results")
    assert write_test_scores(cell, {"test/sts_avg": 76.25, "test/tr_avg": 81.5})  # the evaluation's
    port = _free_port()
    # the monitor recipe is under test, not the install (CI installed before the suite): make_command's -o
    server = subprocess.Popen(
        make_command("-s", "monitor", f"CONFIG={configfile}", f"PORT={port}"),
        cwd=REPO_ROOT,
        env=make_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        runs, deadline = [], time.monotonic() + 90
        while "nie2023/tiny-bert/infonce/seed42" not in runs:
            assert server.poll() is None, f"make monitor exited: {server.stdout.read()[-2000:]}"
            assert time.monotonic() < deadline, f"no run listed in time (last answer {runs})"
            time.sleep(0.5)
            try:
                with urllib.request.urlopen(f"http://localhost:{port}/data/runs", timeout=5) as answer:
                    runs = json.loads(answer.read())
            except OSError:  # not listening yet
                continue
        experiment = _hparams_experiment(port)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
    # the HParams view: the cell's settings as columns, its scalars' final values (test scores too) as metrics
    assert [(info["name"], info["type"]) for info in experiment["hparamInfos"]] == [
        ("loss", "DATA_TYPE_STRING"),
        ("lr", "DATA_TYPE_FLOAT64"),
    ]
    metrics = [info["name"]["tag"] for info in experiment["metricInfos"]]
    assert sorted(metrics) == [
        "dev/best_dev_spearman",
        "dev/spearman",
        "test/sts_avg",
        "test/tr_avg",
        "train/loss",
    ]
    assert f"TensorBoard over {tmp_path / 'results'}/tensorboard: http://localhost:{port}/" in (
        server.stdout.read()
    )
