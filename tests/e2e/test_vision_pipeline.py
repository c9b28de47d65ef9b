"""The vision track through Snakemake: the demo's digits cells train, evaluate and fill MACL Table 9."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from .conftest import nothing_to_do, run_snakemake, write

pytestmark = pytest.mark.slow
SCHEDULE_FIRST = 7  # a long module: tests/conftest.py starts the highest numbers first


@pytest.fixture(scope="module")
def finished(repo_root, tmp_path_factory, e2e_resources):
    workdir = tmp_path_factory.mktemp("vision")
    config = yaml.safe_load((repo_root / "config" / "demo.yaml").read_text())
    # the digits prepared once a worker (test_user_loss.py prepares the same)
    config.update(results_dir=str(workdir / "results"), resources_dir=str(e2e_resources))
    config["backbones"]["resnet18-w8"]["vision"]["width"] = 4
    config["experiments"]["macl_cifar10"]["training"] = {"max_steps": 6, "log_every": 3, "state_every": 3}
    config["experiments"]["macl_cifar10"]["seeds"] = [42]  # the demo's second seed only feeds its verdicts
    config["select"] = {"experiments": ["macl_cifar10"]}
    config["vision_evaluation"] = {"linear": {"epochs": 5}}
    output = run_snakemake(repo_root, "--configfile", write(config, workdir / "c.yaml"), "--cores", "2")
    return workdir, config, output


def test_cells_train_evaluate_and_fill_the_table(repo_root, finished, read_curves):
    """The cells' metrics, cards, logs and curves, MACL Table 9 in the report; then nothing left to do."""
    workdir, config, _ = finished
    results = workdir / "results"
    cards = [sys.executable, "scripts/publish.py", "--configfile", str(workdir / "c.yaml"), "--cards"]
    made = subprocess.run(cards, cwd=repo_root, capture_output=True, text=True, timeout=120)
    assert made.returncode == 0 and made.stdout.endswith("# 2 model cards\n"), made.stdout + made.stderr
    for method in ("ntxent-bs64", "macl-bs64"):
        cell = f"macl_cifar10/resnet18-w8/{method}/seed42"
        metrics = json.loads((results / f"metrics/{cell}/vision.json").read_text())
        probes = {"linear_top1", "knn_top1"}  # and the embedding statistics every evaluation reports
        assert set(metrics["scores"]) == probes | {"embedding_variance", "effective_rank_95"}
        assert metrics["n_test"] == 360
        assert metrics["linear"]["epochs"] == 5 and metrics["knn"]["k"] == 200
        card = (results / f"cards/{cell}/README.md").read_text()
        linear = f"| linear_top1 | {metrics['scores']['linear_top1']:.2f} |"
        assert "library_name: pytorch" in card and linear in card, card  # its model card (make cards)
        assert '"event": "end"' in (results / f"checkpoints/{cell}/train_log.jsonl").read_text()
        curves = read_curves(results / f"tensorboard/{cell}")
        assert [step for step, _ in curves["train/loss"]] == [3, 6], sorted(curves)
    table = (results / "tables" / "macl_table9.csv").read_text()
    rows = [line for line in table.splitlines() if line.startswith("resnet18-w8,macl-bs64,")]
    assert len(rows) == 2 and all(",ok" in row for row in rows), rows
    assert "macl_table9" in (results / "report.md").read_text()
    nothing_to_do(run_snakemake(repo_root, "-n", "--configfile", write(config, workdir / "same.yaml")))


#: A rate at which SGD turns the loss NaN within a few steps, and the name of its sweep point.
HUGE_LR, DIVERGING = 1.0e12, "infonce-lr1000000000000.0"


@pytest.mark.fault(
    "an OAR sweep point whose encoder training diverges (NaN loss at a huge learning rate)",
    "recorded as a result: evaluated as diverged, the table, the rate figure and the spectra say so",
)
def test_a_diverging_sweep_point_is_a_result_not_a_blocked_run(
    repo_root, tmp_path_factory, e2e_resources, observed
):
    """A sweep point whose training turns NaN is recorded, evaluated as diverged and drawn as such (the
    rate figure's cross, the spectra's panel); the tables are built."""
    workdir = tmp_path_factory.mktemp("vision-diverged")
    config = yaml.safe_load((repo_root / "config" / "demo.yaml").read_text())
    config.update(results_dir=str(workdir / "results"), resources_dir=str(e2e_resources))
    config["backbones"]["resnet18-w8"]["vision"]["width"] = 4
    oar = config["experiments"]["oar_cifar10"]
    oar.update(seeds=[42], sweep={"lr": [0.01, HUGE_LR]}, spectra=["infonce-lr0.01", DIVERGING])
    oar["methods"] = {"infonce": oar["methods"]["infonce"]}
    oar["training"].update(epochs=1, log_every=2, state_every=10)
    oar["vision_evaluation"]["ffn"].update(epochs=2, label_fractions=[1.0])
    config["select"] = {"experiments": ["oar_cifar10"]}
    config["oar_synthetic"] = None
    run_snakemake(repo_root, "--configfile", write(config, workdir / "c.yaml"), "--cores", "2")  # exit 0
    results = workdir / "results"
    log = results / f"logs/train/oar_cifar10/resnet18-w8/{DIVERGING}/seed42.log"
    assert "point: training diverged, recorded" in log.read_text()
    metrics = json.loads(
        (results / f"metrics/oar_cifar10/resnet18-w8/{DIVERGING}/seed42/vision.json").read_text()
    )
    assert metrics["scores"] == {} and "not finite" in metrics["encoder_diverged"]
    keys = {"ffn100_top1", "ffn100_top5", "embedding_variance", "effective_rank_95"}
    assert set(metrics["diverged"]) == keys
    sweep = (results / "figures/oar_cifar10/lr_sweep.csv").read_text().splitlines()
    assert "infonce,infonce,False,1e+12,ffn100_top1,,,0,1" in sweep, sweep  # no seed scored, one diverged
    assert "diverged" in (results / "figures/oar_cifar10/spectra.csv").read_text()
    # Table 3's best-of-sweep reads the config's rates too: the diverged 1e12 never wins, the best is 0.01
    table = (results / "tables/oar_table3.csv").read_text().splitlines()
    best = [row for row in table if row.startswith("resnet18-w8,infonce,ffn100_top1,")]
    assert len(best) == 1 and ",0.01,1e+12," in best[0], table
    observed("NaN at lr 1e12: recorded, every key diverged, lr_sweep n_diverged 1, table and spectra drawn")
