"""The report's first screen (contrastlab.report.answer): a toy preset says so before any count."""

from __future__ import annotations

import pytest

from contrastlab import config as cl_config
from contrastlab.config import Grid
from contrastlab.paths import REPO_ROOT, Results
from contrastlab.report.answer import toy_lines


@pytest.fixture(scope="module")
def demo_answer(tmp_path_factory) -> str:
    """The demo preset's report.md up to its folded reading guide (no cell trained)."""
    from contrastlab.report import build_report

    root = tmp_path_factory.mktemp("demo-answer")
    demo = cl_config.load(REPO_ROOT / "config" / "demo.yaml")
    build_report(Results(root), demo)
    report = (root / "report.md").read_text(encoding="utf-8")
    return report[: report.index('<details markdown="1">')]


def test_a_toy_preset_says_so_before_any_count(demo_answer):
    """Issue 65: the demo's stand-in backbones are named before the first tally ("these are toy numbers"
    before "not reproduced N"); a preset of the papers' own backbones has no such line."""
    lines = demo_answer.splitlines()
    assert lines[2:4] == ["## The answer", ""]
    assert lines[4] == (
        "**Toy numbers**: this run's backbones stand in for the papers' (tiny-bert for bert-base, minilm for "
        "roberta-base, resnet18-w8 for resnet18-cifar, resnet18-w8 for resnet18-oar); the numbers and "
        "verdicts below exercise the code and say nothing about the papers."
    )
    first_count = min(demo_answer.index(word) for word in ("reproduced 0", "not run "))
    assert demo_answer.index("**Toy numbers**") < first_count
    assert toy_lines({}) == [] and toy_lines({"nie2023": {}}) == []
    full = Grid(cl_config.load(REPO_ROOT / "config.yaml"))
    assert toy_lines({e: m for e, m in full.options.verdict_stand_ins.items() if m}) == []


def test_each_papers_main_number_stands_beside_ours_on_the_first_screen(demo_answer):
    """Issue 65: one line per paper, its main number (the claim file's ``headline``, a cell of one of its
    tables, read from the published CSV) beside ours; where the demo leaves the paper's backbone out,
    ours is the toy backbone's that stands in for it, named so."""
    table = demo_answer[demo_answer.index("| paper | main number |") :].split("\n\n", 1)[0]
    assert table.splitlines() == [
        "| paper | main number | published | ours | Δ |",
        "|---|---|---:|---:|---:|",
        "| Nie et al. 2023 | [Table 1](tables/nie2023_table1.md): L_mpt STS.Avg, BERT-base | 77.25 | not run "
        "(tiny-bert, for BERT-base) | – |",
        "| Li, Zhang & Nie 2024 | [Table 3](tables/li2024_table3.md): mMHE STS.Avg, BERT-base | "
        "78.40 (+15.8) | not run (tiny-bert, for BERT-base) | – |",
        "| Huang et al. 2023 | [Table B.4](tables/macl_tableB4.md): w/ MACL STS.Avg, BERT-base | 76.66 "
        "(+0.41) | not run (tiny-bert, for BERT-base) | – |",
        "| OAR 2024 | [Table 3](tables/oar_table3.md): OAR-InfoNCE 10% labels, resnet18-oar | 68.56 | "
        "not run (resnet18-w8, for resnet18-oar) | – |",
    ]
    assert demo_answer.index("**Toy numbers**") < demo_answer.index(table) < demo_answer.index("reproduced 0")


def test_the_main_number_is_a_published_cell_of_the_papers_table():
    from contrastlab.report.claims import PAPERS, load_claims
    from contrastlab.tables.published import load_published

    for paper in PAPERS:
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
    from contrastlab.report.answer import headline_row
    from contrastlab.tables import get_spec
    from contrastlab.tables.assemble import assemble
    from tests.tables.test_verdicts import MACL_CONFIG, macl_metrics

    headline = {"table": "macl_tableB4", "method": "macl", "task": "sts_avg", "backbone": "bert-base"}
    own = assemble(get_spec("macl_tableB4"), Grid(MACL_CONFIG), macl_metrics())
    assert headline_row(own, headline, "tables/macl_tableB4.md") == {
        "main number": "[Table B.4](tables/macl_tableB4.md): w/ MACL STS.Avg, BERT-base",
        "published": "76.66 (+0.41)",
        "ours": "71.00 ± 1.00 (-5.50)",
        "Δ": "-5.66 ▼",
    }
    toy = {
        **MACL_CONFIG,
        "experiments": {"macl": {**MACL_CONFIG["experiments"]["macl"], "backbones": ["tiny-bert"]}},
        "tables": {"verdict_stand_ins": {"macl": {"tiny-bert": "bert-base"}}},
    }
    metrics = macl_metrics().replace({"backbone": {"bert-base": "tiny-bert"}})
    stand_in = assemble(get_spec("macl_tableB4"), Grid(toy), metrics)
    row = headline_row(stand_in, headline, "x.md")
    assert row["ours"] == "71.00 ± 1.00 (-5.50) (tiny-bert, for BERT-base)" and row["Δ"] == "-5.66 ▼†"
    assert row["published"] == "76.66 (+0.41)"
    with pytest.raises(ValueError, match="names no cell"):
        headline_row(own, {**headline, "task": "STS99"}, "x.md")


def test_the_add_seeds_script_runs_the_commands_make_add_seeds_prints(tmp_path):
    """Issue 65: the report shows the add-seeds commands as a short script whose every line shows what
    sets it apart (each ``run`` line its cells' ``select``); run by bash with a Snakemake that prints its
    arguments, each line passes the same arguments as the written-out command of ``make add-seeds``."""
    import shlex
    import subprocess

    from contrastlab.report.answer import add_seeds_script
    from contrastlab.report.claims import add_seeds_commands

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
    script = add_seeds_script(plan)
    assert script[2:] == [
        "run 'select={backbones: [tiny-bert], experiments: [nie2023], methods: [cl, mpt], seeds: [43, 44]}'",
        "run 'select={backbones: [resnet18-w8], experiments: [macl_cifar10], methods: [macl-bs64, "
        "ntxent-bs64], seeds: [44, 45, 46, 47, 48, 49, 50, 51]}'",
        "run 'tables={partial: true}' --forcerun tables",
    ]
    fake = tmp_path / ".venv" / "bin" / "snakemake"
    fake.parent.mkdir(parents=True)
    fake.write_text("#!/bin/sh\nprintf '%s\\n' \"$@\"\necho ---\n")
    fake.chmod(0o755)
    config = "my presets/demo.yaml"  # a path with a space stays one word
    ran = subprocess.run(
        ["bash", "-c", "\n".join(script)],
        cwd=tmp_path,
        env={"CONFIG": config, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    )
    passed = [block.strip("\n").split("\n") for block in ran.stdout.split("---\n")[:-1]]
    written = [shlex.split(command)[1:] for command in add_seeds_commands(plan, shlex.quote(config))]
    assert passed == written and len(written) == 3
