"""End to end: a reduced demo DAG runs offline, renders the tables, and reruns exactly what changed;
Snakemake's own report of it (snakemake --report) files its tables, figures and report.html under their
papers."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from contrastlab import config as cl_config
from contrastlab.config import paper_of
from contrastlab.figures import catalog
from contrastlab.paths import REPO_ROOT
from contrastlab.workflow import finished
from tests.images import distinct_colours
from tests.report import chromium

from .conftest import (
    OFFLINE,
    job_counts,
    nothing_to_do,
    reduced_demo,
    run_snakemake,
    snakemake_process,
    succeeded,
    write,
)

pytestmark = pytest.mark.slow
SCHEDULE_FIRST = 12  # a long module: tests/conftest.py starts the highest numbers first


@pytest.fixture(scope="module")
def finished_demo(repo_root, tmp_path_factory):
    workdir = tmp_path_factory.mktemp("demo")
    config = reduced_demo(repo_root, workdir, mteb=True)
    run_snakemake(repo_root, "--configfile", write(config, workdir / "c.yaml"), "--cores", "2")
    return workdir, config, workdir / "results"


def test_demo_produces_tables_and_report(finished_demo):
    """The tables and the report: the claims' answer first (toy numbers said, a line of counts per paper),
    each claim with its verdict, the tables with their verdict markers, legend and CSV columns."""
    import pandas as pd

    _, _, results = finished_demo
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
    # MTEB's evaluator on each cell (mteb.enabled in the demo): MTEB's results and the bridge table
    assert len(list((results / "mteb/nie2023/tiny-bert/cl/seed42/results").glob("*/*/STS12.json"))) == 1
    assert "## SentEval protocol and MTEB on the same checkpoints" in report
    # every training job's phases, and how it started, in the cost section
    cost = report[report.index("### Where the training jobs' time went") :]
    rows = [line for line in cost.splitlines() if line.startswith(("| train ", "| train_vision "))]
    trained = list((results / "checkpoints").glob("*/*/*/seed*/train_log.jsonl"))
    assert len(rows) == len(trained) > 0
    assert all(row.split(" | ")[1].startswith(("warm", "cold (")) for row in rows), rows
    encoded = metrics["encoding"]  # the encoding job's own phases, from its process's start
    assert {"interpreter_s", "encode_s", "total_s"} <= set(encoded["phases"]) and "warm" in encoded["start"]
    answer = report[report.index("## The answer") : report.index('<details markdown="1">')]
    assert report.index("## The answer") < report.index("\n## Nie et al. 2023")
    assert "**Toy numbers**" in answer and "tiny-bert for bert-base" in answer
    # the claims counted by verdict are columns of the first screen's table
    nie = next(line for line in answer.splitlines() if line.startswith("| Nie et al. 2023 | [Table 1]("))
    assert nie.split(" | ")[-5:-2] == ["0", "0", "0"] and int(nie.split(" | ")[-2]) > 0  # undecided
    assert "'select={backbones: [tiny-bert], experiments: [nie2023]" in answer
    claims = report[report.index("\n### Claims") : report.index("\n### Tables")]
    row = next(
        line for line in claims.splitlines() if "L_cl, L_a&u and L_dcl each beat the pretrained" in line
    )
    # one seed: no noise estimate, and the command that adds seeds to exactly these cells
    assert "undecided (1/12 parts run): needs ≥ 2 seeds per cell" in row, row
    assert "bert-base: cl − pretrained = " in row
    assert "| not configured |" in claims  # claims whose cells the demo's grid does not have
    md = (results / "tables" / "nie2023_table1.md").read_text()
    assert " ?†" in md and "? undecided (no noise estimate" in md
    csv = pd.read_csv(results / "tables" / "nie2023_table1.csv", dtype=str, keep_default_na=False)
    cl = csv[(csv["backbone"] == "tiny-bert") & (csv["method"] == "cl") & (csv["task"] == "sts_avg")]
    assert cl[["verdict", "compared_with"]].values.tolist() == [["undecided", "bert-base (stand-in)"]]
    pretrained = csv[(csv["backbone"] == "tiny-bert") & (csv["method"] == "pretrained")]
    assert set(pretrained["verdict"]) <= {"within noise", "above", "below", "no published number"}


def test_make_cards_writes_each_cells_card_and_its_checkpoint_loads_in_sentence_transformers(
    repo_root, finished_demo
):
    """The train job wrote the sentence-transformers files into the checkpoint; ``make cards`` writes each
    card from the cell's files."""
    from contrastlab.models import load_backbone, make_encoder

    workdir, _, results = finished_demo
    assert not (results / "cards").exists()  # no workflow job writes a card
    cards = [sys.executable, "scripts/publish.py", "--configfile", str(workdir / "c.yaml"), "--cards"]
    made = subprocess.run(cards, cwd=repo_root, capture_output=True, text=True, timeout=300)
    assert made.returncode == 0, made.stderr
    for method in ("cl", "mpt"):
        cell = f"nie2023/tiny-bert/{method}/seed42"
        card = (results / "cards" / cell / "README.md").read_text()
        metrics = json.loads((results / "metrics" / cell / "senteval.json").read_text())
        assert card.startswith("---\nlibrary_name: sentence-transformers\n"), card[:200]
        assert f"| sts_avg | {metrics['sts_avg']:.2f} |" in card
        assert (results / "checkpoints" / cell / "model" / "modules.json").exists()
    SentenceTransformer = pytest.importorskip("sentence_transformers").SentenceTransformer
    folder = results / "checkpoints/nie2023/tiny-bert/cl/seed42/model"
    sentences = ["A man is playing a guitar.", "A woman slices an onion."]
    model, tokenizer = load_backbone(folder, device="cpu")
    expected = make_encoder(model, tokenizer, pooling="cls", progress=False)(sentences)
    got = SentenceTransformer(str(folder), device="cpu").encode(sentences)
    assert abs(got - expected).max() <= 1e-5


