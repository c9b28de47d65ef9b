"""The report's own use of its blocks (contrastlab.report.document): the ids report.html gives its headings
and figures, a long heading's contents label, and the walk through folds."""

from __future__ import annotations

from contrastlab.blocks import Figure, Fold, Heading, Paragraph
from contrastlab.report.document import assign_ids, short_label, walk
from contrastlab.report.html import render_html


def test_ids_come_from_the_section_and_the_words_and_a_repeat_is_numbered(tmp_path):
    """Ids: a heading's slug after its parent's, a long one up to its colon, a figure's name; folds too."""
    levels = [(1, "Title"), (2, "Cost"), (3, "Per rule"), (2, "Other"), (3, "Per rule"), (4, "Per rule")]
    levels += [(3, "Search of x: selected on dev beside the published hyperparameters"), (2, "Cost")]
    headings = [Heading(level, text) for level, text in levels]
    own = Heading(2, "Nie et al. 2023", id="nie2023")
    figure = Figure("nie2023/nie2023_fig2a", "Nie Fig. 2a", "f.png", "c")
    page = [*headings, Fold("more", [own, Heading(3, "Claims"), figure, Paragraph("no id")])]
    ids = assign_ids(page)
    expected = (
        "title cost cost-per-rule other other-per-rule other-per-rule-per-rule other-search-of-x cost-2"
    )
    assert [ids[id(h)] for h in headings] == expected.split()
    folded = (own, page[-1].blocks[1], figure)
    assert [ids[id(b)] for b in folded] == ["nie2023", "nie2023-claims", "nie2023-fig2a"]
    assert len(ids) == len(headings) + 3  # the paragraph has none
    # report.html: the same ids, the long heading listed in the contents by its label
    assert '<a href="#other-search-of-x">Search of x</a>' in render_html(headings, tmp_path)


def test_a_long_heading_is_listed_by_its_words_up_to_the_colon():
    long = "Search of nie2023: selected on dev beside the published hyperparameters"
    assert short_label(long) == "Search of nie2023"
    assert short_label("Cost: short") == "Cost: short"  # 40 characters or fewer: as it is


def test_the_walk_visits_a_folds_blocks_after_it():
    inner = Paragraph("in")
    fold = Fold("f", [inner, Fold("g", [])])
    first = Heading(1, "t")
    assert [type(b).__name__ for b in walk([first, fold])] == ["Heading", "Fold", "Paragraph", "Fold"]
