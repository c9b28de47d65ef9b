"""The papers' BibTeX (contrastlab.citations) says what CITATION.cff's references say: titles, years,
authors, and the venue where the file names one; and each entry parses back into those fields."""

from __future__ import annotations

import re

import pytest
import yaml

from contrastlab import citations
from contrastlab.paths import REPO_ROOT


def _cff_references() -> list[dict]:
    return yaml.safe_load((REPO_ROOT / "CITATION.cff").read_text())["references"]


def _fields(entry: str) -> tuple[str, str, dict[str, str]]:
    """(kind, key, fields) of one BibTeX entry as rendered: ``name = {value}`` a line, outer braces off."""
    head = re.match(r"@(\w+)\{([^,]+),\n", entry)
    assert head, entry
    fields = dict(re.findall(r"^  (\w+) = \{(.*)\},?$", entry, flags=re.M))
    return head.group(1), head.group(2), fields


def _bib_authors(text: str) -> list[tuple[str, str]]:
    names = []
    for name in text.split(" and "):
        family, _, given = name.strip("{}").partition(", ")
        names.append((family, given))
    return names


def _cff_authors(reference: dict) -> list[tuple[str, str]]:
    return [(a.get("family-names", a.get("name")), a.get("given-names", "")) for a in reference["authors"]]


def test_the_bibtex_agrees_with_citation_cff():
    references = _cff_references()
    assert len(references) == len(citations.PAPERS) == 4
    for reference, paper in zip(references, citations.PAPERS, strict=True):
        kind, key, fields = _fields(citations.bibtex(paper))
        assert key == paper.key and kind == paper.kind
        assert fields["title"].strip("{}") == reference["title"]
        assert _bib_authors(fields["author"]) == _cff_authors(reference)
        assert fields.get("year") == (str(reference["year"]) if "year" in reference else None)
        if "collection-title" in reference:
            assert fields["booktitle"] == reference["collection-title"]


def test_one_block_holds_each_paper_once_and_experiments_name_their_paper():
    block = citations.bibtex_block()
    keys = re.findall(r"^@\w+\{([^,]+),", block, flags=re.M)
    assert keys == [p.key for p in citations.PAPERS] and len(set(keys)) == 4
    assert block.count("{") == block.count("}")  # balanced: BibTeX reads each entry to its end
    assert [p.key for p in citations.papers_of("li2024_fig6_tau")] == ["li2024unified"]
    assert [p.key for p in citations.papers_of("oar_cifar100")] == ["oar2024stable"]
    assert [p.key for p in citations.papers_of("macl_cifar10")] == ["huang2023macl"]
    assert len(citations.papers_of("my_own_loss")) == 4  # no paper owns it: all four


@pytest.mark.parametrize("paper", citations.PAPERS, ids=lambda p: p.key)
def test_a_collective_author_is_braced_whole(paper):
    _, _, fields = _fields(citations.bibtex(paper))
    if paper.authors[0][1] == "":
        assert fields["author"] == "{" + paper.authors[0][0] + "}"
    else:
        assert "{" not in fields["author"]


def test_the_report_ends_with_how_to_cite_in_one_bibtex_block(tmp_path):
    from contrastlab.report.sections import write_report

    report = write_report([], tmp_path / "report.md", metrics_root=tmp_path / "metrics").read_text()
    tail = report[report.index("\n## How to cite\n") :]
    assert "\n## " not in tail[1:]  # the last section
    assert tail.count("```bibtex\n") == 1 and citations.bibtex_block() + "\n```" in tail
