"""The reproduced papers, each one record: the source of the tables' registry, the report's paper
sections and order, the figures' captions, the image schedules the deviations compare with, and the BibTeX
of the report's "How to cite" and of every model card.

A paper's record is the head of its paper file, ``report/claims/<prefix>.yaml`` (its claims follow it):
``order`` (its place in the report), ``name`` (what its tables' titles and the report's category open
with, "Nie et al. 2023"), ``citation`` (key, entry kind, title, authors, year, venue, note, and the
identifiers the paper's own text names: ``arxiv``, ``doi``, ``url``, ``code``; mirroring
``CITATION.cff``'s ``references``; tests/test_papers.py holds the two to each other), ``tables`` (each
:class:`TableSpec`; the numbers are in ``tables/published/<name>.csv`` + ``.yaml``) and ``figures`` (the
captions, as data; :mod:`contrastlab.figures.catalog` decides which figures a config draws). An
experiment, figure, table or job names its paper by the first word of its name (``nie2023``,
``li2024_fig6_m``, ``macl_cifar10``, ``oar_synthetic/table2``): :func:`paper_of`, :func:`paper_for`.
docs/adding-a-paper.md adds a fifth.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

__all__ = [
    "PAPERS",
    "PAPERS_DIR",
    "Paper",
    "TableSpec",
    "bibtex",
    "bibtex_block",
    "hub_tags",
    "load_papers",
    "paper_for",
    "paper_of",
    "papers_of",
]

# The paper files sit in report/claims/, not in a papers/ folder beside this module (which would read as a
# package contrastlab.papers): each is the paper's claims file, and the record is its head, so that a paper
# is one file.
PAPERS_DIR = Path(__file__).resolve().parent / "report" / "claims"

#: A new-style arXiv identifier (without its version: the Hub's ``arxiv:`` tag links the abstract page).
_ARXIV_ID = r"\d{4}\.\d{4,5}"

#: Kinds of table: measured scores per (method, task); ablation steps of one score; hyperparameters.
KINDS = ("scores", "steps", "hparams")


@dataclass(frozen=True)
class TableSpec:
    """One paper table: its registry name, the config experiment it belongs to, its kind, its title and,
    for an image table, the paper's training schedule in ``epochs``."""

    name: str
    experiment: str
    kind: str
    title: str
    epochs: int | None = None


@dataclass(frozen=True)
class Paper:
    """One paper: BibTeX ``key`` and entry ``kind``, ``authors`` as ``(family, given)`` pairs (given
    empty for a collective name), ``venue`` (booktitle, journal or note, by kind) and a ``note``; the
    paper's ``arxiv`` id, ``doi``, ``url`` and released ``code``, each only where the paper's own text
    names it ("": it does not); its report ``name``, ``tables``, ``claims`` file and ``figures`` (the
    captions, as its file writes them)."""

    key: str
    prefix: str  # the experiments that reproduce it are named <prefix>...
    kind: str
    title: str
    authors: tuple[tuple[str, str], ...]
    year: int | None
    venue: str = ""
    note: str = ""
    arxiv: str = ""
    doi: str = ""
    url: str = ""
    code: str = ""
    name: str = ""
    tables: tuple[TableSpec, ...] = ()
    claims: Path | None = None
    figures: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)