def test_every_cell_trains_with_its_live_curves_under_results_tensorboard(finished_demo, read_curves):
    """Each trained cell's TensorBoard run, <results_dir>/tensorboard/<cell>, holds the training loss at
    every log point and the dev Spearman at every evaluation; none is left in the state folders."""
    _, config, results = finished_demo
    cells = sorted(p.parent for p in (results / "checkpoints").rglob("train_log.jsonl"))
    assert cells
    for cell in cells:
        curves = read_curves(results / "tensorboard" / cell.relative_to(results / "checkpoints"))
        assert [step for step, _ in curves["train/loss"]] == [2, 4, 6, 8], (cell, sorted(curves))
        assert [step for step, _ in curves["dev/spearman"]] == [0, 4, 8], (cell, sorted(curves))
    assert not list(results.glob("state/**/*.tensorboard"))


def test_the_reports_add_seeds_lines_name_the_runs_preset_and_plan_exactly_their_cells(
    repo_root, finished_demo, tmp_path
):
    """The report's add-seeds script names the preset the run read (its absolute path) and runs as
    printed; a dry run of each command plans exactly the cells its ``select`` names, the last none."""
    from .add_seeds import named_cells, planned_cells, report_script, script_commands

    workdir, _, _ = finished_demo
    script = report_script((workdir / "results" / "report.md").read_text())
    preset = workdir / "c.yaml"
    assert script[1] == f'run() {{ .venv/bin/snakemake --configfile {preset} --config "$SEEDS" "$@"; }}'
    commands = script_commands(script, tmp_path)
    tables = ["tables={partial: true}", "--forcerun", "tables"]
    assert len(commands) == 2 and named_cells(commands[0]) and commands[1][-3:] == tables, commands
    for argv in commands:
        output = run_snakemake(repo_root, *argv, "-n")
        assert planned_cells(output) == named_cells(argv), (argv, job_counts(output))


