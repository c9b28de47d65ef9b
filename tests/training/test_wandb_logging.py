"""W&B logging of a cell (training.events' WandbRun/WandbLog) in offline mode: one run per cell with its
settings, curves and test scores; wandb imported only with the key, and the key without wandb refused."""

from __future__ import annotations

import importlib.util
import json
import logging
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from contrastlab import config as cl_config
from contrastlab.paths import REPO_ROOT
from contrastlab.training.events import WandbRun
from contrastlab.training.vision import VisionTrainSettings
from contrastlab.workflow.job import log_job_test_scores, wandb_run_of

PROJECT = "contrastlab-offline"
PLACE = {"experiment": "macl2025", "backbone": "digits-resnet", "method": "macl", "seed": "42"}
# The tiny image cell with its validation loss (0.75 of the digits held out: an 11-step epoch).
CELL = {"max_steps": 12, "val_fraction": 0.75, "keep": "best_val_loss"}
BLOCK = 32768  # the .wandb file's block size (the LevelDB log format, which wandb-core writes)


def job(config: dict, place: dict = PLACE) -> SimpleNamespace:
    """A cell's Snakemake job as its script sees it: the run's config and the job's wildcards."""
    return SimpleNamespace(config=config, wildcards=place)


def wandb_records(path: Path) -> list:
    """The records of a ``.wandb`` file (``wandb.proto.wandb_internal_pb2.Record``): a 7-byte header
    (``:W&B``, magic, version), then blocks of 32 KiB holding chunks, each with a 7-byte header (checksum,
    little-endian length, type: 1 full, 2 first, 3 middle, 4 last); a block's tail too short for a chunk
    header is padding."""
    from wandb.proto.wandb_internal_pb2 import Record

    data = path.read_bytes()
    assert data[:4] == b":W&B"
    records, position, pending = [], 7, b""
    while position + 7 <= len(data):
        if BLOCK - position % BLOCK < 7:
            position += BLOCK - position % BLOCK
            continue
        length, kind = int.from_bytes(data[position + 4 : position + 6], "little"), data[position + 6]
        pending += data[position + 7 : position + 7 + length]
        position += 7 + length
        if kind in (1, 4):
            records.append(Record.FromString(pending))
            pending = b""
    return records


def _items(items) -> dict:
    """A record's items as {key: value}: the key is ``key`` or, as wandb-core writes it, ``nested_key``."""
    return {item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in items}


def offline_runs(wandb_dir: Path) -> list[dict]:
    """Each offline run under ``wandb_dir``, in the order written: its id, name and project, its config,
    its history ({key: [(step, value), ...]}) and its last summary values."""
    runs = []
    for path in sorted(wandb_dir.glob("wandb/offline-run-*/run-*.wandb")):
        run = {"config": {}, "history": {}, "summary": {}}
        for record in wandb_records(path):
            kind = record.WhichOneof("record_type")
            if kind == "run":
                run |= {"id": record.run.run_id, "name": record.run.display_name}
                run |= {"project": record.run.project}
                run["config"] |= _items(record.run.config.update)
            elif kind == "config":
                run["config"] |= _items(record.config.update)
            elif kind == "history":
                row = _items(record.history.item)
                for key, value in row.items():
                    run["history"].setdefault(key, []).append((row["_step"], value))
            elif kind == "summary":
                run["summary"] |= _items(record.summary.update)
        run["config"].pop("_wandb", None)  # wandb's own
        runs.append(run)
    return runs


def test_a_cell_logs_its_settings_curves_and_test_scores_to_one_offline_wandb_run(
    tmp_path, monkeypatch, vision_settings, train_image
):
    """Training (``WANDB_DIR`` unset) and evaluation (set) write one run, by its id."""
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.delenv("WANDB_DIR", raising=False)
    config = {"results_dir": str(tmp_path / "results"), "logging": {"wandb": PROJECT}}
    run = wandb_run_of(job(config))
    assert (run.project, run.name) == (PROJECT, "macl2025/digits-resnet/macl/seed42")
    same, other = (wandb_run_of(job(config, place)).id for place in (dict(PLACE), PLACE | {"seed": "43"}))
    assert run.id == same != other
    settings = vision_settings(**CELL)
    import wandb

    train_image(settings, tmp_path / "cell", wandb_run=run)
    wandb.teardown()  # the training job's process ends: wandb's service writes its files out
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "elsewhere"))
    log_job_test_scores(job(config), {"scores": {"linear_top1": 88.5, "effective_rank_95": 12.0}})
    wandb.teardown()  # and the evaluation job's

    [training], [evaluation] = offline_runs(tmp_path / "results"), offline_runs(tmp_path / "elsewhere")
    identity = (run.id, run.name, PROJECT)
    assert [(r["id"], r["name"], r["project"]) for r in (training, evaluation)] == [identity] * 2
    assert training["config"] == json.loads(json.dumps(VisionTrainSettings.from_dict(settings).to_dict()))
    lines = [json.loads(line) for line in (tmp_path / "cell" / "train_log.jsonl").read_text().splitlines()]
    losses = [(r["step"], r["loss"]) for r in lines if r["event"] == "train"]
    assert [step for step, _ in losses] == [3, 6, 9, 12]
    assert training["history"]["train/loss"] == losses
    vals = [(r["step"], r["val_loss"]) for r in lines if r["event"] == "val"]
    assert training["history"]["val/loss"] == vals and [step for step, _ in vals] == [11, 12]
    scores = {key: value for key, value in evaluation["summary"].items() if not key.startswith("_")}
    assert evaluation["config"] == {} and scores == {"test/linear_top1": 88.5}  # wandb's own: _runtime


