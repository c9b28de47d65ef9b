"""report.md's sections (contrastlab.report.sections): one meaning per word in the tables' summary, and
the report laid out per paper, in the papers' order."""

from __future__ import annotations

import json

from contrastlab import config as cl_config
from contrastlab.blocks import Heading, cell_text, to_markdown
from contrastlab.config import Grid, paper_of
from contrastlab.paths import REPO_ROOT
from contrastlab.report.sections import figure_order, grid_block, report_blocks, summarize
from contrastlab.tables import get_spec
from contrastlab.tables.assemble import assemble
from contrastlab.tables.render import to_markdown as table_page
from tests.tables.tables_synthetic import scores_frame as _frame


def test_summary_counts_delta_cells_and_verdicts_under_different_words():
    """A toy backbone's verdict counts under "verdicts", not under "Δ cells"; never "compared"."""
    config = cl_config.load(REPO_ROOT / "config" / "cpu.yaml")
    config["tables"]["verdict_stand_ins"] = {"nie2023": {"minilm": "roberta-base"}}
    metrics = _frame(
        [("nie2023", "minilm", "cl", seed, "sts_avg", 70.0 + i) for i, seed in enumerate((42, 43, 44))]
    )
    summary = summarize(assemble(get_spec("nie2023_table1"), Grid(config), metrics))
    assert "compared" not in summary and not any("compared" in v for v in summary.values())
    assert summary["verdicts"] == "1" and summary["mean abs Δ"] == "–"
    assert summary["note"] == (
        "Δ cells: 0 (run, with a published number for their own backbone); 1 cell on backbones not in "
        "the paper, 1 of them with a verdict against a stand-in backbone's number; 2 cells not evaluated "
        "(their tasks are not in evaluation.tasks)"
    )
    assert summary["not run"] == "0"  # the preset's TR.Avg cells are not evaluated, not "not run"


def test_a_task_the_config_leaves_out_reads_not_evaluated_not_not_run(tmp_path):
    """The cpu preset leaves five transfer tasks out of evaluation.tasks: its run cell's TR.Avg columns can
    never fill, so they say "not evaluated" (legend, greyed in the HTML; the summary: test above), not "not
    run"."""
    config = cl_config.load(REPO_ROOT / "config" / "cpu.yaml")
    metrics = _frame([("nie2023", "minilm", "cl", 42, "sts_avg", 74.71)])
    table = assemble(get_spec("nie2023_table1"), Grid(config), metrics)
    page = table_page(table)
    assert "| 74.71 | not evaluated | not evaluated |" in page and "not evaluated: the cell's task" in page
    cells = [c for row in grid_block(table).rows for c in row if cell_text(c) == "not evaluated"]
    assert len(cells) == 2 and all(c.kind == "not-configured" for c in cells)
    # the report's guide says so too, in the singular for one cell, and names no "your own losses" section
    run = dict(metrics_root=tmp_path, grid=None, results_dir=None, metrics=None)
    built = [(table, {e: tmp_path / f"t.{e}" for e in ("md", "csv", "tex")})]
    text = to_markdown(report_blocks(built, tmp_path, **run)) + to_markdown(
        report_blocks(built, tmp_path, **run, sections=[Heading(2, "x")])  # the comparison tables' section
    )
    assert "grid, “not evaluated” where `evaluation.tasks` leaves out their task)" in text
    assert "; 1 cell on backbones not in the paper;" in text and "Then the precision of every" in text
    assert text.count("your own losses") == 1 and "Then your own losses, the precision" in text
    # the papers cpu.yaml has no experiment of say why their claims read "not run"
    from contrastlab.report.sections import claims_sections, projected_cost

    per_paper = claims_sections(Grid(config), metrics, tmp_path, {}, [])[2]
    said = [p for p, blocks in per_paper.items() if "none of the paper's experiments" in to_markdown(blocks)]
    assert said == ["li2024", "macl", "oar"]
    # the cost's sentence in the cost tables' precision (it said "0.0 GPU-h" above a table of 0.03)
    assert (
        "; 0.03 GPU-h for the whole grid, and 1 SentEval probe job on the CPU (0.04 h"
        in projected_cost(Grid(config))[1]
    )


