"""End to end: the reduced demo on one cell, no figures, run with warm starts and again with
``CONTRASTLAB_WARM_START=0`` gives byte-identical tables and models and equal metrics."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest

from contrastlab.workflow.warm_key import SWITCH

from .conftest import reduced_demo, run_snakemake, write

pytestmark = pytest.mark.slow
SCHEDULE_FIRST = 9  # a long module (two demo runs): tests/conftest.py starts the highest numbers first

#: What a metrics file may hold that differs between two runs of one job, each with why (dotted keys).
VOLATILE = {
    "timings": "wall seconds of the evaluation's steps",
    "task_seconds": "wall seconds of each task",
    "encoding.encode_s": "wall seconds of the encoding",
    "encoding.phases": "wall seconds of the encoding job's phases (its imports: the starter's when warm)",
    "encoding.start": "how the encoding job started: warm or cold, why, when",
    "encoding.key": "the embedding cache's key: a hash of the checkpoint's path and its files' change times",
    "meta.command": "Snakemake's temporary copy of the script, a random file name",
}


@pytest.fixture(scope="module")
def runs(repo_root, tmp_path_factory, e2e_resources) -> dict[str, Path]:
    """The reduced demo's ``cl`` cell run warm and cold, each with results and corpus of its own on the
    worker's resources folder: ``{"warm": folder, "cold": folder}``."""
    folders = {}
    for how, switch in (("warm", "1"), ("cold", "0")):
        folder = tmp_path_factory.mktemp(how)
        config = reduced_demo(repo_root, folder)
        del config["experiments"]["nie2023"]["methods"]["mpt"]
        config["figures"] = False
        config["resources_dir"] = str(e2e_resources)
        config = write(config, folder / "c.yaml")
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv(SWITCH, switch)
            run_snakemake(repo_root, "--configfile", config, "--cores", "2")
        folders[how] = folder
    return folders


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _metrics(folder: Path) -> dict[str, dict]:
    """Every metrics file of a run, the run's folder written ``<run>`` and :data:`VOLATILE` left out."""
    found = {}
    for name, data in _files(folder / "results" / "metrics").items():
        record = json.loads(data.decode().replace(str(folder), "<run>"))
        for dotted in VOLATILE:
            *parents, last = dotted.split(".")
            functools.reduce(lambda place, key: place.get(key, {}), parents, record).pop(last, None)
        found[name] = record
    return found


def _model_files(folder: Path) -> dict[str, bytes]:
    found = _files(folder / "results" / "checkpoints")
    return {name: data for name, data in found.items() if "/model/" in name and "train_summary" not in name}


def _start_records(folder: Path) -> list[dict]:
    """How each training and encoding job of a run started (its log's ``end``, its metrics' encoding)."""
    results = folder / "results"
    records = [
        json.loads(p.read_text())["encoding"]["start"] for p in (results / "metrics").rglob("senteval.json")
    ]
    for log in results.rglob("train_log.jsonl"):
        ends = [json.loads(line) for line in log.read_text().splitlines() if '"event": "end"' in line]
        records.append(ends[-1]["start"])
    return records


def test_the_runs_started_their_jobs_warm_and_cold_as_asked(runs):
    warm_starts, cold_starts = _start_records(runs["warm"]), _start_records(runs["cold"])
    assert len(warm_starts) == len(cold_starts) == 3  # the training, its encoding, the pretrained one
    refused = {s["why_cold"] for s in warm_starts if str(s["why_cold"]).startswith("starter refused")}
    if refused:
        pytest.skip(f"no warm starts on this machine: {refused.pop()}")
    assert [s["warm"] for s in warm_starts] == [True] * 3, warm_starts
    assert [(s["warm"], s["why_cold"]) for s in cold_starts] == [(False, "warm starts off")] * 3


def test_the_tables_and_the_models_are_byte_identical_and_the_metrics_equal(runs):
    """Every file of the tables folder, and every file of each checkpoint but ``train_summary.json`` (the
    training's own record: its seconds, how it started, its run's paths; the numbers the metrics take from
    it are compared there); the metrics but :data:`VOLATILE`."""
    tables = {how: _files(folder / "results" / "tables") for how, folder in runs.items()}
    # Nie's Tables 1 and 2 as CSV, Markdown and LaTeX, the scores and the claims' verdicts as data
    assert len(tables["cold"]) == 8 and {"scores.csv", "claims.csv"} <= set(tables["cold"])
    assert sorted(tables["warm"]) == sorted(tables["cold"])
    assert [name for name in tables["cold"] if tables["warm"][name] != tables["cold"][name]] == []
    models = {how: _model_files(folder) for how, folder in runs.items()}
    assert sum(name.endswith("/model.safetensors") for name in models["cold"]) == 1
    assert sorted(models["warm"]) == sorted(models["cold"])
    assert [name for name in models["cold"] if models["warm"][name] != models["cold"][name]] == []
    metrics = {how: _metrics(folder) for how, folder in runs.items()}
    assert len(metrics["cold"]) == 2  # the cell's SentEval and the pretrained backbone's
    for name, cold in metrics["cold"].items():
        assert metrics["warm"][name] == cold, name
        assert cold["scores"] and cold["sts_avg"] is not None  # numbers, not only what is left