def test_demo_renders_every_figure_and_the_report_shows_it(finished_demo):
    """Each figure the config produces is a non-trivial PNG with its PDF and CSV, shown in both reports."""
    import matplotlib.image

    _, config, results = finished_demo
    figures = catalog.figures(cl_config.Grid(cl_config.validate(config)))
    kinds = {f["kind"] for f in figures}
    assert {"analytic", "logs", "metrics", "oar_synthetic"} <= kinds, kinds
    report = (results / "report.md").read_text()
    html = (results / "report.html").read_text()
    for fig in figures:
        png = results / "figures" / f"{fig['name']}.png"
        pixels = matplotlib.image.imread(png)
        colours = distinct_colours(pixels)
        assert png.stat().st_size > 10_000 and colours > 20, (fig["name"], colours)
        assert png.with_suffix(".pdf").stat().st_size > 1_000
        assert len(png.with_suffix(".csv").read_text().splitlines()) > 2, fig["name"]
        assert f"](figures/{fig['name']}.png)" in report
    assert html.count("data:image/png;base64,") == len(figures)


@pytest.mark.skipif(
    chromium.browser() is None,
    reason="no Chromium on this machine (.ci/run installs Debian's chromium)",
)
def test_the_demos_report_html_reads_in_chromium_at_1400_px(finished_demo, tmp_path):
    """The demo's report.html in headless Chromium 1400 px wide: every contents link resolves, every
    heading has an id, unconfigured methods folded, nothing wider than the window."""
    workdir, _, _ = finished_demo
    page = tmp_path / "report.html"  # a copy: the measuring script is written beside it
    shutil.copy(workdir / "results" / "report.html", page)
    found = chromium.measure(page, width=1400)
    assert found["inner_width"] == 1400 and found["links"] and found["unresolved"] == []
    assert found["headings_without_id"] == []
    for anchor in ("nie2023", "nie2023-table1", "nie2023-senteval-protocol-and-mteb-on-the-same-checkpoints"):
        assert anchor in found["heading_ids"], anchor
    assert found["scroll_width"] <= found["viewport"] <= 1400 and found["boxes_past_viewport"] == []
    assert found["tables"] and found["tables_outside_a_box"] == 0
    assert any("rows not configured by this preset: L_a&u" in line for line in found["folded_rows"])
    # the toy warning before any count; a row per paper on the first screen (the whole demo's scrolled
    # grids are tests/report/test_html.py's)
    assert found["toy_top"] < found["first_tally_top"] < found["window_height"]
    assert found["headline_rows"] == 5 and found["headline_bottom"] < found["window_height"]
    assert found["not_configured_cells"] <= 20 and found["folded_columns"] >= 2
    assert found["see_links"] >= 10 and found["see_not_in_page"] == []
    assert set(found["verdict_lines"]) == {1} and found["verdict_reasons_shown"] == 0
    assert found["commands_hidden_px"] and set(found["commands_hidden_px"]) == {0}


@pytest.mark.parametrize(
    "cell, pooling",
    [("nie2023/tiny-bert/cl/seed42", "cls"), ("pretrained/tiny-bert", "avg_embeddings_and_last")],
    ids=["trained", "pretrained"],
)
def test_the_split_evaluation_gives_the_numbers_of_one_job(finished_demo, cell, pooling):
    """The encode and probe jobs' metrics equal a direct evaluate_checkpoint of the same checkpoint; the
    embeddings are temp, the encoding's record kept in the metrics."""
    import torch

    from contrastlab.config.data import DataConfig
    from contrastlab.evaluation.senteval import evaluate_checkpoint

    _, config, results = finished_demo
    validated = cl_config.validate(json.loads(json.dumps(config)))
    metrics = json.loads((results / "metrics" / cell / "senteval.json").read_text())
    model = metrics["model_dir"]
    assert model.endswith(f"{cell}/model" if "seed" in cell else "models/tiny-bert"), model
    threads = torch.get_num_threads()
    torch.set_num_threads(validated["resources"]["threads"])  # as the jobs ran (the old single job too)
    try:
        direct = evaluate_checkpoint(
            model,
            DataConfig(validated).locations()["senteval_dir"],
            validated["evaluation"]["tasks"],
            validated["evaluation"]["mode"],
            pooling=pooling,
            batch_size=validated["evaluation"]["batch_size"],
            device="cpu",
        )
    finally:
        torch.set_num_threads(threads)
    for key in ("scores", "devacc", "sts_avg", "tr_avg", "tr_devacc_avg", "alignment", "uniformity"):
        assert metrics[key] == direct[key], key
    encoding = metrics["encoding"]
    assert encoding["device"] == "cpu" and encoding["sentences"] > 0 and encoding["torch"], encoding
    assert metrics["timings"]["encode_s"] == encoding["encode_s"]
    assert not (results / "state" / "embeddings" / cell).exists()  # temp: deleted after the probe job
    rule = "encode" if "seed" in cell else "encode_pretrained"  # each rule's timings under its own name
    assert (results / "benchmarks" / rule / f"{cell}.tsv").is_file()
    assert "sentences on" in (results / "logs" / "encode" / f"{cell}.log").read_text()


