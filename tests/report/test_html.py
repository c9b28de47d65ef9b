"""report.html: one self-contained page (figures embedded), checked in a real headless browser."""

from __future__ import annotations

import base64
import re
import shutil

import matplotlib.image
import numpy as np
import pytest

from contrastlab.blocks import (
    Cell,
    Code,
    Figure,
    Heading,
    Link,
    Paragraph,
    Table,
    Tally,
    Verdict,
    rows_table,
    to_markdown,
)
from contrastlab.figures.style import figure, house_style, save
from contrastlab.papers import PAPERS
from contrastlab.report.html import BADGE_COLOURS, render_html, write_html_report
from tests.report import chromium
from tests.tables.tables_synthetic import scores_frame, write_scores

REPORT = [
    Heading(1, "Paper tables"),
    rows_table([{"table": "Nie Table 1", "run": 3}], right=1),  # a cell of any value: its text
    Heading(2, "Figures"),
    Figure("demo/curve", "", "figures/demo/curve.png", "A caption.", [Link("csv", "figures/demo/curve.csv")]),
]


def draw_curve(stem) -> None:
    """A small figure (its blue line Okabe-Ito #0072B2) saved at ``stem`` (.png, .pdf)."""
    with house_style():
        fig, axes = figure(1, 1, width="column")
        axes[0, 0].plot([1, 2, 3], [3, 1, 2], marker="o")
        axes[0, 0].set_xlabel("step")
    save(fig, stem)


@pytest.fixture
def report(tmp_path):
    draw_curve(tmp_path / "figures" / "demo" / "curve")
    return write_html_report(REPORT, tmp_path / "report.html")


def test_html_embeds_every_figure_and_keeps_the_tables(report):
    page = report.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and "<table>" in page and "<td>Nie Table 1</td>" in page
    assert '<td style="text-align: right;">3</td>' in page
    assert 'src="figures/' not in page  # nothing to fetch beside the file
    data = page.split('src="data:image/png;base64,')[1].split('"')[0]
    assert base64.b64decode(data) == (report.parent / "figures" / "demo" / "curve.png").read_bytes()
    assert 'href="figures/demo/curve.csv"' in page  # links stay relative


def test_a_missing_figure_is_named_not_fatal(tmp_path):
    page = render_html([Figure("x/none", "", "figures/none.png", "A caption.")], tmp_path)
    assert f"figure not found: {tmp_path / 'figures' / 'none.png'}" in page


needs_chromium = pytest.mark.skipif(
    chromium.browser() is None, reason="no Chromium on this machine (.ci/run installs Debian's chromium)"
)


@needs_chromium
def test_headless_chromium_renders_the_page_with_its_figure(report, tmp_path):
    moved = tmp_path / "elsewhere" / "report.html"  # self-contained: works away from the figures
    moved.parent.mkdir()
    shutil.copy(report, moved)
    shutil.rmtree(report.parent / "figures")
    dom = chromium._run(moved, ["--dump-dom"], 900, 1400)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert "<table>" in dom.stdout and "Nie Table 1" in dom.stdout and "data:image/png;base64," in dom.stdout
    shot = chromium.screenshot(moved, tmp_path / "shot.png", width=900, height=1400)
    pixels = matplotlib.image.imread(shot)[..., :3]
    # The figure's blue line (Okabe-Ito #0072B2) is on screen: the embedded image was decoded and drawn.
    blue = np.all(np.abs(pixels - np.array([0x00, 0x72, 0xB2]) / 255) < 0.08, axis=-1)
    assert blue.sum() > 50, int(blue.sum())