def _record(path: Path) -> tuple[int, Paper]:
    """The record at the head of paper file ``path``, with its ``order``."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when present: the Snakefile reads this
    data = yaml.load(path.read_text(encoding="utf-8"), Loader=loader)
    missing = [key for key in ("order", "name", "citation", "tables") if key not in data]
    if missing:
        raise ValueError(f"{path}: a paper file needs {', '.join(missing)} (docs/adding-a-paper.md)")
    citation, name = data["citation"], data["name"]
    if citation.get("arxiv") and not re.fullmatch(_ARXIV_ID, str(citation["arxiv"])):
        raise ValueError(
            f"{path}: arxiv must be a new-style arXiv id such as 2301.01234, got {citation['arxiv']!r}"
        )
    tables = []
    for table in data["tables"]:
        if table.get("kind") not in KINDS:
            raise ValueError(f"{path}: table {table.get('name')!r}: kind must be one of {KINDS}")
        tables.append(TableSpec(**{**table, "title": f"{name}, {table['title']}"}))
    paper = Paper(
        key=citation["key"],
        prefix=path.stem,
        kind=citation["kind"],
        title=citation["title"],
        authors=tuple((family, given) for family, given in citation["authors"]),
        year=citation.get("year"),
        venue=citation.get("venue", ""),
        note=citation.get("note", ""),
        arxiv=str(citation.get("arxiv", "")),
        doi=citation.get("doi", ""),
        url=citation.get("url", ""),
        code=citation.get("code", ""),
        name=name,
        tables=tuple(tables),
        claims=path,
        figures=data.get("figures") or {},
    )
    return data["order"], paper


def load_papers(folder: Path = PAPERS_DIR) -> tuple[Paper, ...]:
    """Every paper file's record in ``folder``, in report order; raises ``ValueError`` (one line) for two
    papers at one place or a table's experiment named for another paper."""
    ordered = sorted((_record(path) for path in folder.glob("*.yaml")), key=lambda record: record[0])
    orders = [order for order, _ in ordered]
    if len(set(orders)) != len(orders):
        raise ValueError(f"{folder}: two paper files share an order: {orders}")
    for _, paper in ordered:
        for table in paper.tables:
            if paper_of(table.experiment) != paper.prefix:
                raise ValueError(
                    f"{paper.claims}: table {table.name!r}: its experiment {table.experiment!r} must be "
                    f"named {paper.prefix} or {paper.prefix}_<study>"
                )
    return tuple(paper for _, paper in ordered)


def paper_of(name: str) -> str:
    """The paper an experiment, figure, table or job name belongs to, by the config's naming:
    ``<paper>``, ``<paper>_<study>``, ``<paper>/<figure>``, ``<paper>-analytic`` (a name of no paper
    gives its first word: the user's own experiments, ``pretrained``).

    >>> [paper_of(n) for n in ("nie2023", "macl_cifar10", "oar_synthetic/table2", "li2024-analytic")]
    ['nie2023', 'macl', 'oar', 'li2024']
    """
    return re.split(r"[/_-]", name, maxsplit=1)[0]


#: The papers, in the report's (and the README's) order.
PAPERS: tuple[Paper, ...] = load_papers()


def paper_for(name: str) -> Paper | None:
    """The paper a name belongs to (:func:`paper_of`); None for a name of no paper (a user's own
    experiment, the GPU check's, ``pretrained``)."""
    return next((paper for paper in PAPERS if paper.prefix == paper_of(name)), None)


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
    if paper.arxiv:
        fields += [("eprint", paper.arxiv), ("archivePrefix", "arXiv")]
    if paper.doi:
        fields.append(("doi", paper.doi))
    if paper.url:
        fields.append(("url", paper.url))
    body = ",\n".join(f"  {name} = {{{value}}}" for name, value in fields)
    return f"@{paper.kind}{{{paper.key},\n{body}\n}}"


def bibtex_block(papers: tuple[Paper, ...] | list[Paper] = PAPERS) -> str:
    """The entries of ``papers``, one blank line apart (the text of one ```bibtex block)."""
    return "\n\n".join(bibtex(paper) for paper in papers)


def hub_tags(papers: tuple[Paper, ...] | list[Paper]) -> list[str]:
    """The model-card tags that link a model to ``papers`` on the Hugging Face Hub: ``arxiv:<id>`` for
    each paper with an arXiv id (the Hub shows such a model on the paper's page)."""
    return [f"arxiv:{paper.arxiv}" for paper in papers if paper.arxiv]


def papers_of(experiment: str) -> list[Paper]:
    """The paper an experiment reproduces, by its name's first word; raises ``ValueError`` (one line) for a
    name no paper owns (a caller that takes a user's own experiment asks :func:`paper_for` first)."""
    paper = paper_for(experiment)
    if paper is None:
        known = ", ".join(p.prefix for p in PAPERS)
        raise ValueError(
            f"experiment {experiment!r} belongs to no paper: its name must begin with one of {known} "
            "(docs/adding-a-paper.md)"
        )
    return [paper]