def test_changing_one_loss_hyperparameter_reruns_only_that_loss_and_an_mteb_key_no_figure(
    repo_root, finished_demo
):
    """A job's params are the config keys it reads: a loss's hyperparameter reruns its cell and what reads
    it; MTEB's batch size reruns MTEB's jobs and their readers, no figure."""
    workdir, config, _ = finished_demo
    changed = json.loads(json.dumps(config))
    changed["experiments"]["nie2023"]["methods"]["mpt"]["hp"]["m"] = 0.30
    output = _dry_run(repo_root, workdir, changed, "changed")
    counts = job_counts(output)
    # That cell, and what reads it: the tables, Nie Fig. 1 (its metrics and its training log) and Nie
    # Fig. 3b (its log's distance gaps).
    expected = {"train": 1, "encode": 1, "evaluate": 1, "figure_align_uniform": 1}
    expected.update(figure_training_curves=1, figure_nie2023_fig3b=1, mteb=1)  # mteb: the demo's bridge
    assert counts == {**expected, "tables": 1, "all": 1, "total": 9}, counts
    assert "wildcards: experiment=nie2023, backbone=tiny-bert, method=mpt, seed=42" in output
    assert "method=cl" not in output
    changed = json.loads(json.dumps(config))
    changed["mteb"]["batch_size"] = 16
    counts = job_counts(_dry_run(repo_root, workdir, changed, "mteb"))
    assert counts == {"mteb": 2, "tables": 1, "all": 1, "total": 4}, counts


def _dry_run(repo_root, workdir, config, name):
    return run_snakemake(repo_root, "-n", "--configfile", write(config, workdir / f"{name}.yaml"))


def test_an_identical_copy_of_the_data_elsewhere_reruns_nothing_and_a_changed_one_retrains(
    repo_root, finished_demo, tmp_path
):
    """Data markers depend on the data's content, not on where it was found: the resources folder (the
    backbones and data) or the corpus copied elsewhere reruns nothing, a sentence more in it retrains
    every cell."""
    workdir, config, _ = finished_demo
    resources = json.loads(json.dumps(config))
    resources["resources_dir"] = str(tmp_path / "scratch" / "resources")
    shutil.copytree(config["resources_dir"], resources["resources_dir"], symlinks=True)
    nothing_to_do(_dry_run(repo_root, workdir, resources, "moved-resources"))
    moved = json.loads(json.dumps(config))
    copy = workdir / "elsewhere" / "wiki-copy.txt"
    copy.parent.mkdir(exist_ok=True)
    copy.write_bytes((workdir / "corpus" / "wiki.txt").read_bytes())
    moved["data"]["wiki_path"] = str(copy)
    nothing_to_do(_dry_run(repo_root, workdir, moved, "moved"))
    copy.write_text(copy.read_text() + "one more sentence .\n")
    counts = job_counts(_dry_run(repo_root, workdir, moved, "edited"))
    assert counts["corpus"] == 1 and counts["train"] == 2, counts
    assert counts["encode"] == counts["evaluate"] == 2, counts
    assert "evaluate_pretrained" not in counts and "encode_pretrained" not in counts, counts
    assert "senteval_data" not in counts, counts