#: A paper's claims table: (claim, verdict word, its head and reasoning, numbers, the verdict cell's markup)
#: per row.
CLAIM_ROWS = [
    (
        "A beats B",
        "not reproduced",
        "",
        ": 1 of 2 parts contradicted (Holm-corrected)",
        "+3.52 ± ?",
        '<td><details class="why"><summary><span class="badge v-not-reproduced">not reproduced</span>'
        "</summary><div>1 of 2 parts contradicted (Holm-corrected)</div></details></td>",
    ),
    (
        "G beats H",
        "paper unsupported",
        "",
        ": not reproduced, as on the paper's own tables",
        "-1.20 ± 0.50",
        '<td><details class="why"><summary><span class="badge v-paper-unsupported">paper unsupported</span>'
        "</summary><div>not reproduced, as on the paper's own tables</div></details></td>",
    ),
    (
        "C beats D",
        "reproduced",
        "",
        "",
        "+1.00 ± 0.50",
        '<td><span class="badge v-reproduced">reproduced</span></td>',
    ),
    ("E beats F", "not run", "", "", "–", '<td><span class="badge v-not-run">not run</span></td>'),
    (  # the share of parts run stays on the line
        "I beats J",
        "undecided",
        " (2/12 parts run)",
        ": needs ≥ 2 seeds per cell to measure the noise",
        "+0.50 ± ?",
        '<td><details class="why"><summary><span class="badge v-undecided">undecided</span> (2/12 parts run)'
        "</summary><div>needs ≥ 2 seeds per cell to measure the noise</div></details></td>",
    ),
]
CONSTRUCTED = [
    Heading(2, "Nie et al. 2023", id="nie2023"),
    Heading(3, "Claims"),
    Tally(
        "Tally: ",
        {"reproduced": 2, "not reproduced": 1, "paper unsupported": 1, "undecided": 0, "not run": 3},
        7,
    ),
    Table(
        ["claim", "verdict", "numbers"],
        [[c, Verdict(w.replace(" ", "-"), w, head, tail), n] for c, w, head, tail, n, _ in CLAIM_ROWS],
    ),
    Table(
        ["Method", "", "BERT-base STS.Avg"],
        [
            ["L_cl", "paper", "76.04"],
            ["", "ours", "not run"],
            ["", "Δ", Cell("+1.20 ▲†", "above", "▲")],
            ["L_dcl", "Δ", Cell("-0.31 ≈", "within", "≈")],
            ["L_mpt", "Δ", Cell("-2.50 ▼", "below", "▼")],
            ["L_met", "Δ", Cell("-0.10 ?", "undecided", "?")],
        ],
        right=2,
    ),
]


def test_verdict_badges_colour_claims_and_table_cells_and_keep_the_words(tmp_path):
    page = render_html(CONSTRUCTED, tmp_path)
    # claim verdicts: the word inside a badge of its kind ("not reproduced" is not "reproduced"); a verdict
    # with reasoning is one line (the share of parts run stays on it), its reasoning folded under it
    for *_, expected in CLAIM_ROWS:
        assert expected in page, expected
    # the grid's seed-noise markers, each in a badge titled with its word; "not run" outside a verdict
    # column and the "± ?" of a claim's numbers stay plain
    assert '+1.20 <span class="badge v-above" title="above">▲</span>†' in page
    assert '-0.31 <span class="badge v-within" title="within noise">≈</span>' in page
    assert '-2.50 <span class="badge v-below" title="below">▼</span>' in page
    assert '-0.10 <span class="badge v-undecided" title="undecided">?</span>' in page
    assert '<td style="text-align: right;">not run</td>' in page and "<td>+3.52 ± ?</td>" in page
    # the tally's counts, each a badge with its number; a zero is no finding and stays uncoloured
    for word, n in [("reproduced", 2), ("not reproduced", 1), ("paper unsupported", 1), ("not run", 3)]:
        assert f'<span class="badge v-{word.replace(" ", "-")}">{word} {n}</span>' in page
    assert "· undecided 0 ·" in page and 'v-undecided">undecided 0' not in page
    # the colours: green for reproduced and within noise, red for not reproduced and below
    assert BADGE_COLOURS["reproduced"] == BADGE_COLOURS["within"] == ("#c8e6c9", "#1b5e20")
    assert BADGE_COLOURS["not-reproduced"] == BADGE_COLOURS["below"] == ("#ffcdd2", "#b71c1c")
    for kind, (bg, fg) in BADGE_COLOURS.items():
        assert f".badge.v-{kind} {{ background: {bg}; color: {fg}; }}" in page
    # without the style sheet the page still says every verdict in words, as report.md does
    plain = re.sub(r"<[^>]+>", "", page.split("</style>")[1])
    assert "not reproduced1 of 2 parts" in plain and "reproduced 2 · not reproduced 1" in plain
    markdown = to_markdown(CONSTRUCTED)
    assert (
        "| A beats B | not reproduced: 1 of 2 parts contradicted (Holm-corrected) | +3.52 ± ? |" in markdown
    )
    assert (
        "| I beats J | undecided (2/12 parts run): needs ≥ 2 seeds per cell to measure the noise |"
        in markdown
    )
    assert "| | Δ | +1.20 ▲† |" in markdown.replace("|  |", "| |")


