"""A loss from the user's own module through the workflow: bad losses stop it with one line before any
job, and the worked example of the README runs end to end at demo size (sentence and image protocols,
comparison tables, paradigm figure, metadata), a change to its file rerunning exactly its cells."""

from __future__ import annotations

import hashlib
import json
import shutil

import pytest
import yaml

from contrastlab.data.fixtures import write_demo_corpus
from contrastlab.paths import REPO_ROOT

from .conftest import dry_run_jobs, job_counts, run_snakemake, write
from .workflow_start import start_error

SCHEDULE_FIRST = 10  # a long module: tests/conftest.py starts the highest numbers first

EXAMPLE = REPO_ROOT / "examples" / "margin_infonce.py"


def demo_with_user_loss(workdir, loss: str, hp: dict | None = None) -> dict:
    """config/demo.yaml cut to Nie's protocol on the tiny BERT and MACL's image protocol on digits, each
    with one paper loss and the user's loss ``margin_nce``; 8 sentence steps, 6 image steps, no
    synthetic study."""
    config = yaml.safe_load((REPO_ROOT / "config" / "demo.yaml").read_text())
    config["results_dir"] = str(workdir / "results")
    config["resources_dir"] = str(workdir / "resources")
    config["data"]["wiki_path"] = str(write_demo_corpus(workdir / "corpus" / "wiki.txt", 2000))
    config["training"].update(max_steps=8, eval_every=4, state_every=4, log_every=2)
    config["mteb"]["enabled"] = False  # MTEB's evaluator is test_pipeline.py's: minutes here for nothing
    user = {"loss": loss, "hp": {"tau": 0.05, "m": 0.1} if hp is None else hp, "note": "README example"}
    nie, macl = config["experiments"]["nie2023"], config["experiments"]["macl_cifar10"]
    nie["backbones"] = ["tiny-bert"]
    nie["training"] = {"precision": "fp32", "dev_pooling": "cls_mlp"}
    nie.pop("pretrained_pooling")
    nie["methods"] = {"cl": nie["methods"]["cl"], "margin_nce": user}
    nie.pop("search")  # the demo's search is over mpt, which this cut leaves out
    # the smallest vision setting of the tests (test_vision_pipeline): 1/16 width, 6 steps, linear 5 epochs
    config["backbones"]["resnet18-w8"]["vision"]["width"] = 4
    macl["training"] = {"max_steps": 6, "log_every": 3, "state_every": 3}
    macl["seeds"] = [42]  # the demo's second vision seed is for the verdicts, not needed here
    config["vision_evaluation"] = {"linear": {"epochs": 5}}
    macl["methods"] = {
        "ntxent": macl["methods"]["ntxent"],
        "margin_nce": {**user, "hp": {"tau": 0.1, "m": 0.1} if hp is None else hp},
    }
    config["experiments"] = {"nie2023": nie, "macl_cifar10": macl}
    config["oar_synthetic"] = None
    config["paradigm_figures"] = {"points": 4, "batches": 1}
    return config


BAD = {
    "import error": (
        "import no_such_package_xyz\n\ndef f(z1, z2):\n    return (z1 * z2).sum()\n",
        "ModuleNotFoundError",
    ),
    "wrong signature": ("def f(z):\n    return z.sum()\n", "first two positional arguments"),
    "NaN": ("def f(z1, z2):\n    return (z1 * z2).sum() * float('nan')\n", "returned nan"),
    "non-scalar": ("def f(z1, z2):\n    return (z1 * z2).sum(-1)\n", "not a scalar"),
}


@pytest.mark.fault("bad user loss", "one contrastlab: line naming the method and the problem, before any job")
@pytest.mark.parametrize("fault", list(BAD))
def test_a_bad_user_loss_stops_the_workflow_with_one_line(tmp_path, fault, observed):
    """A user loss that cannot be imported, takes the wrong arguments, returns NaN or a non-scalar stops
    the reading of the Snakefile with one line naming the method's loss key and the problem (in process)."""
    body, expected = BAD[fault]
    module = tmp_path / "bad_loss.py"
    module.write_text(body)
    config = demo_with_user_loss(tmp_path, f"{module}:f", hp={})
    line = start_error(write(config, tmp_path / "c.yaml"))
    assert line is not None and "\n" not in line, line
    assert line.startswith("contrastlab: config key experiments.nie2023.methods.margin_nce.loss: "), line
    assert expected in line, line
    observed(line.replace(str(tmp_path), "<tmp>")[:160])


