"""The vision track through Snakemake: the demo's digits cells train, evaluate and fill MACL Table 9."""

from __future__ import annotations

import json

import pytest
import yaml

from .test_dryrun import run_snakemake
from .test_pipeline import write

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def finished(repo_root, tmp_path_factory):
    workdir = tmp_path_factory.mktemp("vision")
    config = yaml.safe_load((repo_root / "config" / "demo.yaml").read_text())
    config.update(results_dir=str(workdir / "results"), resources_dir=str(workdir / "resources"))
    config["backbones"]["resnet18-w8"]["vision"]["width"] = 4
    config["experiments"]["macl_cifar10"]["training"] = {"max_steps": 6, "log_every": 3, "state_every": 3}
    config["experiments"]["macl_cifar10"]["seeds"] = [42]  # the demo's second seed only feeds its verdicts
    config["select"] = {"experiments": ["macl_cifar10"]}
    config["vision_evaluation"] = {"linear": {"epochs": 5}}
    output = run_snakemake(repo_root, "--configfile", write(config, workdir / "c.yaml"), "--cores", "2")
    return workdir, config, output


def test_cells_train_evaluate_and_fill_the_table(finished, read_curves):
    workdir, _, _ = finished
    results = workdir / "results"
    for method in ("ntxent-bs64", "macl-bs64"):
        metrics = json.loads(
            (results / f"metrics/macl_cifar10/resnet18-w8/{method}/seed42/vision.json").read_text()
        )
        probes = {"linear_top1", "knn_top1"}  # and the embedding statistics every evaluation reports
        assert set(metrics["scores"]) == probes | {"embedding_variance", "effective_rank_95"}
        assert metrics["n_test"] == 360
        assert metrics["linear"]["epochs"] == 5 and metrics["knn"]["k"] == 200
        log = (results / f"checkpoints/macl_cifar10/resnet18-w8/{method}/seed42/train_log.jsonl").read_text()
        assert '"event": "end"' in log
        curves = read_curves(results / f"tensorboard/macl_cifar10/resnet18-w8/{method}/seed42")
        assert [step for step, _ in curves["train/loss"]] == [3, 6], sorted(curves)
    table = (results / "tables" / "macl_table9.csv").read_text()
    rows = [line for line in table.splitlines() if line.startswith("resnet18-w8,macl-bs64,")]
    assert len(rows) == 2 and all(",ok" in row for row in rows), rows
    assert "macl_table9" in (results / "report.md").read_text()


def test_nothing_to_do_after_a_finished_run(repo_root, finished):
    workdir, config, _ = finished
    output = run_snakemake(repo_root, "-n", "--configfile", write(config, workdir / "same.yaml"))
    assert "Nothing to be done" in output, output[-2000:]
