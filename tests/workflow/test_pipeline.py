"""End to end: a reduced demo DAG runs offline, renders the tables, and reruns exactly what changed."""

from __future__ import annotations

import json

import pytest
import yaml

from .test_dryrun import job_counts, run_snakemake

pytestmark = pytest.mark.slow


def reduced_demo(repo_root, workdir):
    """config/demo.yaml on one backbone and two losses, fewer steps: same rules, smaller sizes."""
    config = yaml.safe_load((repo_root / "config" / "demo.yaml").read_text())
    config["results_dir"] = str(workdir / "results")
    config["resources_dir"] = str(workdir / "resources")
    config["training"].update(max_steps=8, eval_every=4, state_every=4, log_every=2)
    config["experiments"] = {
        "nie2023": {
            "backbones": ["tiny-bert"],
            "pretrained_pooling": "avg_embeddings_and_last",
            "methods": {
                "cl": {"loss": "infonce", "hp": {"tau": 0.05}, "note": "test"},
                "mpt": {"loss": "mpt", "hp": {"m": 0.23}, "note": "test"},
            },
        }
    }
    return config


def write(config, path):
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return str(path)


@pytest.fixture(scope="module")
def finished_demo(repo_root, tmp_path_factory):
    workdir = tmp_path_factory.mktemp("demo")
    config = reduced_demo(repo_root, workdir)
    output = run_snakemake(repo_root, "--configfile", write(config, workdir / "c.yaml"), "--cores", "2")
    return workdir, config, output


def test_demo_produces_tables_and_report(finished_demo):
    workdir, _, _ = finished_demo
    results = workdir / "results"
    tables = sorted(p.name for p in (results / "tables").iterdir())
    assert any(name.endswith(".csv") for name in tables) and any(name.endswith(".md") for name in tables)
    report = (results / "report.md").read_text()
    for name in tables:
        if name.endswith(".md"):
            assert name.removesuffix(".md") in report
    metrics = json.loads((results / "metrics/nie2023/tiny-bert/cl/seed42/senteval.json").read_text())
    assert set(metrics["scores"]) >= {"STS12", "STSBenchmark", "MR", "MRPC"}
    assert (results / "checkpoints/nie2023/tiny-bert/cl/seed42/model/config.json").exists()
    assert (results / "metrics/pretrained/tiny-bert/senteval.json").exists()


def test_nothing_to_do_after_a_finished_run(repo_root, finished_demo):
    workdir, config, _ = finished_demo
    output = run_snakemake(repo_root, "-n", "--configfile", write(config, workdir / "same.yaml"))
    assert "Nothing to be done" in output, output[-2000:]


def test_changing_one_loss_hyperparameter_reruns_only_that_loss(repo_root, finished_demo):
    workdir, config, _ = finished_demo
    changed = json.loads(json.dumps(config))
    changed["experiments"]["nie2023"]["methods"]["mpt"]["hp"]["m"] = 0.30
    output = run_snakemake(repo_root, "-n", "--configfile", write(changed, workdir / "changed.yaml"))
    counts = job_counts(output)
    assert counts == {"train": 1, "evaluate": 1, "tables": 1, "all": 1, "total": 4}, counts
    assert "wildcards: experiment=nie2023, backbone=tiny-bert, method=mpt, seed=42" in output
    assert "method=cl" not in output
