"""The demo's report, byte for byte. ``golden/demo-results.tar.gz`` holds what a finished ``make demo``
left that the report reads; rendered as the ``tables`` job renders it, its ``report.md`` is
``golden/demo-report.md`` and its ``report.html`` has the ids of ``golden/demo-report-ids.txt``. When a
change is meant, copy the rendered file the failure names over the golden one and review the diff."""

from __future__ import annotations

import difflib
import re
import tarfile
from pathlib import Path

from contrastlab import config as cl_config
from contrastlab.config import Grid
from contrastlab.config.command_line import CONFIG_WORDS_VARIABLE, CONFIGFILES_VARIABLE
from contrastlab.figures.catalog import figures
from contrastlab.paths import REPO_ROOT, Results
from contrastlab.report import build_report

GOLDEN = Path(__file__).parent / "golden"


def test_the_finished_demo_renders_the_golden_report(tmp_path, monkeypatch):
    results = tmp_path / "results" / "demo"  # where `make demo` writes (config/demo.yaml's results_dir)
    results.mkdir(parents=True)
    with tarfile.open(GOLDEN / "demo-results.tar.gz") as archive:
        archive.extractall(results, filter="data")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(CONFIGFILES_VARIABLE, "config/demo.yaml")  # as rules/common.smk sets it for the job
    monkeypatch.setenv(CONFIG_WORDS_VARIABLE, "")  # make demo gives no --config words
    demo = cl_config.load(REPO_ROOT / "config" / "demo.yaml")
    written = build_report(Results("results/demo"), demo, figures=figures(Grid(demo)))
    assert written[-2:] == [Path("results/demo/report.md"), Path("results/demo/report.html")]
    got, golden = (results / "report.md").read_bytes(), (GOLDEN / "demo-report.md").read_bytes()
    diff = difflib.unified_diff(
        golden.decode().splitlines(),
        got.decode().splitlines(),
        "demo-report.md",
        "rendered",
        lineterm="",
        n=1,
    )
    assert got == golden, f"{results / 'report.md'} differs from the golden file:\n" + "\n".join(
        list(diff)[:40]
    )
    # report.html, from the same document: every heading's id as before, every in-page link to one of them
    page = (results / "report.html").read_text(encoding="utf-8")
    ids = re.findall(r'<h[1-6] id="([^"]+)"', page)
    assert ids == (GOLDEN / "demo-report-ids.txt").read_text(encoding="utf-8").split()
    links = re.findall(r'href="#([^"]+)"', page)
    assert len(links) > 2 * len(ids) and set(links) <= set(ids)