def test_papers_and_figures_in_the_papers_order():
    assert [paper_of(n) for n in ("nie2023_fig3", "nie2023/align_uniform", "oar_synthetic/table2",
                                  "macl_cifar10", "li2024_fig6_m", "compare_nie2023")] == [
        "nie2023", "nie2023", "oar", "macl", "li2024", "compare"]  # fmt: skip
    captions = [
        "Li Fig. 10 (App. B): x",
        "Li Fig. 2: x",
        "Nie Fig. 3b: x",
        "Nie Fig. 1b-d (in part): x",
        "Nie Fig. 1a: x",
        "Nie Fig. 2a: x",
        "OAR Table 2 (synthetic): x",
        "Heatmap of the search",
    ]
    ordered = sorted(captions, key=lambda c: figure_order({"caption": c}))
    assert [c for c in ordered if c.startswith("Nie")] == [
        "Nie Fig. 1a: x", "Nie Fig. 1b-d (in part): x", "Nie Fig. 2a: x", "Nie Fig. 3b: x"]  # fmt: skip
    assert [c for c in ordered if c.startswith("Li")] == ["Li Fig. 2: x", "Li Fig. 10 (App. B): x"]
    assert ordered[-1] == "Heatmap of the search"


def test_the_report_reads_per_paper(unrun_demo):
    """Unrun demo: per paper in order its claims, tables, figures by number, deviations; then Precision."""
    from contrastlab.report.answer import heading
    from contrastlab.report.claims import PAPERS

    report = (unrun_demo / "report.md").read_text(encoding="utf-8")
    starts = [report.index(f"\n## {heading(p)}\n") for p in PAPERS]
    assert starts == sorted(starts)
    nie = report[starts[0] : starts[1]]
    order = [nie.index(h) for h in ("### Claims", "### Tables", "### Figures", "### Deviations from")]
    assert order == sorted(order)
    assert "Tally: reproduced 0 · not reproduced 0 · paper unsupported 0 · undecided 0 · not run" in nie
    assert "#### Nie et al. 2023, Table 1: STS.Avg and TR.Avg\n\n| Method |" in nie  # the grid inline
    figs = [line.removeprefix("#### ") for line in nie.splitlines() if line.startswith("#### nie2023/")]
    assert figs.index("nie2023/align_uniform") < figs.index("nie2023/nie2023_fig2a")  # Fig. 1a before 2a
    assert figs.index("nie2023/nie2023_fig2a") < figs.index("nie2023/nie2023_fig3b")
    oar = report[starts[3] :]
    assert "#### oar_synthetic/table2" in oar.split("## Precision of every cell")[0]


def test_the_report_names_each_input_the_cells_read_with_its_revision_and_digest(tmp_path):
    """Issue 43: the report's provenance names the backbone's resolved revision and the data digests."""
    from contrastlab.report.inputs import input_blocks

    bert = {"source": "hf_id", "hf_id": "google-bert/bert-base-uncased", "revision": "86b5e09" + "0" * 33,
            "weights_sha256": {"model.safetensors": "ab" * 32}}  # fmt: skip
    corpus = {"corpus": "text", "sha256": "cd" * 32, "lines": 1_000_000}
    for seed in (42, 43):
        path = tmp_path / "metrics" / "nie2023" / "bert-base" / "cl" / f"seed{seed}" / "senteval.json"
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps({"meta": {"inputs": {"backbone": bert, "corpus": corpus}}}))
    lines = to_markdown(input_blocks(tmp_path / "metrics", "artifacts.lock.json")).splitlines()
    assert lines[0] == "## Inputs" and "`artifacts.lock.json`" in lines[2]
    table = "\n".join(lines)
    commit = bert["revision"]
    row = f"| backbone | `google-bert/bert-base-uncased` | commit `{commit}` | sha256 abababababab… | 2 |"
    assert row in table
    assert "| corpus | text | 1,000,000 lines | sha256 cdcdcdcdcdcdcdcd | 2 |" in table
    lock = tmp_path / "artifacts.lock.json"  # make cpu and make demo download nothing: they write no lock
    assert f"so no `{lock}` was written" in to_markdown(input_blocks(tmp_path / "metrics", str(lock)))
    lock.write_text("{}")
    assert f"pinned in `{lock}` (commit it" in to_markdown(input_blocks(tmp_path / "metrics", str(lock)))
    assert input_blocks(tmp_path / "empty") == []


