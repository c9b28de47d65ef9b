"""report.html: one self-contained page (figures embedded), checked in a real headless browser."""

from __future__ import annotations

import base64
import shutil
import subprocess

import matplotlib.image
import numpy as np
import pytest

from contrastlab.figures.style import figure, house_style, save
from contrastlab.report.html import render_html, write_html_report

REPORT = """# Paper tables

| table | run |
|---|---:|
| Nie Table 1 | 3 |

## Figures

### demo/curve

![demo/curve](figures/demo/curve.png)

A caption. ([csv](figures/demo/curve.csv))
"""


@pytest.fixture
def report(tmp_path):
    with house_style():
        fig, axes = figure(1, 1, width="column")
        axes[0, 0].plot([1, 2, 3], [3, 1, 2], marker="o")
        axes[0, 0].set_xlabel("step")
    save(fig, tmp_path / "figures" / "demo" / "curve")
    path = tmp_path / "report.md"
    path.write_text(REPORT, encoding="utf-8")
    return path


def test_html_embeds_every_figure_and_keeps_the_tables(report):
    page = write_html_report(report).read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and "<table>" in page and "<td>Nie Table 1</td>" in page
    assert 'src="figures/' not in page  # nothing to fetch beside the file
    data = page.split('src="data:image/png;base64,')[1].split('"')[0]
    assert base64.b64decode(data) == (report.parent / "figures" / "demo" / "curve.png").read_bytes()
    assert 'href="figures/demo/curve.csv"' in page  # links stay relative


def test_a_missing_figure_is_named_not_fatal(tmp_path):
    page = render_html("![x](figures/none.png)", tmp_path)
    assert "figure not found" in page and "none.png" in page


def _browser() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


