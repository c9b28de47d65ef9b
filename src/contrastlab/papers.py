"""The reproduced papers, each one record: the source of the tables' registry, the report's paper
sections and order, the figures' captions, the image schedules the deviations compare with, and the BibTeX
of the report's "How to cite" and of every model card.

A paper's record is the head of its paper file, ``report/claims/<prefix>.yaml`` (its claims follow it):
``order`` (its place in the report), ``name`` (what its tables' titles and the report's category open
with, "Nie et al. 2023"), ``citation`` (key, entry kind, title, authors, year, venue, note, and the
identifiers the paper's own text names: ``arxiv``, ``doi``, ``url``, ``code``; ``CITATION.cff``'s
``references`` are written from it: ``python -m contrastlab.papers --cff``), ``tables`` (each
:class:`TableSpec`; the numbers are in ``tables/published/<name>.csv`` + ``.yaml``), ``figures`` (each
:class:`FigureSpec`: what the figure reads and its caption; the function that draws it registers itself
under the same name, :mod:`contrastlab.figures.registry`), ``figure_kinds`` (the captions of the kinds of
figure the catalogue draws per experiment of a config) and, where the report heads the paper's section
otherwise than "<name>, <title>", its ``heading``. An experiment, figure, table or job names its paper by
the first word of its name (``nie2023``, ``li2024_fig6_m``, ``macl_cifar10``, ``oar_synthetic/table2``):
:func:`paper_of`, :func:`paper_for`. docs/adding-a-paper.md adds a fifth.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from contrastlab.paths import read_yaml, yaml_error_text

__all__ = [
    "FIGURE_READS",
    "PAPERS",
    "PAPERS_DIR",
    "TABLES",
    "FigureSpec",
    "Paper",
    "TableSpec",
    "bibtex",
    "bibtex_block",
    "cff_references",
    "hub_tags",
    "load_papers",
    "paper_for",
    "paper_of",
    "papers_of",
    "reference",
    "write_cff",
]

# The paper files sit in report/claims/, not in a papers/ folder beside this module (which would read as a
# package contrastlab.papers): each is the paper's claims file, and the record is its head, so that a paper
# is one file.
PAPERS_DIR = Path(__file__).resolve().parent / "report" / "claims"
#: Each table's published numbers and sidecar, ``<name>.csv`` and ``<name>.yaml`` (contrastlab.tables).
PUBLISHED_DIR = PAPERS_DIR.parents[1] / "tables" / "published"

#: A new-style arXiv identifier (without its version: the Hub's ``arxiv:`` tag links the abstract page).
_ARXIV_ID = r"\d{4}\.\d{4,5}"

#: Kinds of table: measured scores per (method, task); ablation steps of one score; hyperparameters.
KINDS = ("scores", "steps", "hparams")

#: What a paper's figure reads: its experiments' training logs, their evaluated metrics (and the logs
#: beside them), or nothing (``analytic``: computed from the paper's formulas).
FIGURE_READS = ("logs", "metrics", "analytic")


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
class FigureSpec:
    """One figure of a paper's record: the experiments whose cells it reads (an analytic figure is drawn
    when its experiment is in the config), what it reads (:data:`FIGURE_READS`) and its caption."""

    experiments: tuple[str, ...]
    reads: str
    caption: str


@dataclass(frozen=True)
class Paper:
    """One paper: BibTeX ``key`` and entry ``kind``, ``authors`` as ``(family, given)`` pairs (given
    empty for a collective name), ``venue`` (booktitle, journal or note, by kind) and a ``note``; the
    paper's ``arxiv`` id, ``doi``, ``url`` and released ``code``, each only where the paper's own text
    names it ("": it does not); its report ``name``, the ``heading`` of its report section, ``tables``,
    ``claims`` file, ``figures`` (name -> :class:`FigureSpec`) and ``figure_kinds`` (kind -> caption)."""

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
    heading: str = ""
    tables: tuple[TableSpec, ...] = ()
    claims: Path | None = None
    figures: dict[str, FigureSpec] = field(default_factory=dict, compare=False, hash=False)
    figure_kinds: dict[str, str] = field(default_factory=dict, compare=False, hash=False)


class PaperRecordError(ValueError):
    """A paper file that cannot be read, or whose record is not in docs/adding-a-paper.md's shape: its
    one line names the file and the fix."""


def _record(path: Path) -> tuple[int, Paper]:
    """The record at the head of paper file ``path``, with its ``order``."""
    try:  # a ValueError too: not UTF-8, or a value PyYAML cannot build (a date such as 2020-13-45)
        data = read_yaml(path)
    except (yaml.YAMLError, ValueError) as error:
        raise PaperRecordError(
            f"{path}: not valid YAML: {yaml_error_text(error)}; fix it there (docs/adding-a-paper.md)"
        ) from None
    try:  # a key missing, misspelt or of another kind: one line naming the file, as the checks here
        if missing := [key for key in ("order", "name", "citation", "tables") if key not in data]:
            raise PaperRecordError(
                f"{path}: a paper file needs {', '.join(missing)} (docs/adding-a-paper.md)"
            )
        citation, name = data["citation"], data["name"]
        if citation.get("arxiv") and not re.fullmatch(_ARXIV_ID, str(citation["arxiv"])):
            raise PaperRecordError(
                f"{path}: arxiv must be a new-style arXiv id such as 2301.01234, got {citation['arxiv']!r}"
            )
        tables = []
        for table in data["tables"]:
            if table.get("kind") not in KINDS:
                raise PaperRecordError(f"{path}: table {table.get('name')!r}: kind must be one of {KINDS}")
            tables.append(TableSpec(**{**table, "title": f"{name}, {table['title']}"}))
        paper = Paper(
            key=citation["key"],
            prefix=path.stem,
            kind=citation["kind"],
            title=citation["title"],
            authors=tuple((family, given) for family, given in citation["authors"]),
            year=citation.get("year"),
            arxiv=str(citation.get("arxiv", "")),
            **{key: citation.get(key, "") for key in ("venue", "note", "doi", "url", "code")},
            name=name,
            heading=data.get("heading") or f"{name}, {citation['title']}",
            tables=tuple(tables),
            claims=path,
            figures=_figures(path, data.get("figures") or {}),
            figure_kinds=dict(data.get("figure_kinds") or {}),
        )
    except (AttributeError, KeyError, TypeError) as error:
        raise PaperRecordError(
            f"{path}: its record is not in docs/adding-a-paper.md's shape ({type(error).__name__}: {error})"
        ) from None
    return data["order"], paper


def _figures(path: Path, figures: dict[str, Any]) -> dict[str, FigureSpec]:
    """The ``figures`` of paper file ``path``, each checked: named ``<prefix>/<figure>``, reading one of
    :data:`FIGURE_READS`, from experiments of its paper, with a caption."""
    specs = {}
    for name, figure in figures.items():
        experiments = figure.get("experiments") if isinstance(figure, dict) else None
        if not (
            isinstance(experiments, list)
            and experiments
            and paper_of(name) == path.stem
            and "/" in name
            and figure.get("reads") in FIGURE_READS
            and all(paper_of(e) == path.stem for e in experiments)
            and isinstance(figure.get("caption"), str)
        ):
            raise PaperRecordError(
                f"{path}: figure {name!r} must be named {path.stem}/<figure> and give experiments (of "
                f"{path.stem}), reads (one of {', '.join(FIGURE_READS)}) and caption (docs/adding-a-paper.md)"
            )
        specs[name] = FigureSpec(tuple(experiments), figure["reads"], figure["caption"])
    return specs


def load_papers(folder: Path = PAPERS_DIR) -> tuple[Paper, ...]:
    """Every paper file's record in ``folder``, in report order; raises :class:`PaperRecordError` (one line)
    for two papers at one place or a table's experiment named for another paper."""
    ordered = sorted((_record(path) for path in folder.glob("*.yaml")), key=lambda record: record[0])
    orders = [order for order, _ in ordered]
    if len(set(orders)) != len(orders):
        raise PaperRecordError(f"{folder}: two paper files share an order: {orders}")
    for _, paper in ordered:
        for table in paper.tables:
            if paper_of(table.experiment) != paper.prefix:
                raise PaperRecordError(
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


def _load_or_say() -> tuple[Paper, ...]:
    """:func:`load_papers` at import. A record in the wrong shape still raises its
    :class:`PaperRecordError` for whatever catches it (Snakemake's profile hook, a test); a command that
    lets it through (make plan, add-seeds, publish, ``python -m ...``) ends in that one line instead of a
    traceback, its status still 1."""
    try:
        return load_papers()
    except PaperRecordError as error:
        failure, former = error, sys.excepthook  # (``error`` is unbound after the except block)
        sys.excepthook = lambda kind, value, trace: (
            print(f"contrastlab: {value}", file=sys.stderr)
            if value is failure
            else former(kind, value, trace)
        )
        raise


#: The papers, in the report's (and the README's) order.
PAPERS: tuple[Paper, ...] = _load_or_say()
#: Registry of every table the pipeline can regenerate, in report order: each paper's tables, the papers in
#: theirs (re-exported by :mod:`contrastlab.tables`).
TABLES: dict[str, TableSpec] = {table.name: table for paper in PAPERS for table in paper.tables}


def paper_for(name: str) -> Paper | None:
    """The paper a name belongs to (:func:`paper_of`); None for a name of no paper (a user's own
    experiment, the GPU check's, ``pretrained``)."""
    return next((paper for paper in PAPERS if paper.prefix == paper_of(name)), None)


#: The BibTeX field that holds a paper's venue, by entry kind.
_VENUE_FIELD = {"inproceedings": "booktitle", "article": "journal"}


def bibtex(paper: Paper) -> str:
    """``paper`` as one BibTeX entry (titles braced, so BibTeX styles keep their capitals)."""
    # a collective name is braced whole, so BibTeX does not split it into given and family names
    authors = [f"{family}, {given}" if given else "{" + family + "}" for family, given in paper.authors]
    fields = [
        ("title", "{" + paper.title + "}"),
        ("author", " and ".join(authors)),
        (_VENUE_FIELD.get(paper.kind, "howpublished"), paper.venue),
        ("year", "" if paper.year is None else str(paper.year)),
        ("note", paper.note),
        ("eprint", paper.arxiv),
        ("archivePrefix", "arXiv" if paper.arxiv else ""),
        ("doi", paper.doi),
        ("url", paper.url),
    ]
    body = ",\n".join(f"  {name} = {{{value}}}" for name, value in fields if value)
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


def reference(paper: Paper) -> str:
    """The paper as a table's caption names its source, where the table's sidecar does not write its own
    ``reference``: ``Smith, Lee (2025). A Margin for Sentence Embeddings.``"""
    year = f" ({paper.year})" if paper.year is not None else ""
    return f"{', '.join(family for family, _ in paper.authors)}{year}. {paper.title}."


#: CFF's reference type of each BibTeX entry kind (CFF has no preprint: an arXiv paper, BibTeX's misc, is
#: an article to it), and the CFF key of the venue where CFF has one.
_CFF_TYPE = {"inproceedings": "conference-paper", "misc": "article"}
_CFF_VENUE = {"inproceedings": "collection-title", "article": "journal"}


def _cff_name(value: str) -> str:
    # a name YAML reads back as the same text stays plain, as a hand-written CFF file has it (the other
    # texts are quoted: JSON's quoting is YAML's double-quoted form)
    plain = re.fullmatch(r"\w[\w .'-]*", value) and yaml.safe_load(value) == value
    return value if plain else json.dumps(value, ensure_ascii=False)


def cff_references(papers: tuple[Paper, ...] | list[Paper] = PAPERS) -> str:
    """``CITATION.cff``'s ``references:`` block (to the end of the file): each paper's citation in CFF,
    in the papers' order, with its venue, year, note and the links its own text names."""
    lines = ["references:"]
    for paper in papers:
        lines += [
            f"  - type: {_CFF_TYPE.get(paper.kind, paper.kind)}",
            f"    title: {json.dumps(paper.title, ensure_ascii=False)}",
            "    authors:",
        ]
        for family, given in paper.authors:
            if given:
                lines.append(f"      - family-names: {_cff_name(family)}")
                lines.append(f"        given-names: {_cff_name(given)}")
            else:  # a collective name
                lines.append(f"      - name: {json.dumps(family, ensure_ascii=False)}")
        fields = [
            (_CFF_VENUE.get(paper.kind, ""), paper.venue),
            ("year", paper.year),
            ("notes", paper.note),
            ("doi", paper.doi),
            ("url", paper.url),
            ("repository-code", paper.code),
        ]
        for key, value in fields:
            if key and value:
                text = value if isinstance(value, int) else json.dumps(value, ensure_ascii=False)
                lines.append(f"    {key}: {text}")
        if paper.arxiv:
            lines += ["    identifiers:", "      - type: other", f'        value: "arXiv:{paper.arxiv}"']
    return "\n".join(lines) + "\n"


def write_cff(path: Path, papers: tuple[Paper, ...] | list[Paper] = PAPERS) -> bool:
    """Rewrite the ``references:`` block of the CFF file ``path`` (from that line to the end) as
    :func:`cff_references` gives it, the rest as it is; True when that changed the file. Raises
    ``ValueError`` (one line) for a file without the block."""
    text = path.read_text(encoding="utf-8")
    head, found, _ = text.partition("\nreferences:\n")
    if not found:
        raise ValueError(f"contrastlab: {path} has no 'references:' line: add one at the end, then run again")
    new = f"{head}\n{cff_references(papers)}"
    if new != text:
        path.write_text(new, encoding="utf-8")
    return new != text


def main(argv: list[str]) -> int:
    """``python -m contrastlab.papers --cff``: write CITATION.cff's references from the records."""
    if argv != ["--cff"]:
        print("usage: python -m contrastlab.papers --cff (writes CITATION.cff's references)", file=sys.stderr)
        return 2
    path = PAPERS_DIR.parents[3] / "CITATION.cff"
    changed = write_cff(path)
    print(f"{path}: references {'written' if changed else 'already current'} ({len(PAPERS)} papers)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