def _contrast(a: str, b: str) -> float:
    """WCAG's contrast ratio of two ``#rrggbb`` colours."""
    lin = [
        [(c / 255 / 12.92 if c <= 10 else ((c / 255 + 0.055) / 1.055) ** 2.4) for c in bytes.fromhex(h[1:])]
        for h in (a, b)
    ]
    lum = sorted(0.2126 * r + 0.7152 * g + 0.0722 * b for r, g, b in lin)
    return (lum[1] + 0.05) / (lum[0] + 0.05)


def test_every_badge_and_the_greyed_not_configured_cells_read_at_wcag_aa(tmp_path):
    """Above 4.5:1: each badge's word on its colour, and a "not configured" cell's grey on a striped row."""
    assert min(_contrast(bg, fg) for bg, fg in BADGE_COLOURS.values()) > 4.5
    grey = re.search(r"td\.not-configured \{ color: (#[0-9a-f]{6}); \}", render_html(REPORT, tmp_path))[1]
    assert _contrast(grey, "#fafafa") > 4.5


def test_tally_counts_each_verdict_of_a_constructed_list():
    from contrastlab.report.answer import verdict_tally
    from contrastlab.report.claims import ClaimResult

    def tally_line(results) -> str:
        return to_markdown([Tally("Tally: ", verdict_tally(results), len(results))]).strip()

    verdicts = ["reproduced", "not run", "undecided", "reproduced", "not run", "not run", "not reproduced"]
    results = [ClaimResult({"paper": "nie2023"}, v, []) for v in verdicts]
    # a "not reproduced" whose sentence the paper's own tables do not support either: counted apart
    unsupported = {"paper": "nie2023", "paper_tables": "Table 1 disagrees"}
    results += [ClaimResult(unsupported, "not reproduced", []), ClaimResult(unsupported, "undecided", [])]
    assert verdict_tally(results) == {
        "reproduced": 2, "not reproduced": 1, "paper unsupported": 1, "undecided": 2, "not run": 3,
        "not configured": 0,
    }  # fmt: skip
    assert tally_line(results) == (
        "Tally: reproduced 2 · not reproduced 1 · paper unsupported 1 · undecided 2 · not run 3 · "
        "not configured 0 (of 9 claims)."
    )
    assert tally_line([]) == (
        "Tally: reproduced 0 · not reproduced 0 · paper unsupported 0 · undecided 0 · not run 0 · "
        "not configured 0 (of 0 claims)."
    )


VERDICTS = ("reproduced", "not reproduced", "paper unsupported", "undecided", "not run", "not configured")


def test_each_paper_tally_sits_above_its_claims_and_matches_their_badges(tmp_path):
    """In report.html each paper's tally sits above its claims and counts their verdicts' badges."""
    from contrastlab.paths import Results
    from contrastlab.report import build_report
    from contrastlab.report.claims import PAPERS
    from tests.tables.test_verdicts import MACL_CONFIG, macl_metrics

    root = tmp_path / "metrics"
    write_scores(root, macl_metrics())
    build_report(Results(tmp_path), MACL_CONFIG, tables=["macl_tableB4"])
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    main = page.split("<main>", 1)[1]  # not the contents list
    sections = re.split(r"<h2 ", main)
    seen = 0
    for section in sections:
        paper = section.split('"', 2)[1]  # its id: the paper's key
        if f'<h3 id="{paper}-claims">' not in section:
            continue
        seen += 1
        claims = section.split(f'<h3 id="{paper}-claims">', 1)[1].split("</h3>", 1)[1].split("<h3 ", 1)[0]
        counts = re.sub(r"<[^>]+>", "", claims.split("</p>")[0])  # zero counts carry no badge
        tally = dict(re.findall(r"((?:not |paper )?[a-z]+) (\d+)", counts.removeprefix("\nTally: ")))
        table = claims.split("<table>", 1)[1]
        for word in VERDICTS:
            kind = word.replace(" ", "-")
            badges = table.count(f'<td><span class="badge v-{kind}">')
            badges += table.count(f'<td><details class="why"><summary><span class="badge v-{kind}">')
            assert int(tally[word]) == badges, (word, section[:80])
    assert seen == len(PAPERS)
    macl = next(s for s in sections if s.startswith('id="macl"'))
    assert "not reproduced 1" in macl  # MACL beats SimCSE on STS.Avg: 71 vs 76.5 on BERT-base


