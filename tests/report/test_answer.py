"""The report's first screen (contrastlab.report.answer): a toy preset says so before any count; one row per
paper, its main number beside ours and its claims counted by verdict; the key to the marks."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from test_papers import FOUR_PAPERS

from contrastlab import config as cl_config
from contrastlab.blocks import Cell, Link, cell_text
from contrastlab.config import Grid
from contrastlab.papers import PAPERS as RECORDS
from contrastlab.paths import REPO_ROOT
from contrastlab.report.answer import headline_row, short_title, toy_blocks
from contrastlab.report.claims import ClaimResult, load_claims
from contrastlab.tables import get_spec
from contrastlab.tables.assemble import assemble
from tests.tables.test_verdicts import MACL_CONFIG, macl_metrics

#: The first screen's table: each paper's main number beside ours, then its claims counted by verdict.
HEADER = (
    "| paper | main number | published | ours | Δ | reproduced | not | unsupported | undecided | not run |"
)


@pytest.fixture(scope="module")
def demo_answer(unrun_demo) -> str:
    """The demo preset's report.md up to its folded reading guide (no cell trained)."""
    report = (unrun_demo / "report.md").read_text(encoding="utf-8")
    return report[: report.index('<details markdown="1">')]


def test_a_toy_preset_says_so_before_any_count(demo_answer):
    """The demo's stand-ins are named before the first count; the papers' own backbones need no such line."""
    lines = demo_answer.splitlines()
    assert lines[0] == "# Paper tables: a config given in code"  # the run's name (issue 86): no commit yet
    assert lines[2:4] == ["## The answer", ""]
    assert lines[4] == (
        "**Toy numbers**: this run's backbones stand in for the papers' (tiny-bert for bert-base, minilm for "
        "roberta-base, resnet18-w8 for resnet18-cifar, resnet18-w8 for resnet18-oar); the numbers and "
        "verdicts below exercise the code and say nothing about the papers. Full run: `config.yaml`."
    )  # the toy run points to the papers' own, whose "not run" line below gives the command
    assert lines[5:7] == ["", HEADER]
    assert toy_blocks({}) == [] and toy_blocks({"nie2023": {}}) == []
    full = Grid(cl_config.load(REPO_ROOT / "config.yaml"))
    assert toy_blocks({e: m for e, m in full.options.verdict_stand_ins.items() if m}) == []


def test_each_papers_main_number_and_claim_counts_are_one_row_of_the_first_screen(demo_answer):
    """Per paper its headline cell beside ours and its claims counted by verdict; all papers last; the key."""
    table = demo_answer[demo_answer.index("| paper | main number |") :].split("\n\n", 1)[0]
    added = [p for p in RECORDS if p.prefix not in FOUR_PAPERS]  # docs/adding-a-paper.md's: a row each
    rows = [line for line in table.splitlines() if not any(line.startswith(f"| {p.name} |") for p in added)]
    assert len(rows) == len(table.splitlines()) - len(added)
    # no cell of the demo has run: "not run" where the demo's grid has every cell of a part, else "not
    # configured" (an added paper's claims too: the demo has no experiment of it)
    outside = 37 + sum(len(load_claims(p.prefix)["claims"]) for p in added)
    assert rows == [
        HEADER,
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        "| Nie et al. 2023 | [Table 1](tables/nie2023_table1.md): L_mpt STS.Avg, BERT-base | 77.25 | not run "
        "(tiny-bert) | – | 0 | 0 | 0 | 0 | 3 |",
        "| Li, Zhang & Nie 2024 | [Table 3](tables/li2024_table3.md): mMHE STS.Avg, BERT-base | "
        "78.40 (+15.8) | not run (tiny-bert) | – | 0 | 0 | 0 | 0 | 5 |",
        "| Huang et al. 2023 | [Table B.4](tables/macl_tableB4.md): w/ MACL STS.Avg, BERT-base | "
        "76.66 (+0.41) | not run (tiny-bert) | – | 0 | 0 | 0 | 0 | 2 |",
        "| OAR 2024 | [Table 3](tables/oar_table3.md): OAR-InfoNCE 10% labels, resnet18-oar | 68.56 | "
        "not run (resnet18-w8) | – | 0 | 0 | 0 | 0 | 11 |",
        "| All papers |  |  |  |  | 0 | 0 | 0 | 0 | 21 |",
    ]
    key, not_run = demo_answer[demo_answer.index(table) + len(table) :].strip().split("\n\n")
    # what would run the claims no cell of this run has: the full preset's command, each word shell-quoted
    assert not_run == (
        f"Not run: 21 claims whose cells have no metrics in this run; not configured: {outside} claims whose "
        "cells are outside this preset's grid; the full run (`config.yaml`) trains them all: "
        "`.venv/bin/snakemake --cores all --configfile config.yaml` (`make plan` first)."
    )
    assert key == (
        "Key: Δ = ours − published, with its seed-noise verdict: ≈ within noise, ▲ above, ▼ below the "
        "paper beyond noise, ? undecided (too few seeds to measure the noise); (+…) after a number: its "
        "improvement over the unmodified loss, as the paper prints it (Li, Zhang & Nie 2024: mMHE over mhe; "
        "Huang et al. 2023: w/ MACL over SimCSE), ours likewise where both ran; the claim columns count each "
        "paper's claims by verdict (not: not reproduced; unsupported: not reproduced, and the paper's own "
        "tables do not support the claim either), listed in its section."
    )
    assert "Tally:" not in demo_answer and "All papers:" not in demo_answer  # no prose line of counts


