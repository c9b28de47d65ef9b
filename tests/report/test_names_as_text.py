"""Text is text: a name from a config, a file name or a metrics file is shown as it reads by every
renderer (report.html, report.md, a model card, a figure's label); the project's own Markdown works."""

from __future__ import annotations

from html.parser import HTMLParser

import pandas as pd
import pytest
import yaml
from markdown_it import MarkdownIt

from contrastlab.blocks import Bullets, Cell, Heading, Link, Paragraph, Table, Tally, literals_of, to_markdown
from contrastlab.figures.style import figure, house_style, save
from contrastlab.hub.cards import model_card
from contrastlab.paths import REPO_ROOT
from contrastlab.report.html import render_html
from tests.hub.test_cards import DATA, METRICS, SUMMARY

#: Names a config accepts (the key check refuses only quotes and `$(`-like shell in strings it passes on
#: to a shell): HTML that runs, Markdown that links or emphasises or breaks a table, shell metacharacters.
NAMES = [
    "x, y;touch PWNED;<img src=q onerror=alert(1)>",
    "<script>alert(2)</script>",
    "<svg onload=alert(5)>",
    "*bold* and **strong**",
    "p|q|r",
    "[x](javascript:alert(3))",
    "_edge_ & &amp; !important",
    "a;b && c || d > out",
]
#: The tags the renderers write themselves for the blocks below.
OWN_TAGS = {"h1", "h2", "h3", "pre", "a", "p", "strong", "code", "ul", "li", "div", "table", "thead", "tbody"}
OWN_TAGS |= {"tr", "th", "td", "h4", "h5", "em", "ol", "br", "hr", "sub", "sup", "blockquote"}
OWN_TAGS |= {"span", "details", "summary", "html", "head", "body", "meta", "title", "style", "nav", "main"}
#: Markdown as GitHub reads it: CommonMark, raw HTML on, tables.
GITHUB = MarkdownIt("commonmark", {"html": True}).enable("table")


def blocks_with(name: str) -> list:
    """The report's blocks with ``name`` wherever a name from the config stands: a heading, a sentence
    with the project's own bold, code and link around it, a list, a grid's header and cells, a link to a
    cell's file, a seed-noise marker and a tally."""
    return [
        Heading(2, f"Results of {name}"),
        Paragraph(f"The backbone {name} is **ours**: `--config {name}`, [model](checkpoints/{name}/model)."),
        Bullets([f"{name} (stand-in for BERT-base)"]),
        Table(
            ["method", f"{name}, for BERT-base STS.Avg"],
            [[name, [Link(name, f"tables/{name}.md")]], [f"L_{name}", Cell(f"{name} 75.1 ≈", "within", "≈")]],
            right=1,
        ),
        Tally(f"Claims of {name}: ", {"reproduced": 1, "undecided": 0}, 1, f" ({name})"),
    ]


class Elements(HTMLParser):
    """Every start tag and its attributes, and the page's text."""

    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.text = ""

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text += data


def assert_no_element_from(page: str, name: str):
    found = Elements()
    found.feed(page)
    assert {tag for tag, _ in found.tags} <= OWN_TAGS, f"a tag from {name!r}"
    for tag, attrs in found.tags:
        assert not any(key.startswith("on") for key in attrs), f"<{tag} {attrs}> from {name!r}"
        assert not attrs.get("href", "").startswith("javascript:"), f"a link from {name!r}"
    return found


@pytest.mark.fault("names holding HTML, Markdown and shell text through report.html (H3)", "shown as written")
@pytest.mark.parametrize("name", NAMES)
def test_report_html_shows_a_name_as_it_reads(name, tmp_path):
    config = {"backbones": {name: {"hub_id": "prajjwal1/bert-tiny"}}, "methods": {name: {"loss": "infonce"}}}
    page = render_html(blocks_with(name), tmp_path, literals=literals_of(config))
    found = assert_no_element_from(page, name)
    # the name reads as written: in the heading, the sentence, the list, the grid and the link's words
    assert found.text.count(name) >= 7
    assert "<strong>ours</strong>" in page and 'href="checkpoints/' in page  # the project's Markdown still is


