"""A page's blocks and their one Markdown renderer (contrastlab.blocks): each block's exact Markdown, the
names of a config escaped wherever a sentence holds them, and a table's free text kept on its row."""

from __future__ import annotations

import dataclasses

import pytest

from contrastlab.blocks import (
    Bullets,
    Cell,
    Code,
    Figure,
    Fold,
    Heading,
    Link,
    Paragraph,
    Table,
    Tally,
    Verdict,
    cell_text,
    escape_markdown,
    figure_id,
    kind_of,
    literals_of,
    markdown_lines,
    rows_table,
    to_markdown,
)

FIGURE = Figure("nie2023/nie2023_fig2a", "Nie Fig. 2a", "figures/nie2023/nie2023_fig2a.png", "A curve.")


@pytest.mark.parametrize(
    ("block", "markdown"),
    [
        (Heading(3, "Per rule"), "### Per rule\n"),
        (Paragraph("One **bold** line\nand a second."), "One **bold** line\nand a second.\n"),
        (Bullets(["a", "`b`"]), "- a\n- `b`\n"),
        (
            Tally("Tally: ", {"reproduced": 2, "undecided": 0}, 2),
            "Tally: reproduced 2 · undecided 0 (of 2 claims).\n",
        ),
        (
            Table(
                ["rule", "h", "GPU-h"], [["train", 1.5, "—"], ["encode", "0.25", Cell("x", "within", "≈")]], 1
            ),
            "| rule | h | GPU-h |\n|---|---:|---:|\n| train | 1.5 | — |\n| encode | 0.25 | x |\n",
        ),
        (Table(["a", "b"], [["1", "2"]]), "| a | b |\n|---|---|\n| 1 | 2 |\n"),
        (Table([], []), "none\n"),
        (
            dataclasses.replace(FIGURE, files=[Link("csv", "figures/x.csv"), " · ", Link("pdf")]),
            "#### nie2023/nie2023_fig2a\n\n![nie2023/nie2023_fig2a](figures/nie2023/nie2023_fig2a.png)\n\n"
            "A curve. ([csv](figures/x.csv) · pdf)\n",
        ),
        (Code(["make demo", "make plan"], language="bash"), "```bash\nmake demo\nmake plan\n```\n"),
        (
            Code(["make demo"], box="command"),
            '<div class="command" markdown="1">\n\n    make demo\n\n</div>\n',
        ),
        (
            Fold("More", [Paragraph("inside"), Bullets(["x"])]),
            '<details markdown="1"><summary>More</summary>\n\ninside\n\n- x\n\n</details>\n',
        ),
    ],
)
def test_each_block_renders_to_its_markdown_and_a_blank_line(block, markdown):
    assert to_markdown([block]) == markdown


def test_a_page_is_its_blocks_in_order_each_followed_by_a_blank_line():
    page = [Heading(1, "T"), Paragraph("p"), rows_table([{"k": "v"}])]
    assert to_markdown(page) == "# T\n\np\n\n| k |\n|---|\n| v |\n"
    assert markdown_lines(page) == ["# T", "", "p", "", "| k |", "|---|", "| v |", ""]
    assert to_markdown([]) == ""


def test_a_cell_is_one_line_with_its_bar_escaped_and_its_pieces_joined():
    """A cell is one line, its ``|`` escaped; a verdict is word, head and tail; pieces are joined."""
    verdict = Verdict("not-reproduced", "not reproduced", " (1/2)", ": why")
    table = Table(["a|b", "verdict", "see"], [["x  y\nz", verdict, [Link("t", "t.md"), Link("u")]]])
    assert to_markdown([table]).splitlines()[::2] == [
        "| a\\|b | verdict | see |",
        "| x y z | not reproduced (1/2): why | [t](t.md)u |",
    ]


def test_names_of_a_config_read_as_written_except_in_code():
    """A name that reads as Markdown is escaped in sentences, left alone in code, entity-escaped in HTML."""
    names = literals_of({"backbones": {"*bold*": {"hub": "org/<m>"}}, "seeds": [1, 2]}, "plain", True)
    assert names == {"*bold*", "org/<m>"}
    page = [
        Heading(2, "On *bold*"),
        Paragraph("*bold* and `*bold*` and **strong**"),
        Table(["backbone"], [["org/<m>"]]),
        Tally("*bold*: ", {"reproduced": 1}, 1),
        Code(["*bold*"]),
        Fold("org/<m>", []),
    ]
    assert to_markdown(page, names).split("\n\n") == [
        "## On \\*bold\\*",
        "\\*bold\\* and `*bold*` and **strong**",
        "| backbone |\n|---|\n| org/\\<m\\> |",
        "\\*bold\\*: reproduced 1 (of 1 claims).",
        "```\n*bold*\n```",
        '<details markdown="1"><summary>org/&lt;m&gt;</summary>',
        "</details>\n",
    ]
    # "_" counts only at a word's edge (inside a word it is literal already); markup alone is no name
    assert literals_of("snake_case", "_edge", "*") == {"_edge"}
    assert escape_markdown("snake_case and _edge", ["_edge"]) == "snake_case and \\_edge"


def test_kinds_ids_and_helpers():
    assert kind_of("not reproduced") == "not-reproduced"
    assert figure_id("nie2023/nie2023_fig2a") == "nie2023-fig2a" == FIGURE.id
    assert figure_id("oar_cifar10/lr_sweep") == "oar-cifar10-lr-sweep"
    assert rows_table([{"a": 1, "b": "x"}], right=1) == Table(["a", "b"], [[1, "x"]], 1)
    assert cell_text(Cell("74.10 ≈", "within", "≈")) == "74.10 ≈" and cell_text(3) == "3"
    with pytest.raises(TypeError, match="not a block of a page: 'text'"):
        to_markdown(["text"])