def test_the_key_names_the_stand_in_mark_and_the_claim_columns_count_each_verdict():
    """The key explains † where a row has it; each verdict's count in its column, badged above zero."""
    from contrastlab.report.answer import key_text, tally_cells
    from contrastlab.tables.render import DIVERGED_MARK, STAND_IN_MARK

    assert (STAND_IN_MARK, DIVERGED_MARK) == ("†", "‡")
    verdicts = ["reproduced", "not run", "undecided", "reproduced", "not reproduced"]
    results = [ClaimResult({"paper": "nie2023"}, v, []) for v in verdicts]
    results.append(
        ClaimResult({"paper": "nie2023", "paper_tables": "Table 1 disagrees"}, "not reproduced", [])
    )
    assert tally_cells(results) == {
        "reproduced": Cell("2", "reproduced"),
        "not": Cell("1", "not-reproduced"),
        "unsupported": Cell("1", "paper-unsupported"),
        "undecided": Cell("1", "undecided"),
        "not run": Cell("1", "not-run"),
    }
    assert tally_cells([]) == dict.fromkeys(["reproduced", "not", "unsupported", "undecided", "not run"], "0")
    rows = [{"Δ": Cell("-3.26 ?†", "undecided", "?")}, {"Δ": "–"}]
    dagger = (
        "; † ours on a toy backbone standing in for the paper's (named above), against the number the paper "
        "gives its backbone;"
    )
    assert dagger in key_text(rows, []) and "†" not in key_text(rows[1:], [])
    assert (
        "(+…) after a number: its improvement over the unmodified loss, as the paper prints it (P: a over b)"
        in (key_text(rows[1:], ["P: a over b"]))
    )


def test_the_main_number_is_a_published_cell_of_the_papers_table():
    from contrastlab.report.claims import PAPERS, load_claims
    from contrastlab.tables.published import load_published

    for paper in PAPERS:
        if paper not in FOUR_PAPERS and "headline" not in load_claims(paper):
            continue  # optional (docs/adding-a-paper.md); the four papers' first screen shows theirs
        headline = load_claims(paper)["headline"]
        published = load_published(headline["table"])
        cell = published[
            (published["backbone"] == headline["backbone"])
            & (published["method"] == headline["method"])
            & (published["key"] == headline["task"])
        ]
        assert len(cell) == 1 and cell["value"].notna().all(), (paper, headline)


def test_the_main_number_beside_ours_on_its_own_backbone_and_on_a_stand_in():
    """MACL Table B.4 with three seeds (tests.tables.test_verdicts): ours on BERT-base itself, then the
    same numbers on tiny-bert standing in for it; Δ against 76.66 either way, the stand-in's marked †."""
    headline = {"table": "macl_tableB4", "method": "macl", "task": "sts_avg", "backbone": "bert-base"}
    own = assemble(get_spec("macl_tableB4"), Grid(MACL_CONFIG), macl_metrics())
    # the table's link names its place on the page (report.html), Δ's marker its verdict's badge
    assert headline_row(own, headline, "tables/macl_tableB4.md") == {
        "main number": [
            Link("Table B.4", "tables/macl_tableB4.md", "macl-tableB4"),
            ": w/ MACL STS.Avg, BERT-base",
        ],
        "published": "76.66 (+0.41)",
        "ours": "71.00 ± 1.00 (-5.50)",
        "Δ": Cell("-5.66 ▼", "below", "▼"),
    }
    toy = {
        **MACL_CONFIG,
        "experiments": {"macl": {**MACL_CONFIG["experiments"]["macl"], "backbones": ["tiny-bert"]}},
        "tables": {"verdict_stand_ins": {"macl": {"tiny-bert": "bert-base"}}},
    }
    metrics = macl_metrics().replace({"backbone": {"bert-base": "tiny-bert"}})
    stand_in = assemble(get_spec("macl_tableB4"), Grid(toy), metrics)
    row = headline_row(stand_in, headline, "x.md")  # the toy warning names the stand-in, the key its †
    # ours names the toy backbone it ran (report.html: on a line of its own under the number)
    assert row["ours"] == ["71.00 ± 1.00 (-5.50)", Cell(" (tiny-bert)", "backbone")]
    assert cell_text(row["ours"]) == "71.00 ± 1.00 (-5.50) (tiny-bert)" and cell_text(row["Δ"]) == "-5.66 ▼†"
    assert row["published"] == "76.66 (+0.41)"
    with pytest.raises(ValueError, match="names no cell"):
        headline_row(own, {**headline, "task": "STS99"}, "x.md")