def test_the_same_corpus_as_a_pinned_download_under_another_url_retrains_nothing(repo_root, finished_demo):
    """A corpus is its content: the same bytes as a pinned download rerun nothing; other bytes pinned
    retrain the sentence cells."""
    workdir, config, _ = finished_demo
    corpus = (workdir / "corpus" / "wiki.txt").read_bytes()
    lock = workdir / "downloaded.lock.json"
    downloaded = json.loads(json.dumps(config))
    downloaded["artifacts_lock"] = str(lock)
    downloaded["data"].update(
        fixture=False,  # the generated SentEval fixture, named by its folder: still the fixture
        senteval_dir=str(workdir / "resources" / "data" / "senteval-fixture"),
        wiki_path=None,
        wiki_url="https://mirror.invalid/datasets/x/resolve/" + "a" * 40 + "/wiki1m_for_simcse.txt",
        wiki_lines=2000,
    )
    entry = {"url": "https://elsewhere.invalid/wiki1m_for_simcse.txt", "revision": None, "bytes": len(corpus)}

    def pinned(sha256: str, name: str) -> str:
        """The dry run with the corpus's lock entry of digest ``sha256``."""
        data = {"wiki1m_for_simcse.txt": {**entry, "sha256": sha256}}
        lock.write_text(json.dumps({"format": 1, "data": data}))
        return _dry_run(repo_root, workdir, downloaded, name)

    nothing_to_do(pinned(hashlib.sha256(corpus).hexdigest(), "downloaded"))
    counts = job_counts(pinned("0" * 64, "other-bytes"))
    assert counts["corpus"] == 1 and counts["train"] == 2 and "senteval_data" not in counts, counts


def test_a_wrong_data_path_stops_before_any_job_and_costs_nothing(repo_root, finished_demo):
    """A wrong ``data.senteval_dir`` is one line before any job; the data marker and the cells stay."""
    workdir, config, _ = finished_demo
    wrong = json.loads(json.dumps(config))
    wrong["data"]["senteval_dir"] = str(workdir / "no-such-senteval")
    done = snakemake_process(repo_root, "--cores", "1", "--configfile", write(wrong, workdir / "wrong.yaml"))
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.startswith("contrastlab:")]
    assert done.returncode == 1 and len(lines) == 1, done.stdout + done.stderr
    assert "data.senteval_dir" in lines[0] and "no-such-senteval" in lines[0], lines
    assert (workdir / "results" / "state" / "data" / "senteval.ready.json").is_file()
    nothing_to_do(_dry_run(repo_root, workdir, config, "after-wrong"))


def test_presets_keep_their_own_state(repo_root, finished_demo):
    """Another preset on the same resources (other data, other results) leaves this run's cells done."""
    workdir, config, _ = finished_demo
    other = json.loads(json.dumps(config))
    other["results_dir"] = str(workdir / "other-results")
    other["data"] = {"fixture": True, "fixture_corpus_sentences": 500}
    markers = [f"{other['results_dir']}/state/data/{what}.ready.json" for what in ("corpus", "senteval")]
    run_snakemake(
        repo_root, "--cores", "1", "--configfile", write(other, workdir / "other.yaml"), "--", *markers
    )
    nothing_to_do(_dry_run(repo_root, workdir, config, "after-other"))


# --- a moved checkout: a finished demo copied to another path plans nothing again -----------------------


def snakemake_in(checkout: Path, *args: str) -> str:
    """The output of a successful plain ``python -m snakemake`` in ``checkout`` (not the forked server)."""
    env = {k: v for k, v in dict(os.environ, **OFFLINE).items() if k != "PYTHONPATH"}
    argv = [sys.executable, "-m", "snakemake", "-s", str(checkout / "Snakefile"), *args]
    return succeeded(subprocess.run(argv, cwd=checkout, env=env, capture_output=True, text=True, timeout=600))