@pytest.mark.fault("Weights & Biases cannot start a run", "one warning line; the cell trains and is scored")
def test_a_wandb_run_that_cannot_start_is_one_warning_and_the_cell_trains(
    tmp_path, monkeypatch, caplog, observed, vision_settings, train_image
):
    def offline_without_a_login(self, settings=None):
        raise OSError("api_key not configured (no-tty)\ncall wandb.login(key=[your_api_key])")

    monkeypatch.setattr(WandbRun, "init", offline_without_a_login)
    config = {"results_dir": str(tmp_path / "results"), "logging": {"wandb": PROJECT}}
    with caplog.at_level(logging.WARNING, logger="contrastlab.training.events"):
        summary = train_image(vision_settings(max_steps=3), tmp_path, wandb_run=wandb_run_of(job(config)))
        scores = log_job_test_scores(job(config), {"scores": {"linear_top1": 88.5}})
    assert summary["steps"] == 3 and (tmp_path / "encoder").is_dir() and scores == {"test/linear_top1": 88.5}
    reason = "(OSError: api_key not configured (no-tty) call wandb.login(key=[your_api_key]))"
    assert [r.getMessage() for r in caplog.records if r.name == "contrastlab.training.events"] == [
        f"Weights & Biases run cannot start macl2025/digits-resnet/macl/seed42 {reason}; training goes on",
        f"Weights & Biases run macl2025/digits-resnet/macl/seed42 got no test scores {reason}",
    ]
    observed("two one-line warnings (training, evaluation); the encoder written, the scores returned")


def test_without_the_key_wandb_is_never_imported(tmp_path):
    """A config without ``logging`` validates, trains and evaluates without importing wandb."""
    probe = f"""
import sys
from contrastlab import config as cl_config
from types import SimpleNamespace
from contrastlab.training.events import WandbLog
from contrastlab.workflow.job import log_job_test_scores, wandb_run_of
config = cl_config.load({str(REPO_ROOT / "config" / "demo.yaml")!r}, {{"results_dir": {str(tmp_path)!r}}})
job = SimpleNamespace(config=config, wildcards={PLACE!r})
assert wandb_run_of(job) is None
log = WandbLog(wandb_run_of(job), {{"lr": 0.1}})
log.start(resume_step=None)
log.write({{"event": "train", "step": 3, "loss": 1.5}})
log.close()
log_job_test_scores(job, {{"sts_avg": 76.25}})
print("wandb" in sys.modules)
"""
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["False"]


def test_the_key_is_checked_at_validation(monkeypatch):
    """No default (a config without it keeps its digest); an empty project or another key is refused; the
    key without the wandb package is one line naming the fix, before any job runs."""
    demo = REPO_ROOT / "config" / "demo.yaml"
    assert "logging" not in cl_config.load(demo)
    assert cl_config.load(demo, {"logging": {"wandb": PROJECT}})["logging"] == {"wandb": PROJECT}
    with pytest.raises(
        cl_config.ConfigError,
        match=r"^config key logging\.wandb: '' should be non-empty; give it at least 1 character$",
    ):
        cl_config.load(demo, {"logging": {"wandb": ""}})
    with pytest.raises(cl_config.ConfigError, match=r"^config key logging\.mlflow: unknown key"):
        cl_config.load(demo, {"logging": {"mlflow": PROJECT}})
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else find_spec(name, *a)
    )
    with pytest.raises(cl_config.ConfigError) as refused:
        cl_config.load(demo, {"logging": {"wandb": PROJECT}})
    assert str(refused.value) == (
        "config key logging.wandb: needs the wandb package, which is not installed: pip install wandb "
        "(or pip install -e '.[wandb]'), or remove logging.wandb"
    )
    assert "logging" not in cl_config.load(demo)  # without the key, wandb is not looked for