def test_not_run_claims_name_the_command_that_runs_them():
    """A "not run" claim names the shell-quoted command that runs it; nothing when every claim ran."""
    from contrastlab.report.answer import full_run_command, not_run_text

    results = [ClaimResult({"paper": "nie2023"}, v, []) for v in ("not run", "reproduced", "not run")]
    command = ".venv/bin/snakemake --cores all --configfile config.yaml"
    assert not_run_text(results, "config.yaml") == (
        f"Not run: 2 claims whose cells have no metrics in this run; `{command}` runs them (it resumes "
        "where the run stopped)."
    )
    assert not_run_text(results, "config/demo.yaml").endswith(
        f"the full run (`config.yaml`) trains them all: `{command}` (`make plan` first)."
    )
    # a claim outside the preset's grid (a rerun of the preset cannot run it) is counted apart
    results[2].configured = False
    assert not_run_text(results, "config/demo.yaml").startswith(
        "Not run: 1 claims whose cells have no metrics in this run; not configured: 1 claims whose cells are "
        "outside this preset's grid; the full run (`config.yaml`) trains them all"
    )
    assert not_run_text(results[2:], "config.yaml").startswith("Not configured: 1 claims whose cells are")
    assert not_run_text(results[1:2], "config.yaml") == ""
    assert full_run_command("my presets/a.yaml").endswith("--configfile 'my presets/a.yaml'")


def test_the_add_seeds_script_lines_pick_each_steps_cells():
    """The report's add-seeds script: one ``run`` line per step, then the tables (that bash passes Snakemake
    what ``make add-seeds`` prints: test_printed_commands.py)."""
    from contrastlab.report.answer import add_seeds_script

    plan = [
        dict(
            experiment="nie2023",
            backbone="tiny-bert",
            methods=["cl", "mpt"],
            seeds=[42, 43, 44],
            new=[43, 44],
        ),
        dict(
            experiment="macl_cifar10",
            backbone="resnet18-w8",
            methods=["macl-bs64", "ntxent-bs64"],
            seeds=list(range(42, 52)),
            new=list(range(44, 52)),
        ),
    ]
    assert add_seeds_script(plan)[2:] == [
        "run 'select={backbones: [tiny-bert], experiments: [nie2023], methods: [cl, mpt], seeds: [43, 44]}'",
        "run 'select={backbones: [resnet18-w8], experiments: [macl_cifar10], methods: [macl-bs64, "
        "ntxent-bs64], seeds: [44, 45, 46, 47, 48, 49, 50, 51]}'",
        "run 'tables={partial: true}' --forcerun tables",
    ]


NIE_PLAN = [
    dict(experiment="nie2023", backbone="tiny-bert", methods=["cl"], seeds=[42, 43, 44], new=[43, 44])
]