def test_the_inputs_name_the_code_and_environment_of_every_training_job(tmp_path):
    """Inputs: each job's commit, versions and device from its last start record; alike jobs share a row."""
    from contrastlab.report.inputs import environment_rows, input_blocks

    def start(sha, dirty, device, name, torch="2.14.1"):
        versions = {"contrastlab": "0.2.0", "torch": torch, "transformers": "5.23.0", "numpy": "2.4.6"}
        meta = {"git_sha": sha, "git_dirty": dirty, "versions": versions}
        return {"event": "start", "device": device, "device_name": name, "meta": meta}

    gpu = start("a" * 40, False, "cuda:0", "NVIDIA H200")
    jobs = {
        "nie2023/bert-base/cl/seed42": [
            start("b" * 40, True, "cpu", "Xeon", "2.13.0"),
            {"event": "end"},
            gpu,
        ],
        "nie2023/bert-base/mpt/seed42": [gpu, {"event": "train", "step": 2}],
        "macl_cifar10/resnet18-cifar/macl-bs64/seed42": [gpu],
        "oar_cifar10/resnet18-oar/infonce/seed42": [start("b" * 40, True, "cpu", "Xeon")],
    }
    for cell, events in jobs.items():
        log = tmp_path / "checkpoints" / cell / "train_log.jsonl"
        log.parent.mkdir(parents=True)
        log.write_text("\n".join(json.dumps(e) for e in events) + '\n{"event": "tra')  # a line cut by a kill
    versions = {"contrastlab": "0.2.0", "torch": "2.14.1", "transformers": "5.23.0"}  # numpy's not shown
    gpu_row = {"commit": "`aaaaaaaaaaaa`", **versions, "device": "cuda:0 (NVIDIA H200)"}
    cpu_row = {"commit": "`bbbbbbbbbbbb` + uncommitted changes", **versions, "device": "cpu (Xeon)"}
    assert environment_rows(tmp_path) == [
        {**gpu_row, "training jobs": "macl_cifar10 ×1, nie2023 ×2"},
        {**cpu_row, "training jobs": "oar_cifar10 ×1"},
    ]
    section = to_markdown(input_blocks(tmp_path / "metrics", "artifacts.lock.json", tmp_path)).splitlines()
    assert section[0] == "## Inputs"
    assert section[2].startswith("The code and environment of every training job")
    assert section[4:6] == [
        "| commit | contrastlab | torch | transformers | device | training jobs |",
        "|---|---|---|---|---|---|",
    ]
    assert environment_rows(tmp_path / "nothing") == []
    assert input_blocks(tmp_path / "none", results_dir=tmp_path / "none") == []


def test_the_report_opens_with_the_answer_and_folds_the_reading_guide(unrun_demo):
    """The answer first, then what decides the undecided claims; the reading guide folded below."""
    from contrastlab.report.answer import heading, short_title, undecided_text
    from contrastlab.report.claims import ClaimResult
    from contrastlab.report.parts import UNDECIDED, PartResult

    def undecided(seeds_needed):
        part = PartResult(backbone="bert-base", terms={}, status=UNDECIDED, seeds_needed=seeds_needed)
        return ClaimResult({"paper": "nie2023"}, UNDECIDED, [part])

    results = [undecided(None), undecided(5), undecided(8), undecided(101)]
    results.append(ClaimResult({"paper": "macl"}, "reproduced", []))
    assert [short_title(p) for p in ("nie2023", "li2024")] == ["Nie et al. 2023", "Li, Zhang & Nie 2024"]
    assert undecided_text(results) == (
        "Undecided claims: Nie et al. 2023: 1 need ≥ 2 seeds per cell to measure the noise, 2 would be "
        "decided at ≤ 8 seeds per cell, 1 need > 100 seeds per cell."
    )
    assert undecided_text(results[-1:]) == ""
    report = (unrun_demo / "report.md").read_text(encoding="utf-8")
    heads = [line for line in report.splitlines() if line.startswith("## ")]
    assert heads[0] == "## The answer"
    answer, rest = report.split('<details markdown="1"><summary>How to read the claims and tables</summary>')
    assert "Each paper's headline claims" not in answer and "Each paper's headline claims" in rest
    assert rest.index("</details>") < rest.index(f"\n## {heading('nie2023')}\n")


