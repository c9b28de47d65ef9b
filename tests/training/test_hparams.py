"""Two cells that differ only in their backbone, trained and evaluated as the workflow's jobs do: the
HParams plugin lists one session group per cell, named by its path, with its own test score and fields,
and W&B has one run per cell with the same config."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from contrastlab.training.cells import train_cell
from contrastlab.training.events import TensorBoardLog, WandbLog, WandbRun, cell_settings
from contrastlab.training.sentence import TrainSettings
from contrastlab.workflow.job import events_dir_of, log_job_test_scores, wandb_run_of
from tests.training.conftest import TINY_SENTENCE
from tests.training.test_wandb_logging import offline_runs

PROJECT = "contrastlab-offline"
# The two cells the survey found merged (ecosystem.md, row 79) and their test/sts_avg there.
SCORES = {"minilm": 80.42, "tiny-bert": 73.88}
SETTINGS = TINY_SENTENCE | {"max_steps": 2, "eval_every": 2, "log_every": 2, "state_every": None}


def wildcards(backbone: str):
    """The training and evaluation jobs' wildcards of Nie's ``cl`` cell on ``backbone``, as Snakemake
    hands them to a script."""
    from snakemake.iocontainers import Wildcards

    return Wildcards(fromdict={"experiment": "nie2023", "backbone": backbone, "method": "cl", "seed": "42"})


def session_groups(logdir: Path) -> list[dict]:
    """What the HParams view shows for the TensorBoard over ``logdir``: its plugin's session groups (as
    its ``/data/plugin/hparams/session_groups`` answers the dashboard), each as {name, hparams, metrics
    (the group's values: the mean over its sessions), sessions (run names)}."""
    from google.protobuf import json_format
    from tensorboard import context
    from tensorboard.backend.event_processing import data_provider, plugin_event_multiplexer
    from tensorboard.plugins import base_plugin
    from tensorboard.plugins.hparams import api_pb2, backend_context, list_session_groups

    multiplexer = plugin_event_multiplexer.EventMultiplexer(tensor_size_guidance={"tensors": 0})
    multiplexer.AddRunsFromDirectory(str(logdir))
    multiplexer.Reload()
    provider = data_provider.MultiplexerDataProvider(multiplexer, str(logdir))
    tb = base_plugin.TBContext(logdir=str(logdir), data_provider=provider, multiplexer=multiplexer)
    statuses = [getattr(api_pb2, f"STATUS_{name}") for name in ("UNKNOWN", "SUCCESS", "FAILURE", "RUNNING")]
    request = api_pb2.ListSessionGroupsRequest(start_index=0, slice_size=100, allowed_statuses=statuses)
    handler = list_session_groups.Handler(context.RequestContext(), backend_context.Context(tb), "", request)
    groups = json_format.MessageToDict(handler.run()).get("sessionGroups", [])
    return [
        {
            "name": group["name"],
            "hparams": group["hparams"],
            "metrics": {value["name"]["tag"]: value["value"] for value in group["metricValues"]},
            "sessions": [session["name"] for session in group["sessions"]],
        }
        for group in groups
    ]


def test_two_backbones_are_two_hparams_sessions_and_two_wandb_runs(tmp_path, monkeypatch, sentence_data):
    import wandb

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.delenv("WANDB_DIR", raising=False)
    config = {"results_dir": str(tmp_path / "results"), "logging": {"wandb": PROJECT}}
    for backbone, score in SCORES.items():
        job = SimpleNamespace(config=config, wildcards=wildcards(backbone))
        folder = tmp_path / backbone
        paths = dict(
            out_dir=folder / "model", log_path=folder / "train_log.jsonl", state_dir=folder / "state"
        )
        where = dict(cache_dir=tmp_path / "cache", **sentence_data)
        logging = dict(events_dir=events_dir_of(job), wandb_run=wandb_run_of(job), cell=job.wildcards)
        # as scripts/train.py calls it
        done = train_cell(SETTINGS, point=None, previous_selection=None, **paths, **where, **logging)
        assert done == "trained"
        wandb.teardown()  # the training job's process ends
        assert log_job_test_scores(job, {"sts_avg": score, "tr_avg": None}) == {"test/sts_avg": score}
        wandb.teardown()  # and the evaluation job's

    groups = session_groups(tmp_path / "results" / "tensorboard")
    paths = ["nie2023/minilm/cl/seed42", "nie2023/tiny-bert/cl/seed42"]
    assert sorted((group["name"], group["sessions"]) for group in groups) == [(p, [p]) for p in paths]
    for group in groups:
        backbone = group["name"].split("/")[1]
        cell = {"experiment": "nie2023", "backbone": backbone, "method": "cl", "seed": 42}
        assert {key: group["hparams"][key] for key in cell} == cell
        assert (group["hparams"]["loss"], group["hparams"]["max_steps"]) == ("infonce", 2)
        assert group["metrics"]["test/sts_avg"] == pytest.approx(SCORES[backbone], abs=1e-5)  # float32

    runs = offline_runs(tmp_path / "results")
    trained = {run["name"]: run for run in runs if run["config"]}
    assert sorted(trained) == paths and len({run["id"] for run in trained.values()}) == 2
    settings = json.loads(json.dumps(TrainSettings.from_dict(SETTINGS).to_dict()))
    for name, run in trained.items():
        cell = {"experiment": "nie2023", "backbone": name.split("/")[1], "method": "cl", "seed": 42}
        assert run["config"] == cell | settings
    scored = {run["name"]: run["summary"]["test/sts_avg"] for run in runs if not run["config"]}
    assert scored == {path: SCORES[path.split("/")[1]] for path in paths}


def test_a_cells_fields_come_first_and_a_run_of_no_cell_keeps_its_settings_and_hash(tmp_path):
    """The cell's fields lead the HParams and W&B settings; no cell: the settings under a hashed trial."""
    cell = wildcards("minilm")
    assert cell_settings(cell) == {"experiment": "nie2023", "backbone": "minilm", "method": "cl", "seed": 42}
    run = WandbRun.of(PROJECT, cell)
    assert run.name == "nie2023/minilm/cl/seed42"
    settings = {"loss": "infonce", "seed": 42, "lr": 3e-05}
    log = WandbLog(run, settings, cell)
    assert list(log.settings) == ["experiment", "backbone", "method", "seed", "loss", "lr"]
    assert WandbLog(run, settings).settings == settings

    for folder, given in (("cell", cell), ("none", None)):
        events = TensorBoardLog(tmp_path / "tb" / folder, settings, given)
        events.start(resume_step=None)
        events.write({"event": "eval", "step": 2, "dev_spearman": 61.5})
        events.close()
    groups = {group["sessions"][0]: group for group in session_groups(tmp_path / "tb")}
    assert groups["cell"]["name"] == "nie2023/minilm/cl/seed42"
    assert groups["cell"]["hparams"] == cell_settings(cell) | settings
    assert len(groups["none"]["name"]) == 64 and groups["none"]["hparams"] == settings  # sha256 hex