def test_a_copy_retrains_nothing_even_from_old_records_and_a_changed_loss_its_cells(
    repo_root, finished_demo, tmp_path
):
    """Loss code stamps are recorded relative to the checkout, so a copy elsewhere retrains nothing; records
    from before the stamps, naming the module by absolute path, are migrated (contrastlab.workflow.sources)
    by the first run, which retrains nothing; in the copy, a comment in nie2023.py (both cells' losses)
    retrains nothing, a change of its code both and nothing else, one of a module no cell uses nothing."""
    workdir, config, _ = finished_demo
    # the checkout the demo ran in, copied as `cp -a` would (its .snakemake records included) with a src/
    # of its own, which its Snakemake imports
    checkout = tmp_path / "repo"
    shutil.copytree(repo_root, checkout, symlinks=True)
    (checkout / "src").unlink()
    shutil.copytree(REPO_ROOT / "src", checkout / "src", ignore=shutil.ignore_patterns("__pycache__"))
    configfile = write(config, workdir / "copied.yaml")
    nothing_to_do(snakemake_in(checkout, "-n", "--configfile", configfile))
    relative = "src/contrastlab/losses/nie2023.py"
    stamp, old = f".snakemake/contrastlab/code/{relative}.code", str(checkout / relative)
    shutil.rmtree(checkout / ".snakemake" / "contrastlab")  # as before the stamps: records of the module
    records = [p for p in (checkout / ".snakemake" / "metadata").rglob("*") if p.is_file()]
    rewritten = 0
    for record in records:
        data = json.loads(record.read_text())
        if stamp in data.get("input", []):
            data["input"] = sorted(old if p == stamp else p for p in data["input"])
            data["input_checksums"].pop(stamp)
            data["input_checksums"][old] = (
                "sha256:" + hashlib.sha256((checkout / relative).read_bytes()).hexdigest()
            )
            record.write_text(json.dumps(data))
            rewritten += 1
    assert rewritten == 4  # the two training jobs, a record per output (model, train_log.jsonl)
    nothing_to_do(snakemake_in(checkout, "-n", "--configfile", configfile))
    assert not any(old in record.read_text() for record in records)
    used = checkout / relative
    used.write_text(used.read_text() + "# a comment both demo cells' module holds\n")
    nothing_to_do(snakemake_in(checkout, "-n", "--configfile", configfile))
    unused = checkout / "src" / "contrastlab" / "losses" / "oar.py"
    unused.write_text(unused.read_text() + "EDITED = 1  # code no demo cell runs\n")
    nothing_to_do(snakemake_in(checkout, "-n", "--configfile", configfile))
    used.write_text(used.read_text() + "EDITED = 1  # code both demo cells' losses hold\n")
    output = snakemake_in(checkout, "-n", "--configfile", configfile)
    counts = job_counts(output)
    assert counts["train"] == 2 and counts["encode"] == counts["evaluate"] == 2, counts
    assert "encode_pretrained" not in counts and "evaluate_pretrained" not in counts, counts
    assert "corpus" not in counts and "fetch_backbone" not in counts, counts
    assert output.count(f"Updated input files: {stamp}") == 2, output[-3000:]


# --- Snakemake's own report of the demo above: tables, figures and report.html under their papers ------

#: The report's category of each paper the reduced demo draws (report/report.smk: as its tables name it).
CATEGORIES = {"nie2023": "Nie et al. 2023", "oar": "OAR 2024"}


