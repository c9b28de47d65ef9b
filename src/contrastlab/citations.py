"""The four reproduced papers as BibTeX: one source for the report's "How to cite" and every model card.

Each paper is a :class:`Paper` (key, entry type, title, authors, year, venue) whose fields mirror
``CITATION.cff``'s ``references`` (tests/test_citations.py holds the two to each other: same titles,
years and authors); :func:`bibtex` renders one as a BibTeX entry, :func:`bibtex_block` several. An
experiment names its paper by its prefix (``nie2023``, ``li2024``, ``macl``, ``oar``), as config.yaml's
experiments do: :func:`papers_of`.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PAPERS", "Paper", "bibtex", "bibtex_block", "papers_of"]


@dataclass(frozen=True)
class Paper:
    """One paper: BibTeX ``key`` and entry ``kind``, ``authors`` as ``(family, given)`` pairs (given
    empty for a collective name), ``venue`` (booktitle, journal or note, by kind) and a ``note``."""

    key: str
    prefix: str  # the experiments that reproduce it are named <prefix>...
    kind: str
    title: str
    authors: tuple[tuple[str, str], ...]
    year: int | None
    venue: str = ""
    note: str = ""


#: The four papers, in the README's order.
PAPERS: tuple[Paper, ...] = (
    Paper(
        key="nie2023inadequacy",
        prefix="nie2023",
        kind="inproceedings",
        title="On the Inadequacy of Optimizing Alignment and Uniformity in Contrastive Learning of "
        "Sentence Representations",
        authors=(("Nie", "Zhijie"), ("Zhang", "Richong"), ("Mao", "Yongyi")),
        year=2023,
        venue="The Eleventh International Conference on Learning Representations (ICLR 2023)",
    ),
    Paper(
        key="li2024unified",
        prefix="li2024",
        kind="misc",
        title="Towards Better Understanding of Contrastive Sentence Representation Learning: "
        "A Unified Paradigm for Gradient",
        authors=(("Li", "Mingxin"), ("Zhang", "Richong"), ("Nie", "Zhijie")),
        year=2024,
        note="The arXiv full version is the text this project reproduces.",
    ),
    Paper(
        key="huang2023macl",
        prefix="macl",
        kind="inproceedings",
        title="Model-Aware Contrastive Learning: Towards Escaping the Dilemmas",
        authors=(
            ("Huang", "Zizheng"),
            ("Chen", "Haoxing"),
            ("Wen", "Ziqi"),
            ("Zhang", "Chao"),
            ("Li", "Huaxiong"),
            ("Wang", "Bo"),
            ("Chen", "Chunlin"),
        ),
        year=2023,
        venue="Proceedings of the 40th International Conference on Machine Learning (ICML 2023)",
    ),
    Paper(
        key="oar2024stable",
        prefix="oar",
        kind="unpublished",
        title="Stable Contrastive Learning with Orthonormal Anchors Regression",
        authors=(("Anonymous authors", ""),),
        year=None,  # an anonymous manuscript: CITATION.cff gives no year either
        note="The anonymous manuscript (OAR) this project reproduces; cite its published version where "
        "there is one.",
    ),
)

#: The BibTeX field that holds a paper's venue, by entry kind.
_VENUE_FIELD = {"inproceedings": "booktitle", "article": "journal"}


def _author(family: str, given: str) -> str:
    # a collective name is braced whole, so BibTeX does not split it into given and family names
    return f"{family}, {given}" if given else "{" + family + "}"


def bibtex(paper: Paper) -> str:
    """``paper`` as one BibTeX entry (titles braced, so BibTeX styles keep their capitals)."""
    fields = [
        ("title", "{" + paper.title + "}"),
        ("author", " and ".join(_author(*name) for name in paper.authors)),
    ]
    if paper.venue:
        fields.append((_VENUE_FIELD.get(paper.kind, "howpublished"), paper.venue))
    if paper.year is not None:
        fields.append(("year", str(paper.year)))
    if paper.note:
        fields.append(("note", paper.note))
    body = ",\n".join(f"  {name} = {{{value}}}" for name, value in fields)
    return f"@{paper.kind}{{{paper.key},\n{body}\n}}"


def bibtex_block(papers: tuple[Paper, ...] | list[Paper] = PAPERS) -> str:
    """The entries of ``papers``, one blank line apart (the text of one ```bibtex block)."""
    return "\n\n".join(bibtex(paper) for paper in papers)


def papers_of(experiment: str) -> list[Paper]:
    """The paper(s) an experiment reproduces, by its name's prefix; all four for a name no paper owns
    (a user's own experiment compares against every paper's protocol)."""
    found = [paper for paper in PAPERS if experiment.startswith(paper.prefix)]
    return found or list(PAPERS)