@pytest.mark.slow
def test_the_readme_example_runs_end_to_end_and_a_change_reruns_exactly_its_cells(
    repo_root, tmp_path, e2e_resources
):
    module = tmp_path / "mine" / "margin_infonce.py"
    module.parent.mkdir()
    shutil.copy(EXAMPLE, module)
    config = demo_with_user_loss(tmp_path, f"{module}:margin_infonce")
    config["resources_dir"] = str(e2e_resources)  # the tiny BERT and the digits: once a worker
    path = write(config, tmp_path / "c.yaml")
    # ~2 CPU-minutes of jobs; the wall time limit allows for a machine shared with other work
    run_snakemake(repo_root, "--configfile", path, "--cores", "2", timeout=1800)
    results = tmp_path / "results"

    # trained and evaluated under both protocols, its provenance in the cell's metadata
    sentence = json.loads((results / "metrics/nie2023/tiny-bert/margin_nce/seed42/senteval.json").read_text())
    assert sentence["sts_avg"] is not None
    vision = json.loads(
        (results / "metrics/macl_cifar10/resnet18-w8/margin_nce-bs64/seed42/vision.json").read_text()
    )
    assert set(vision["scores"]) >= {"linear_top1", "knn_top1"}
    start = json.loads(
        (results / "checkpoints/nie2023/tiny-bert/margin_nce/seed42/train_log.jsonl").open().readline()
    )
    record = start["meta"]["user_losses"][f"{module}:margin_infonce"]
    assert record["sha256"] == hashlib.sha256(module.read_bytes()).hexdigest()
    assert record["file"] == str(module)

    # the comparison tables: beside the paper's losses, with numbers; the summary ranks both
    table = (results / "tables/compare_nie2023.md").read_text()
    rows = {line.split(" | ")[1]: line for line in table.splitlines()[2:]}
    assert set(rows) == {"cl", "margin_nce"} and "not run" not in table, table
    assert "margin_nce-bs64" in (results / "tables/compare_macl_cifar10.md").read_text()
    summary = (results / "tables/compare_summary.csv").read_text()
    assert "margin_nce" in summary and "#1 of 2" in summary and "#2 of 2" in summary
    # the paradigm figure, and both in the report
    assert (results / "figures/paradigm/margin_nce.png").stat().st_size > 5000
    report = (results / "report.md").read_text()
    assert "### compare_nie2023" in report and "figures/paradigm/margin_nce.png" in report

    # a comment in the loss's file reruns nothing; a change to its code exactly its cells, its figure and
    # the tables
    module.write_text(module.read_text() + "\n# tuned\n")
    assert "Nothing to be done" in run_snakemake(repo_root, "-n", "--configfile", path)
    module.write_text(module.read_text() + "\nTUNED = 1\n")
    listing = run_snakemake(repo_root, "-n", "--configfile", path)
    counts = job_counts(listing)
    assert counts == {
        "all": 1,
        "train": 1,
        "encode": 1,
        "evaluate": 1,
        "train_vision": 1,
        "encode_vision": 1,  # its features (GPU), then its probes (CPU)
        "evaluate_vision": 1,
        "figure_paradigm": 1,
        "figure_training_curves": 1,  # Nie's figures drawn from every cell's logs and metrics
        "figure_align_uniform": 1,
        "figure_nie2023_fig3b": 1,
        "tables": 1,
        "total": 12,
    }, counts
    methods = {part.split("=", 1)[1].strip(",") for part in listing.split() if part.startswith("method=")}
    assert methods == {"margin_nce", "margin_nce-bs64"}, methods


def test_the_loss_files_code_is_an_input_of_exactly_its_cells(repo_root, tmp_path):
    """Dry run: the stamp of the user's file's code is an input of the training jobs of its cells (and of
    its paradigm figure), of no other job; so a change to its code reruns exactly those (the end-to-end
    test runs it)."""
    module = tmp_path / "margin_infonce.py"
    shutil.copy(EXAMPLE, module)
    config = demo_with_user_loss(tmp_path, f"{module}:margin_infonce")
    output = run_snakemake(repo_root, "-n", "--configfile", write(config, tmp_path / "c.yaml"))
    stamp = f".snakemake/contrastlab/code/@{module}.code"
    using = [
        (job["rule"], job["wildcards"].get("method", ""))
        for job in dry_run_jobs(output)
        if stamp in job["input"]
    ]
    assert sorted(using) == [
        ("figure_paradigm", "margin_nce"),
        ("train", "margin_nce"),
        ("train_vision", "margin_nce-bs64"),
    ], using


@pytest.mark.slow
def test_the_own_loss_template_trains_under_lis_protocol_on_the_demo(repo_root, tmp_path, e2e_resources):
    """docs/own-loss.md's template, word for word, on the demo (8 steps): its loss's train job under Li's
    protocol runs."""
    from tests.config.test_own_loss_doc import doc_examples, with_template

    config = demo_with_user_loss(tmp_path, "examples/margin_infonce.py:margin_infonce")
    demo = yaml.safe_load((REPO_ROOT / "config" / "demo.yaml").read_text())
    config["experiments"] = {name: demo["experiments"][name] for name in ("nie2023", "li2024")}
    config["experiments"]["li2024"]["training"]["precision"] = "fp32"
    config = with_template(config, doc_examples()[1])
    # the sentence protocols of the four (the image ones train nothing here)
    config["experiments"]["mine"].update(protocols=["nie2023", "li2024"], baselines=["cl", "mmhe"])
    config["resources_dir"] = str(e2e_resources)
    path = write(config, tmp_path / "c.yaml")
    log = "checkpoints/li2024/tiny-bert/margin_nce/seed42/train_log.jsonl"
    run_snakemake(repo_root, "--configfile", path, "--cores", "2", "--", str(tmp_path / "results" / log))
    start = json.loads((tmp_path / "results" / log).open().readline())
    assert "examples/margin_infonce.py:margin_infonce" in start["meta"]["user_losses"]