# --- a report a researcher navigates (issue 56 item 1) ---------------------------------------------


@pytest.fixture(scope="module")
def demo_report(tmp_path_factory):
    """The demo's report.md and report.html with Nie's tiny-bert L_cl and L_mpt trained on one seed (their
    claims undecided), a bridge row, a real PNG at every figure's place and a very wide command line."""

    from contrastlab import config as cl_config
    from contrastlab.config import Grid
    from contrastlab.figures.catalog import figures
    from contrastlab.paths import REPO_ROOT, Results
    from contrastlab.report import build_report, sections
    from tests.tables.test_bridge import _write_bridge

    root = tmp_path_factory.mktemp("demo-report")
    results = Results(root)
    _write_bridge(results, "nie2023/tiny-bert/cl/seed42")
    trained = [
        ("nie2023", "tiny-bert", method, 42, "sts_avg", score) for method, score in (("cl", 71), ("mpt", 72))
    ]
    write_scores(root / "metrics", scores_frame(trained))
    pretrained = root / "metrics" / "pretrained" / "tiny-bert" / "senteval.json"  # one evaluation, no seed
    pretrained.parent.mkdir(parents=True)
    pretrained.write_text('{"scores": {}, "sts_avg": 60.0}')
    demo = cl_config.load(REPO_ROOT / "config" / "demo.yaml")
    catalog = figures(Grid(demo))
    draw_curve(root / "figure")
    for fig_spec in catalog:
        png = root / "figures" / f"{fig_spec['name']}.png"
        png.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(root / "figure.png", png)
    command = ".venv/bin/snakemake --config 'experiments={" + ", ".join(
        f"e{i}: {{seeds: [42]}}" for i in range(40)
    )
    long_command = [Paragraph("A long command:"), Code([command + "}'"])]
    with pytest.MonkeyPatch.context() as patch:  # the report's last blocks, and a command line after them
        patch.setattr(sections, "cite_blocks", lambda cite=sections.cite_blocks: cite() + long_command)
        build_report(results, demo, figures=catalog)
    return root / "report.md"


def _ids(page: str) -> list[str]:
    return re.findall(r'<h[1-6] id="([^"]+)"', page)


def test_every_heading_has_a_stable_id_and_the_contents_list_links_each(demo_report):
    """Every heading has a stable id and the contents list links each heading of levels 2-4."""
    page = demo_report.with_suffix(".html").read_text(encoding="utf-8")
    markdown = demo_report.read_text(encoding="utf-8")
    ids = _ids(page)
    assert len(ids) == len(set(ids)) == len(re.findall(r"^#{1,6} ", markdown, re.M))  # one per heading
    anchors = """the-answer nie2023 nie2023-claims nie2023-tables nie2023-table1
        nie2023-senteval-protocol-and-mteb-on-the-same-checkpoints nie2023-fig2a li2024-table3 macl-tableB4
        oar-table3 oar-synthetic-table2 precision-of-every-cell cost""".split()
    assert [anchor for anchor in anchors if anchor not in ids] == []
    nav = page.split('<nav class="contents"', 1)[1].split("</nav>", 1)[0]
    links = re.findall(r'href="#([^"]+)"', nav)
    levels = {i: int(level) for level, i in re.findall(r'<h([1-6]) id="([^"]+)"', page)}
    assert links == [i for i in ids if 2 <= levels[i] <= 4]
    # short labels: the paper by its authors and year, its tables from "Table" on, figures by place
    assert '<a href="#nie2023">Nie et al. 2023</a>' in nav
    assert '<a href="#nie2023-table1">Table 1: STS.Avg and TR.Avg</a>' in nav
    assert '<a href="#nie2023-fig2a">Fig. 2a</a>' in nav
    assert '<h4 id="nie2023-fig2a">Nie Fig. 2a — nie2023/nie2023_fig2a<a class="headerlink"' in page
    # report.md keeps its plain headings
    assert "\n#### Nie et al. 2023, Table 1: STS.Avg and TR.Avg\n" in markdown