@pytest.mark.fault("names holding HTML, Markdown and shell text through report.md (H3)", "shown as written")
@pytest.mark.parametrize("name", NAMES)
def test_report_md_shows_a_name_as_it_reads(name):
    config = {"backbones": {name: {}}}
    text = to_markdown(blocks_with(name), literals_of(config))
    page = GITHUB.render(text)
    found = assert_no_element_from(page, name)
    assert found.text.count(name) >= 7
    assert "<strong>ours</strong>" in page and page.count("<tr>") == 3  # the grid keeps its two columns


@pytest.mark.fault("names holding HTML, Markdown and shell text in a model card (H3)", "shown as written")
@pytest.mark.parametrize("name", NAMES)
def test_a_model_card_shows_a_name_as_it_reads(name):
    card = model_card(
        experiment="nie2023", backbone=name, method=name, seed=42, summary=SUMMARY, metrics=METRICS, data=DATA
    )
    body = card.split("\n---\n", 1)[1]  # the YAML front matter above is YAML's, quoted by its writer
    found = assert_no_element_from(MarkdownIt("commonmark", {"html": True}).render(body), name)
    assert f"nie2023 / {name} / {name} / seed 42" in found.text


@pytest.mark.fault("a name holding mathtext's $ in a figure's legend (H3)", "drawn as written")
def test_a_figure_label_shows_a_name_with_dollars_as_it_reads(tmp_path):
    name, own = "cost $5$ and $x_1$", r"$\tau$=0.05"
    with house_style():
        fig, axes = figure(1, 1, width="column")
        axes[0, 0].plot([1, 2], [3, 1], label=name)
        axes[0, 0].plot([1, 2], [1, 3], label=own)
        axes[0, 0].set_title(f"{name} vs pretrained")
        legend = axes[0, 0].legend()
    save(fig, tmp_path / "fig", pd.DataFrame({"method": [name, "cl"], "series": [own, own]}))
    drawn = [t for t in legend.get_texts()] + [axes[0, 0].title]
    math = [t._preprocess_math(t.get_text())[1] for t in drawn]
    assert math == [False, True, False]  # the name as text; the figure's own label keeps its mathtext
    assert drawn[0].get_text().replace("\\$", "$") == name


@pytest.mark.fault(
    "a backbone alias and a method holding HTML through build_report (H3)", "no element from them"
)
def test_the_written_report_shows_a_backbone_alias_with_html_as_written(tmp_path):
    """The report as the workflow writes it (build_report): the config's names are the literals."""
    import json

    from contrastlab.paths import Results
    from contrastlab.report import build_report
    from tests.tables.test_verdicts import MACL_CONFIG

    alias = "x, y;touch PWNED;<img src=q onerror=alert(1)>"
    config = {
        **MACL_CONFIG,
        "experiments": {"macl": {**MACL_CONFIG["experiments"]["macl"], "backbones": [alias]}},
        "tables": {"verdict_stand_ins": {"macl": {alias: "bert-base"}}},
    }
    for seed, score in ((42, 70.0), (43, 71.0), (44, 72.0)):
        path = tmp_path / "metrics" / "macl" / alias / "macl" / f"seed{seed}" / "senteval.json"
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps({"scores": {}, "sts_avg": score}))
    build_report(Results(tmp_path), config, tables=["macl_tableB4"])
    page = (tmp_path / "report.html").read_text()
    found = assert_no_element_from(page, alias)
    assert alias in found.text and "<img" not in page
    for page in ("report.md", "tables/macl_tableB4.md"):  # the table's own page, as the report's
        markdown = (tmp_path / page).read_text()
        assert_no_element_from(GITHUB.render(markdown), alias)


def test_make_plan_shows_a_backbone_alias_with_html_as_written(tmp_path):
    """plan.md as make plan writes it: the config's names are the literals, as in the report."""
    from contrastlab.config import validate
    from contrastlab.cost.plan import plan_report

    alias = "x, y;touch PWNED;<img src=q onerror=alert(1)>"
    config = yaml.safe_load((REPO_ROOT / "config" / "demo.yaml").read_text())
    config |= {"results_dir": str(tmp_path / "results"), "resources_dir": str(tmp_path / "resources")}
    config["backbones"][alias] = config["backbones"]["tiny-bert"]
    config["experiments"]["nie2023"]["backbones"].append(alias)
    plan_report(validate(config), out_dir=tmp_path, echo=False)
    page = GITHUB.render((tmp_path / "plan.md").read_text())
    assert alias in assert_no_element_from(page, alias).text