@pytest.fixture(scope="module")
def reported_demo(repo_root, finished_demo):
    """``snakemake --report`` of :func:`finished_demo` and a dry run after it: the archive's members,
    its report.html's embedded values and both commands' output."""
    workdir, config, _ = finished_demo
    configfile = write(config, workdir / "report.yaml")
    archive = workdir / "report.zip"
    report_output = run_snakemake(repo_root, "--configfile", configfile, "--report", str(archive))
    dry_run = run_snakemake(repo_root, "--configfile", configfile, "-n", "--cores", "2")
    with zipfile.ZipFile(archive) as zipped:
        members = {info.filename: info.file_size for info in zipped.infolist()}
        html = zipped.read("report/report.html").decode()
    return SimpleNamespace(
        config=config,
        results=Path(config["results_dir"]),
        members=members,
        categories=embedded(html, "categories"),
        entries=embedded(html, "results"),
        description=embedded(html, "workflow_desc"),
        report_output=report_output,
        dry_run=dry_run,
    )


def embedded(html: str, name: str):
    """The JSON value Snakemake's report.html assigns to ``var <name>`` in its script of that id (the
    bundled libraries have their own ``var results``)."""
    script = html.index(f'<script id="{name.replace("_", "-")}">')
    start = html.index(f"var {name} = ", script) + len(f"var {name} = ")
    return json.JSONDecoder().raw_decode(html, start)[0]


def archived(demo, path: Path) -> int:
    """The size of ``path``'s copy in the archive (report/<data_uri>), asserting it is there."""
    member = f"report/{demo.entries[str(path)]['data_uri']}"
    assert member in demo.members, (member, sorted(demo.members)[:20])
    return demo.members[member]


def test_every_figure_png_is_in_the_archive_under_its_paper_and_figures(reported_demo):
    """Each figure's PNG under its paper's Figures, labelled with its place in the paper."""
    demo = reported_demo
    figures = catalog.figures(cl_config.Grid(cl_config.validate(json.loads(json.dumps(demo.config)))))
    assert {paper_of(f["name"]) for f in figures} == set(CATEGORIES)
    for paper, category in CATEGORIES.items():
        expected = sorted(
            str(demo.results / "figures" / f"{f['name']}.png")
            for f in figures
            if paper_of(f["name"]) == paper
        )
        assert sorted(demo.categories[category]["Figures"]) == expected
        for path in expected:
            assert archived(demo, Path(path)) == Path(path).stat().st_size
    labels = {
        Path(p).stem: demo.entries[p]["labels"]["figure"]
        for p in demo.categories["Nie et al. 2023"]["Figures"]
    }
    assert labels["nie2023_fig2a"] == "Nie Fig. 2a" and labels["training_curves"] == "Nie Fig. 1b-d"
    synthetic = demo.entries[str(demo.results / "figures" / "oar_synthetic" / "table2.png")]
    assert synthetic["labels"] == {"figure": "OAR Table 2 (synthetic)"}
    assert synthetic["job_properties"]["rule"] == "oar_synthetic"  # the figure's own job, not the tables'
    assert "oar_synthetic" in synthetic["caption"] and "``" not in synthetic["caption"]  # rendered
    assert "javascript:app.showResultInfo" in synthetic["caption"]  # the link to report.html's entry


def test_the_tables_and_report_html_are_in_the_archive_under_their_categories(reported_demo):
    demo = reported_demo
    # the bridge, scores and claims tables are no paper's
    tables = sorted(
        p for p in (demo.results / "tables").glob("*.csv") if p.stem not in ("bridge", "scores", "claims")
    )
    assert {p.stem for p in tables} >= {"nie2023_table1", "nie2023_table2"}, tables
    listed = demo.categories["Nie et al. 2023"]["Tables"]
    assert sorted(listed) == [str(p) for p in tables]
    for path in tables:
        assert archived(demo, path) == path.stat().st_size
    entry = demo.entries[str(demo.results / "tables" / "nie2023_table1.csv")]
    assert entry["labels"] == {"table": "Table 1: STS.Avg and TR.Avg"}
    assert "published number" in entry["caption"] and "Markdown and LaTeX" in entry["caption"]
    assert not any(path.endswith((".md", ".tex")) for path in demo.entries)  # the CSV's caption names them
    report = demo.results / "report.html"
    assert demo.categories["Report"] == {"Other": [str(report)]}  # no subcategory
    assert archived(demo, report) == report.stat().st_size
    assert "self-contained" in demo.entries[str(report)]["caption"]
    assert f"{demo.results}/report.html" in demo.description
    assert "Open the project" in demo.description
    assert set(demo.categories) == {*CATEGORIES.values(), "Report"}
    assert "Report created" in demo.report_output, demo.report_output[-2000:]
    # a finished run, reported or not (report() flags are not params), dry-runs to nothing
    assert "Nothing to be done" in demo.dry_run, demo.dry_run[-3000:]