def test_the_add_seeds_lines_name_the_runs_preset_and_the_default_profile(monkeypatch):
    """The script names the workflow's ``--configfile`` (else ``"$CONFIG"``) and never a profile."""
    from contrastlab.config.command_line import CONFIGFILES_VARIABLE, configfile_words
    from contrastlab.report import answer

    monkeypatch.setattr(answer, "seed_plan", lambda results, grid: NIE_PLAN)
    select = "run 'select={backbones: [tiny-bert], experiments: [nie2023], methods: [cl], seeds: [43, 44]}'"
    tables = "run 'tables={partial: true}' --forcerun tables"
    preset = configfile_words(["/w/my presets/it's demo.yaml"], "/w")
    assert preset == "'my presets/it'\"'\"'s demo.yaml'"
    monkeypatch.setenv(CONFIGFILES_VARIABLE, preset)
    intro, code = answer.add_seeds_blocks([], None)
    assert code.box == "commands" and code.lines == [
        "SEEDS='experiments={nie2023: {seeds: [42, 43, 44]}}'",
        f'run() {{ .venv/bin/snakemake --configfile {preset} --config "$SEEDS" "$@"; }}',
        select,
        tables,
    ]
    assert intro.text.startswith(
        "More seeds for the cells of the undecided claims only, on this run's preset:"
    )
    assert f"(`make add-seeds CONFIG={preset}` prints the commands written out;" in intro.text
    assert not any("$CONFIG" in line or "profile" in line for line in [intro.text, *code.lines])
    monkeypatch.delenv(CONFIGFILES_VARIABLE)
    intro, code = answer.add_seeds_blocks([], None)
    assert code.lines[1] == 'run() { .venv/bin/snakemake --configfile "$CONFIG" --config "$SEEDS" "$@"; }'
    assert "with `CONFIG` set to the preset this run came from" in intro.text
    assert code.lines[2:] == [select, tables]
    _, code = answer.add_seeds_blocks([], None, configfile="config/cpu.yaml")
    assert code.lines[1].startswith("run() { .venv/bin/snakemake --configfile config/cpu.yaml --config")
    # a claim that needs more seeds than the commands add is told to stay undecided after them
    assert "at most" not in intro.text
    monkeypatch.setattr(answer, "undecided_cells", lambda results, grid: {("nie2023", "tiny-bert"): {"cl"}})
    needing = [SimpleNamespace(seeds_needed=n) for n in (45, 101, 3, None)]
    intro, _ = answer.add_seeds_blocks(needing, None)
    capped = "; they bring a cell to 10 seeds at most, which leaves 2 of these claims undecided):"
    assert intro.text.endswith(capped)


def test_the_printed_commands_keep_the_runs_config_words(monkeypatch):
    """A run given ``--config 'results_dir=...'`` (or data paths) is resumed and seeded with them, in the
    same ``--config`` as the seeds (a second one would replace the first), not into the preset's folder."""
    from contrastlab.config.command_line import CONFIG_WORDS_VARIABLE, CONFIGFILES_VARIABLE
    from contrastlab.report import answer

    monkeypatch.setattr(answer, "seed_plan", lambda results, grid: NIE_PLAN)
    monkeypatch.setenv(CONFIGFILES_VARIABLE, "config.yaml")
    monkeypatch.setenv(CONFIG_WORDS_VARIABLE, "'results_dir=/scratch/my res'")
    intro, code = answer.add_seeds_blocks([], None)
    words = "--config 'results_dir=/scratch/my res'"
    assert code.lines[1] == f'run() {{ .venv/bin/snakemake --configfile config.yaml {words} "$SEEDS" "$@"; }}'
    assert "make add-seeds CONFIG" not in intro.text  # it would seed the preset's own folder
    not_run = answer.not_run_text([SimpleNamespace(kind="not run")], "config.yaml")
    assert f"--configfile config.yaml {words}` runs them (it resumes" in not_run


def test_the_first_screens_rows_count_uneven_papers_and_all_papers_sums_them():
    """Uneven, unrun and claimless papers get their rows (or none); All papers sums them by verdict."""

    from contrastlab.report.answer import answer_rows
    from contrastlab.report.claims import NOT_REPRODUCED, NOT_RUN, PAPERS, REPRODUCED, UNDECIDED

    first, second = PAPERS[0], PAPERS[1]
    verdicts = {first: [REPRODUCED, REPRODUCED, NOT_REPRODUCED, UNDECIDED], second: [NOT_RUN] * 3}
    results = [SimpleNamespace(claim={"paper": p}, kind=v) for p, vs in verdicts.items() for v in vs]
    rows, gains = answer_rows(results, [], {}, Path("."))
    counts = [
        [cell_text(row[c]) for c in ("reproduced", "not", "unsupported", "undecided", "not run")]
        for row in rows
    ]
    assert [row["paper"] for row in rows] == [short_title(first), short_title(second), "All papers"]
    assert counts == [["2", "1", "0", "1", "0"], ["0", "0", "0", "0", "3"], ["2", "1", "0", "1", "3"]]
    assert [rows[0][c] for c in ("main number", "published", "ours", "Δ")] == ["–"] * 4 and gains == []
    assert [rows[2][c] for c in ("main number", "published", "ours", "Δ")] == [""] * 4