def test_the_bridge_table_sits_under_its_papers_tables(demo_report):
    markdown = demo_report.read_text(encoding="utf-8")
    nie = markdown[markdown.index("\n## Nie et al. 2023") : markdown.index("\n## Li, Zhang & Nie 2024")]
    bridge = nie.index("\n### SentEval protocol and MTEB on the same checkpoints\n")
    assert nie.index("\n### Tables\n") < bridge < nie.index("\n### Figures\n")
    assert "| nie2023/tiny-bert/cl/seed42 | STSBenchmark | standin | 80.00 |" in nie[bridge:]
    assert "\n## SentEval protocol" not in markdown  # not a section after the papers


def _grid(markdown: str) -> Table:
    """A paper grid written as report.md shows it, with what its writer (sections.grid_block) knows: its
    label columns (up to the first right-aligned one) and its cells outside the config's grid."""
    header, rule, *lines = markdown.splitlines()
    right = next(i for i, r in enumerate(rule.strip("|").split("|")) if r.endswith(":"))
    rows = [
        [
            Cell(c, "not-configured") if c in ("not configured", "not evaluated") else c
            for c in line[2:-2].split(" | ")
        ]
        for line in lines
    ]
    return Table(header[2:-2].split(" | "), rows, right, labels=right if right >= 2 else 0)


GRID = """| Backbone | Method |  | STS12 | STS.Avg |
|---|---|---|---:|---:|
| BERT-base | InfoNCE | paper | 68.40 | 76.25 |
|  |  | ours | not configured | not configured |
|  |  | Δ | – | – |
|  | MPT | paper | n/a | 77.25 |
|  |  | ours | not configured | not run |
|  |  | Δ | – | – |
| tiny-bert | InfoNCE | paper | n/a | n/a |
|  |  | ours | 70.10 | 71.00 ?† |
|  |  | Δ | – | – |
|  | MPT | paper | n/a | n/a |
|  |  | ours | not configured | not configured |
|  |  | Δ | – | – |
"""


def test_rows_the_preset_does_not_configure_fold_into_one_line(tmp_path):
    """Methods whose every cell of ours is "not configured" fold into one line; the rest open with a rule."""
    page = render_html([_grid(GRID)], tmp_path)
    body = page.split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    rows = re.findall(r"<tr[^>]*>.*?</tr>", body, re.S)
    assert len(rows) == 7  # BERT-base MPT and tiny-bert InfoNCE (3 rows each), the folded line
    assert '<td class="not-configured" style="text-align: right;">not configured</td>' in rows[1]
    # BERT-base MPT's row names its backbone, the row that named it being folded away
    assert '<table class="grid labels-3">' in page  # its three label columns stay in view (CSS)
    assert rows[0].startswith('<tr class="group-start">') and "<td>BERT-base</td>\n<td>MPT</td>" in rows[0]
    assert rows[3].startswith('<tr class="group-start">') and "<td>tiny-bert</td>" in rows[3]
    assert rows[-1] == (
        '<tr class="folded"><td colspan="5" title="BERT-base InfoNCE, tiny-bert MPT"><span>6 rows not '
        "configured by this preset: BERT-base InfoNCE, tiny-bert MPT (2 of 4 methods; the table's own "
        "files keep every row)</span></td></tr>"
    )
    assert "68.40" not in page and "70.10" in page
    # a table of no paper rows, or one where every method ran, folds nothing
    plain = "| method | score |\n|---|---:|\n| a | not configured |\n"
    assert 'class="folded"' not in render_html([_grid(plain)], tmp_path)
    ran = GRID.replace("not configured", "1.00")
    assert 'class="folded"' not in render_html([_grid(ran)], tmp_path)