def test_a_stand_in_column_is_labelled_and_shows_the_number_it_stands_in_for(unrun_demo):
    """A stand-in's column names and shows the paper number its Δ (†) is against; the files keep n/a."""
    report = (unrun_demo / "report.md").read_text(encoding="utf-8")
    grid = report.split("#### Nie et al. 2023, Table 1: STS.Avg and TR.Avg\n\n", 1)[1].split("\n\n", 1)[0]
    head = [cell.strip() for cell in grid.splitlines()[0].strip("|").split("|")]
    stand_ins = [("tiny-bert", "BERT-base"), ("minilm", "RoBERTa-base")]
    metrics = ("STS.Avg", "TR.Avg", "TR.Avg (test acc)")
    assert head[-6:] == [f"{toy}, for {paper} {metric}" for toy, paper in stand_ins for metric in metrics]
    mpt = next(line for line in grid.splitlines() if line.startswith("| L_mpt | paper |"))
    # BERT-base's 77.25 / 87.56 and RoBERTa-base's 76.42 / 85.10, again under the stand-ins
    assert mpt.endswith("| 77.25 | 87.56 | n/a | 76.42 | 85.10 | n/a |"), mpt
    # and its footnote mark: Li Table 5's "n/a*" (MHS has no W step), under tiny-bert as under BERT-base
    li5 = report.split("| tiny-bert, for BERT-base | L^a + nu L^u,MHE |", 1)[1].split("\n\n", 1)[0]
    assert "|  | L^a + nu L^u,MHS | paper | 72.73 | 77.40 | n/a* | 78.27 |" in li5
    own = (unrun_demo / "tables" / "nie2023_table1.md").read_text(encoding="utf-8")
    assert "| tiny-bert STS.Avg |" in own and "tiny-bert, for BERT-base" not in own  # its legend names it:
    assert "tiny-bert for BERT-base, minilm for RoBERTa-base" in own
    assert next(line for line in own.splitlines() if line.startswith("| L_mpt | paper |")).endswith(
        "| n/a | n/a | n/a | n/a | n/a | n/a |"
    )
    csv = (unrun_demo / "tables" / "nie2023_table1.csv").read_text(encoding="utf-8")
    assert "tiny-bert,mpt,sts_avg,,," in csv and "for BERT-base" not in csv  # no published number, no mark
    # the backbone a toy stands in for is named only where the table has it (MACL's Table 3: RoBERTa)
    macl3 = report.split("#### Huang et al. 2023 (MACL), Table 3", 1)[1].split("\n####", 1)[0]
    assert "| tiny-bert |" in macl3 and "for BERT-base" not in macl3


def test_a_stand_in_setting_that_differs_from_the_number_shown_is_marked_and_counted(unrun_demo):
    """Beside BERT-base's published settings, tiny-bert's batch 16 and rate 3e-5 carry the legend's ≠, and
    the summary counts them (it said "0 match, 0 differ" under a grid showing 16 against 128)."""
    report = (unrun_demo / "report.md").read_text(encoding="utf-8")
    grid = report.split("#### Li et al. 2024, Table 6: hyperparameters, BERT-base\n\n", 1)[1].split("\n\n")[0]
    assert "|  |  | config | 16 ≠ | 3e-5 ≠ | 0.30 | 5e-2 | 1.75 |" in grid.splitlines()
    assert "config vs paper: 3 match, 2 differ" in report and "(≠ after a setting that differs" in report