# --- a plain `snakemake --cores N` after an edit in scripts/ retrains nothing. Last: it edits the copy. ---


@contextlib.contextmanager
def own_copies(repo_root: Path, *names: str):
    """The working copy's links ``names`` replaced by copies of their folders for the block, so an edit
    leaves the repository alone."""
    targets = {name: os.readlink(repo_root / name) for name in names}
    for name, target in targets.items():
        (repo_root / name).unlink()
        shutil.copytree(target, repo_root / name, symlinks=True)
    try:
        yield
    finally:
        for name, target in targets.items():
            shutil.rmtree(repo_root / name)
            (repo_root / name).symlink_to(target)


def test_a_plain_snakemake_after_an_edited_script_has_nothing_to_do(repo_root, finished_demo):
    """profiles/default's rerun triggers leave out ``code``: an edited training script retrains no cell;
    the control with the ``code`` trigger back sees the edit."""
    workdir, config, _ = finished_demo
    configfile = write(config, workdir / "plain.yaml")
    with own_copies(repo_root, "rules", "scripts"):
        script = repo_root / "scripts" / "train.py"
        script.write_text(script.read_text() + "# an edit after the run (tests/e2e/test_pipeline.py)\n")
        done = snakemake_process(repo_root, "--cores", "2", "--configfile", configfile)
        control = run_snakemake(
            repo_root, "-n", "--configfile", configfile, "--rerun-triggers", "mtime", "params", "code"
        )
    output = succeeded(done)
    assert "Using workflow specific profile profiles/default" in output, output[:2000]
    assert "Nothing to be done (all requested files are present and up to date)." in output, output[-3000:]
    cells = cl_config.Grid(cl_config.validate(json.loads(json.dumps(config)))).cells
    assert job_counts(control)["train"] == len(cells) == 2, control[-3000:]  # cl and mpt
    assert "Code has changed since last execution" in control
    assert os.readlink(repo_root / "scripts") == str(REPO_ROOT / "scripts")  # the link is back


@pytest.mark.fault(
    "a finished cell's metrics JSON cut to half, then a dry run",
    "the cell named in one line; its evaluation and what reads it planned, nothing else",
)
def test_a_cut_metrics_file_is_named_and_only_its_evaluation_is_redone(repo_root, finished_demo, observed):
    """The run's first check moves a truncated metrics file aside, so the cell's encode and evaluate are
    planned with what reads them (Snakemake alone reruns nothing for it)."""
    workdir, config, results = finished_demo
    cell = "nie2023/tiny-bert/cl/seed42"
    metrics = results / "metrics" / cell / "senteval.json"
    record = finished.record_path(results, metrics)
    whole, recorded, stat = metrics.read_bytes(), record.read_bytes(), metrics.stat()
    try:
        metrics.write_bytes(whole[: len(whole) // 2])
        output = _dry_run(repo_root, workdir, config, "cut-metrics")
        (line,) = [line for line in output.splitlines() if line.startswith("contrastlab:")]
        observed(line)
        assert line.startswith(
            f"contrastlab: {cell}: {metrics} is {len(whole) // 2:,} bytes, not the {len(whole):,}"
        )
        counts = job_counts(output)
        assert counts["encode"] == counts["evaluate"] == 1 and "train" not in counts, counts
        assert "method=mpt" not in output
    finally:
        (results / "state" / "set-aside" / "metrics" / cell / "senteval.json").unlink(missing_ok=True)
        metrics.write_bytes(whole)
        os.utime(metrics, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        record.write_bytes(recorded)