STAND_IN_GRID = """| Method |  | BERT-base STS.Avg | BERT-base TR.Avg | tiny-bert, for BERT-base STS.Avg |
|---|---|---:|---:|---:|
| L_cl | paper | 76.04 | 86.38 | 76.04 |
|  | ours | not configured | not configured | 70.00 |
|  | Δ | – | – | -6.04 ?† |
| L_mpt | paper | 77.25 | 87.56 | 77.25 |
|  | ours | not configured | not run | not configured |
|  | Δ | – | – | – |
| L_dcl | paper | 71.13 | 85.18 | 71.13 |
|  | ours | not configured | not configured | not configured |
|  | Δ | – | – | – |
"""


def test_columns_the_preset_does_not_configure_fold_like_rows(tmp_path):
    """A value column of only "not configured" or dashes folds after the methods; one "not run" keeps it."""
    page = render_html([_grid(STAND_IN_GRID)], tmp_path)
    head = page.split("<thead>", 1)[1].split("</thead>", 1)[0]
    labelled = ["Method", "", "BERT-base TR.Avg", "tiny-bert, for BERT-base STS.Avg"]
    assert re.findall(r"<th[^>]*>([^<]*)</th>", head) == labelled
    body = page.split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    rows = re.findall(r"<tr[^>]*>.*?</tr>", body, re.S)
    assert len(rows) == 6 + 2  # L_cl and L_mpt, three rows each; the two folded lines
    assert all(row.count("<td") == 4 for row in rows[:6])
    assert "<td>L_cl</td>\n<td>paper</td>\n" + '<td style="text-align: right;">86.38</td>' in rows[0]
    assert rows[-2:] == [
        '<tr class="folded"><td colspan="4" title="L_dcl"><span>3 rows not configured by this preset: L_dcl '
        "(1 of 3 methods; the table's own files keep every row)</span></td></tr>",
        '<tr class="folded"><td colspan="4" title="BERT-base STS.Avg"><span>1 column not configured by '
        "this preset: BERT-base STS.Avg (1 of 3 columns; the table's own files keep every column)</span>"
        "</td></tr>",
    ]
    # with L_mpt's "not run" gone too, BERT-base TR.Avg folds as well; the stand-in's column stays
    both = render_html([_grid(STAND_IN_GRID.replace("not run", "not configured"))], tmp_path)
    assert "2 columns not configured by this preset: BERT-base STS.Avg, BERT-base TR.Avg (2 of 3" in both
    # a task evaluation.tasks leaves out ("not evaluated", cpu.yaml's TR.Avg) folds too, and the line says so
    unscored = render_html([_grid(STAND_IN_GRID.replace("not run", "not evaluated"))], tmp_path)
    assert "6 rows not configured or not evaluated by this preset: L_mpt, L_dcl (2 of 3" in unscored


def test_see_links_go_to_the_table_or_figure_on_the_page(tmp_path):
    """A "see" link opens its table or figure on the page, else its file; other columns keep their files."""
    table1 = Link("nie2023_table1", "tables/nie2023_table1.md", "nie2023-table1")
    fig2a = Link("nie2023/nie2023_fig2a", "figures/nie2023/nie2023_fig2a.png", "nie2023-fig2a")
    li3 = Link("li2024_table3", "tables/li2024_table3.md", "li2024-table3")
    see = Table(
        ["claim", "see", "files"], [["A", [table1, " · ", fig2a, " · ", li3], [Link("md", table1.href)]]]
    )
    heading = Heading(4, "Nie et al. 2023, Table 1: STS.Avg and TR.Avg", id="nie2023-table1")
    page = render_html(
        [see, heading, Figure(fig2a.text, "Nie Fig. 2a", fig2a.href, "Nie Fig. 2a: x")], tmp_path
    )
    assert '<a href="#nie2023-table1">nie2023_table1</a>' in page
    assert '<a href="#nie2023-fig2a">nie2023/nie2023_fig2a</a>' in page
    assert '<a href="tables/li2024_table3.md">li2024_table3</a>' in page  # not on this page
    assert '<a href="tables/nie2023_table1.md">md</a>' in page  # a files column keeps the file


