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