@pytest.mark.skipif(
    _browser() is None, reason="no Chromium on this machine (.ci/run installs Debian's chromium)"
)
def test_headless_chromium_renders_the_page_with_its_figure(report, tmp_path):
    page = write_html_report(report)
    moved = tmp_path / "elsewhere" / "report.html"  # self-contained: works away from the figures
    moved.parent.mkdir()
    shutil.copy(page, moved)
    shutil.rmtree(report.parent / "figures")
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=900,1400"]
    dom = subprocess.run(
        [_browser(), *flags, "--dump-dom", moved.as_uri()], capture_output=True, text=True, timeout=120
    )
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert "<table>" in dom.stdout and "Nie Table 1" in dom.stdout and "data:image/png;base64," in dom.stdout
    shot = tmp_path / "shot.png"
    run = subprocess.run(
        [_browser(), *flags, f"--screenshot={shot}", moved.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0 and shot.exists(), run.stderr[-2000:]
    pixels = matplotlib.image.imread(shot)[..., :3]
    # The figure's blue line (Okabe-Ito #0072B2) is on screen: the embedded image was decoded and drawn.
    blue = np.all(np.abs(pixels - np.array([0x00, 0x72, 0xB2]) / 255) < 0.08, axis=-1)
    assert blue.sum() > 50, int(blue.sum())


CONSTRUCTED = """## Nie et al. 2023

### Claims

Tally: reproduced 2 · not reproduced 1 · paper unsupported 1 · undecided 0 · not run 3 (of 7 claims).

| claim | verdict | numbers |
|---|---|---|
| A beats B | not reproduced: 1 of 2 parts contradicted (Holm-corrected) | +3.52 ± ? |
| G beats H | paper unsupported: not reproduced, as on the paper's own tables | -1.20 ± 0.50 |
| C beats D | reproduced | +1.00 ± 0.50 |
| E beats F | not run | – |

| Method |  | BERT-base STS.Avg |
|---|---|---:|
| L_cl | paper | 76.04 |
|  | ours | not run |
|  | Δ | +1.20 ▲† |
| L_dcl | Δ | -0.31 ≈ |
| L_mpt | Δ | -2.50 ▼ |
| L_met | Δ | -0.10 ? |
"""


def test_verdict_badges_colour_claims_and_table_cells_and_keep_the_words(tmp_path):
    from contrastlab.report.html import BADGE_COLOURS

    page = render_html(CONSTRUCTED, tmp_path)
    # claim verdicts: the word inside a badge of its kind ("not reproduced" is not "reproduced")
    assert '<td><span class="badge v-not-reproduced">not reproduced</span>: 1 of 2 parts' in page
    assert '<td><span class="badge v-reproduced">reproduced</span></td>' in page
    assert '<td><span class="badge v-not-run">not run</span></td>' in page
    assert '<td><span class="badge v-paper-unsupported">paper unsupported</span>: not reproduced, as' in page
    # the grid's seed-noise markers, each in a badge titled with its word; "not run" outside a verdict
    # column and the "± ?" of a claim's numbers stay plain
    assert '+1.20 <span class="badge v-above" title="above">▲</span>†' in page
    assert '-0.31 <span class="badge v-within" title="within noise">≈</span>' in page
    assert '-2.50 <span class="badge v-below" title="below">▼</span>' in page
    assert '-0.10 <span class="badge v-undecided" title="undecided">?</span>' in page
    assert '<td style="text-align: right;">not run</td>' in page and "<td>+3.52 ± ?</td>" in page
    # the tally's counts, each a badge with its number; a zero is no finding and stays uncoloured
    for kind, text in [
        ("reproduced", "reproduced 2"),
        ("not-reproduced", "not reproduced 1"),
        ("paper-unsupported", "paper unsupported 1"),
        ("not-run", "not run 3"),
    ]:
        assert f'<span class="badge v-{kind}">{text}</span>' in page
    assert "· undecided 0 ·" in page and 'v-undecided">undecided 0' not in page
    # the colours: green for reproduced and within noise, red for not reproduced and below
    assert BADGE_COLOURS["reproduced"] == BADGE_COLOURS["within"] == ("#c8e6c9", "#1b5e20")
    assert BADGE_COLOURS["not-reproduced"] == BADGE_COLOURS["below"] == ("#ffcdd2", "#b71c1c")
    for kind, (bg, fg) in BADGE_COLOURS.items():
        assert f".badge.v-{kind} {{ background: {bg}; color: {fg}; }}" in page
    # without the style sheet the page still says every verdict in words
    plain = __import__("re").sub(r"<[^>]+>", "", page.split("</style>")[1])
    assert "not reproduced: 1 of 2 parts" in plain and "reproduced 2 · not reproduced 1" in plain


def test_tally_counts_each_verdict_of_a_constructed_list():
    from contrastlab.report.claims import ClaimResult
    from contrastlab.report.sections import tally_line, verdict_tally

    verdicts = ["reproduced", "not run", "undecided", "reproduced", "not run", "not run", "not reproduced"]
    results = [ClaimResult({"paper": "nie2023"}, v, []) for v in verdicts]
    # a "not reproduced" whose sentence the paper's own tables do not support either: counted apart
    unsupported = {"paper": "nie2023", "paper_tables": "Table 1 disagrees"}
    results += [ClaimResult(unsupported, "not reproduced", []), ClaimResult(unsupported, "undecided", [])]
    assert verdict_tally(results) == {
        "reproduced": 2, "not reproduced": 1, "paper unsupported": 1, "undecided": 2, "not run": 3
    }  # fmt: skip
    assert tally_line(results) == (
        "Tally: reproduced 2 · not reproduced 1 · paper unsupported 1 · undecided 2 · not run 3 "
        "(of 9 claims)."
    )
    assert tally_line([]) == (
        "Tally: reproduced 0 · not reproduced 0 · paper unsupported 0 · undecided 0 · not run 0 "
        "(of 0 claims)."
    )


def test_each_paper_tally_sits_above_its_claims_and_matches_their_badges(tmp_path):
    """A constructed run (MACL Table B.4, three seeds): report.html's tally per paper, above its claims,
    counts the badges of that paper's claim verdicts."""
    import re

    from contrastlab.paths import Results
    from contrastlab.report import build_report
    from contrastlab.report.claims import PAPERS
    from tests.tables.test_verdicts import MACL_CONFIG, macl_metrics

    root = tmp_path / "metrics"
    _write_metrics(root, macl_metrics())
    build_report(Results(tmp_path), MACL_CONFIG, tables=["macl_tableB4"])
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    sections = re.split(r"<h2>", page)
    seen = 0
    for section in sections:
        if "<h3>Claims</h3>" not in section:
            continue
        seen += 1
        claims = section.split("<h3>Claims</h3>", 1)[1].split("<h3>", 1)[0]
        counts = re.sub(r"<[^>]+>", "", claims.split("</p>")[0])  # zero counts carry no badge
        tally = dict(re.findall(r"((?:not |paper )?[a-z]+) (\d+)", counts.removeprefix("\nTally: ")))
        table = claims.split("<table>", 1)[1]
        for word, kind in [
            ("reproduced", "reproduced"),
            ("not reproduced", "not-reproduced"),
            ("paper unsupported", "paper-unsupported"),
            ("undecided", "undecided"),
            ("not run", "not-run"),
        ]:
            assert int(tally[word]) == table.count(f'<td><span class="badge v-{kind}">'), (word, section[:80])
    assert seen == len(PAPERS)
    macl = next(s for s in sections if s.startswith("Huang et al. 2023"))
    assert "not reproduced 1" in macl  # MACL beats SimCSE on STS.Avg: 71 vs 76.5 on BERT-base


def _write_metrics(root, metrics) -> None:
    import json

    for rec in metrics.itertuples():
        path = root / rec.experiment / rec.backbone / rec.method / f"seed{rec.seed}" / "senteval.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        data = json.loads(path.read_text()) if path.exists() else {"scores": {}}
        if rec.task == "sts_avg":
            data["sts_avg"] = rec.score
        else:
            data["scores"][rec.task] = rec.score
        path.write_text(json.dumps(data))