def test_every_see_link_of_the_demos_claims_opens_its_place_on_the_page(demo_report):
    page = demo_report.with_suffix(".html").read_text(encoding="utf-8")
    markdown = demo_report.read_text(encoding="utf-8")
    ids = set(_ids(page))
    claims = re.findall(r'<h3 id="[a-z0-9]+-claims">.*?</table>', page, re.S)
    see = [href for table in claims for href in re.findall(r'<a href="([^"]+)">', table)]
    sections = re.findall(r"\n### Claims\n(.*?)\n### ", markdown, re.S)
    rows = [line for section in sections for line in section.splitlines() if line.startswith("| ")]
    linked = sum(len(re.findall(r"\]\((?:tables|figures)/", row.rsplit(" | ", 1)[-1])) for row in rows)
    assert len(see) == linked > 40
    assert [href for href in see if not (href.startswith("#") and href[1:] in ids)] == []
    answer = page.split('<h2 id="the-answer">', 1)[1].split("<h2 ", 1)[0]
    tables = ["#nie2023-table1", "#li2024-table3", "#macl-tableB4", "#oar-table3"]
    assert re.findall(r'<a href="([^"]+)">Table', answer) == tables


def test_the_demos_report_keeps_at_most_20_not_configured_cells(demo_report):
    """Folded, the demo's page keeps 9 "not configured" cells: Nie Tables 1 and 2's MiniLM L_mpt."""
    page = demo_report.with_suffix(".html").read_text(encoding="utf-8")
    cells = re.findall(r'<td class="not-configured"[^>]*>not configured</td>', page)
    assert len(cells) == page.count(">not configured</td>") == 9 <= 20
    main = page.split("<main>", 1)[1]
    per_table = {
        section.split('"', 2)[1]: section.count('class="not-configured"')
        for section in re.split(r"(?=<h4 id=\")", main)
        if 'class="not-configured"' in section
    }
    assert per_table == {"nie2023-table1": 6, "nie2023-table2": 3}


def test_right_aligned_cells_hold_numbers_not_prose(demo_report):
    """A right-aligned cell does not wrap (CSS): a paper's tables' note, a sentence, is left-aligned, so it
    wraps in its column instead of widening the table past the page; the Markdown says the same."""
    page = demo_report.with_suffix(".html").read_text(encoding="utf-8")
    right = re.findall(r'<td[^>]* style="text-align: right;">(.*?)</td>', page, re.S)
    assert right and [cell for cell in right if len(re.sub(r"<[^>]+>", "", cell)) > 40] == []
    assert "<td>Δ cells: 0 (run, with a published number for their own backbone)" in page
    rule = "|---|" + "---:|" * 13 + "---|---|"
    assert f"| note | files |\n{rule}\n" in demo_report.read_text(encoding="utf-8")


def test_a_hyperparameter_grid_folds_per_method_not_per_parameter(tmp_path):
    table = """| Method | Parameter |  | BERT-base | tiny-bert |
|---|---|---|---:|---:|
| L_cl | tau | paper | 0.05 | n/a |
|  |  | config | not configured | 0.05 |
| L_dcl | tau | paper | 0.05 | n/a |
|  |  | config | not configured | not configured |
|  | learning rate | paper | 1e-5 | n/a |
|  |  | config | not configured | not configured |
"""
    page = render_html([_grid(table)], tmp_path)
    assert "4 rows not configured by this preset: L_dcl (1 of 2 methods;" in page
    assert "<td>L_cl</td>" in page and "<td>L_dcl</td>" not in page


def test_wide_content_scrolls_in_its_own_box_and_print_keeps_tables_whole(tmp_path):
    page = render_html([_grid(GRID), Code(["x" * 500], language="text")], tmp_path)
    assert '<div class="table-scroll" tabindex="0"><table class="grid labels-3">' in page
    assert page.count("<table") == page.count('<div class="table-scroll"') == 1
    css = page.split("<style>", 1)[1].split("</style>", 1)[0]
    assert ".table-scroll { overflow-x: auto;" in css and "pre {" in css and "overflow-x: auto" in css
    assert "@page { size: A4 landscape;" in css  # Nie Table 1's 20 columns fit a printed page's width
    printed = css.split("@media print", 1)[1]
    assert "table { break-inside: avoid;" in printed and "thead { display: table-header-group; }" in printed
    assert '<pre><code class="language-text">' + "x" * 500 in page  # fenced blocks render as code


@needs_chromium
def test_chromium_at_1400_px_lays_out_every_anchor_the_first_screen_and_the_grids(demo_report):
    """In Chromium 1400 px wide: every contents link names an element, every heading has an id, nothing
    reaches past the window (wide tables scroll in their box); the toy warning before the first count, one
    main number per paper; 9 "not configured" cells left; every "see" link opens its place; each verdict
    one line, its reasoning folded; the add-seeds lines whole; a half-scrolled grid's labels end in a rule."""
    found = chromium.measure(demo_report.with_suffix(".html"), width=1400)
    assert found["inner_width"] == 1400  # the window; the viewport is that less the scroll bar
    assert len(found["links"]) > 40 and found["unresolved"] == []
    assert found["headings_without_id"] == [] and len(found["heading_ids"]) > 40
    assert found["scroll_width"] <= found["viewport"] <= 1400 and found["boxes_past_viewport"] == []
    assert found["tables"] > 10 and found["tables_outside_a_box"] == 0
    assert found["tables_scrolling_in_their_box"] >= 1  # the wide grids are wider than the page
    # scrolled to its right end, a wide grid still shows its labels (method, role) at its box's left
    assert found["grid_scrolled_by"] > 100 and abs(found["grid_label_offset_when_scrolled"]) <= 1
    assert any(
        line.startswith("15 rows not configured by this preset: L_a&u") for line in found["folded_rows"]
    )
    assert found["toy_top"] < found["first_tally_top"] < found["window_height"]
    assert found["headline_rows"] == len(PAPERS) + 1 and found["headline_bottom"] < found["window_height"]
    assert found["not_configured_cells"] == 9 <= 20
    assert found["folded_columns"] == 4  # Nie Tables 1 and 2, Li Table 5, MACL Table 9
    assert found["see_links"] > 40 and found["see_not_in_page"] == []
    assert found["verdicts_folded"] >= 3 and set(found["verdict_lines"]) == {1}
    assert found["verdict_reasons_shown"] == 0
    # SEEDS, run(), one line for tiny-bert's L_cl and L_mpt, the tables; wrapped, even at 1024 px
    assert found["command_lines"] == [4] and found["commands_hidden_px"] == [0]
    assert chromium.measure(demo_report.with_suffix(".html"), width=1024)["commands_hidden_px"] == [0]
    assert found["frozen_edge"] == "2px solid rgb(119, 119, 119)"  # the grid's cells' rules are 1px #ccc


@needs_chromium
def test_chromium_at_1024_by_768_shows_the_headline_and_the_tallies_above_the_fold(demo_report):
    """At 1024 × 768 the toy warning, the whole main numbers' table and its key are on the first screen."""
    found = chromium.measure(demo_report.with_suffix(".html"), width=1024, height=768)
    assert found["inner_width"] == 1024 and found["window_height"] <= 768
    assert found["tally_columns"] == ["reproduced", "not", "unsupported", "undecided", "not run"]
    assert found["headline_rows"] == len(PAPERS) + 1 and found["headline_hidden_px"] <= 0  # and "All"
    # the four papers' table and key fit the first screen; a fifth paper's row pushes them past the fold
    fold = found["window_height"] if len(PAPERS) == 4 else float("inf")
    assert found["toy_top"] < found["first_tally_top"] < found["headline_bottom"] < fold
    assert found["headline_bottom"] < found["key_top"] < fold
    assert "? undecided (too few seeds to measure the noise)" in found["key_text"]
    assert "† ours on a toy backbone standing in for the paper's" in found["key_text"]


@needs_chromium
def test_chromium_at_900_px_shows_the_answer_on_the_first_screen_below_a_scrolling_contents_list(demo_report):
    """At 960 px or less the contents list sits above the page, in a box of its own that scrolls: the toy
    warning and the first tally are still on the first screen, not three screens of links down."""
    found = chromium.measure(demo_report.with_suffix(".html"), width=900, height=800)
    assert found["inner_width"] == 900 and found["unresolved"] == []
    assert found["toy_top"] < found["first_tally_top"] < found["window_height"]
