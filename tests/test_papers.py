"""The papers' records (contrastlab.papers): their BibTeX says what CITATION.cff's references say (titles,
years, authors, and the venue where the file names one) and parses back into those fields; every
configured experiment belongs to a paper or is one of the GPU check's; a name of no paper is an error; and
docs/adding-a-paper.md, followed word for word, adds a fifth paper."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap

import pytest
import yaml

from contrastlab import config as cl_config
from contrastlab import papers
from contrastlab.paths import REPO_ROOT

#: The four papers this repository reproduces: the tests' exact values are theirs; a paper added as
#: docs/adding-a-paper.md says is checked by what derives from its record, and these tests still hold.
FOUR_PAPERS = ("nie2023", "li2024", "macl", "oar")


def _fields(entry: str) -> tuple[str, str, dict[str, str]]:
    """(kind, key, fields) of one BibTeX entry as rendered: ``name = {value}`` a line, outer braces off."""
    head = re.match(r"@(\w+)\{([^,]+),\n", entry)
    assert head, entry
    fields = dict(re.findall(r"^  (\w+) = \{(.*)\},?$", entry, flags=re.M))
    return head.group(1), head.group(2), fields


def _bib_authors(text: str) -> list[tuple[str, str]]:
    return [tuple(name.strip("{}").partition(", ")[::2]) for name in text.split(" and ")]


def _cff_authors(reference: dict) -> list[tuple[str, str]]:
    return [(a.get("family-names", a.get("name")), a.get("given-names", "")) for a in reference["authors"]]


def test_the_bibtex_agrees_with_citation_cff():
    references = yaml.safe_load((REPO_ROOT / "CITATION.cff").read_text())["references"]
    assert len(references) == len(papers.PAPERS)
    for reference, paper in zip(references, papers.PAPERS, strict=True):
        kind, key, fields = _fields(papers.bibtex(paper))
        assert key == paper.key and kind == paper.kind
        assert fields["title"].strip("{}") == reference["title"]
        assert _bib_authors(fields["author"]) == _cff_authors(reference)
        assert fields.get("year") == (str(reference["year"]) if "year" in reference else None)
        if "collection-title" in reference:
            assert fields["booktitle"] == reference["collection-title"]
        assert _cff_identifiers(reference) == _paper_identifiers(paper)


def _cff_identifiers(reference: dict) -> dict[str, str]:
    """A CFF reference's links: its ``doi``, ``url``, ``repository-code`` and arXiv id (an ``identifiers``
    entry of type ``other`` whose value is ``arXiv:<id>``)."""
    found = {key: reference[key] for key in ("doi", "url", "repository-code") if key in reference}
    for identifier in reference.get("identifiers", []):
        if identifier["type"] == "other" and identifier["value"].startswith("arXiv:"):
            found["arxiv"] = identifier["value"].removeprefix("arXiv:")
        else:
            assert found.get(identifier["type"]) == identifier["value"], identifier
    return found


def _paper_identifiers(paper: papers.Paper) -> dict[str, str]:
    named = {"doi": paper.doi, "url": paper.url, "repository-code": paper.code, "arxiv": paper.arxiv}
    return {key: value for key, value in named.items() if value}


def test_the_records_carry_the_links_their_papers_own_text_names():
    """Each record carries only the links its paper's own text names: Nie's and Li's code, no arXiv id."""
    four = [paper for paper in papers.PAPERS if paper.prefix in FOUR_PAPERS]
    assert {paper.prefix: _paper_identifiers(paper) for paper in four} == {
        "nie2023": {"repository-code": "https://github.com/BDBC-KG-NLP/ICLR2023-Gradient-Dissipation"},
        "li2024": {"repository-code": "https://github.com/BDBC-KG-NLP/UnderstandingCSE"},
        "macl": {},
        "oar": {},
    }
    assert papers.hub_tags(four) == []


def test_an_arxiv_id_doi_and_url_reach_the_bibtex_and_the_hub_tags(tmp_path):
    """An arXiv id, DOI and URL reach the BibTeX and the Hub tags; an arXiv id not in arXiv's form stops."""
    record = """\
        order: 1
        name: A 2020
        citation:
          key: a2020
          kind: article
          title: T
          authors: [[A, B]]
          year: 2020
          venue: J
          arxiv: %s
          doi: 10.1000/xyz123
          url: https://example.org/a2020
        tables: []
        """
    _paper_file(tmp_path, "a2020", record % '"2001.01234"')
    (paper,) = papers.load_papers(tmp_path)
    assert papers.bibtex(paper) == (
        "@article{a2020,\n"
        "  title = {{T}},\n"
        "  author = {A, B},\n"
        "  journal = {J},\n"
        "  year = {2020},\n"
        "  eprint = {2001.01234},\n"
        "  archivePrefix = {arXiv},\n"
        "  doi = {10.1000/xyz123},\n"
        "  url = {https://example.org/a2020}\n"
        "}"
    )
    assert papers.hub_tags([paper, *papers.PAPERS]) == ["arxiv:2001.01234"]
    _paper_file(tmp_path, "a2020", record % "arXiv:2001.01234v2")
    with pytest.raises(ValueError, match=r"a2020.yaml: arxiv must be a new-style arXiv id such as"):
        papers.load_papers(tmp_path)


def test_one_block_holds_each_paper_once_and_experiments_name_their_paper():
    block = papers.bibtex_block()
    keys = re.findall(r"^@\w+\{([^,]+),", block, flags=re.M)
    assert keys == [p.key for p in papers.PAPERS] and len(set(keys)) == len(keys) >= 4
    four = ["nie2023inadequacy", "li2024unified", "huang2023macl", "oar2024stable"]
    assert [key for key in keys if key in four] == four
    assert block.count("{") == block.count("}")  # balanced: BibTeX reads each entry to its end
    assert [p.key for p in papers.papers_of("li2024_fig6_tau")] == ["li2024unified"]
    assert [p.key for p in papers.papers_of("oar_cifar100")] == ["oar2024stable"]
    assert [p.key for p in papers.papers_of("macl_cifar10")] == ["huang2023macl"]
    with pytest.raises(
        ValueError,
        match=r"^experiment 'my_own_loss' belongs to no paper: its name must begin "
        rf"with one of {', '.join(p.prefix for p in papers.PAPERS)} \(docs/adding-a-paper.md\)$",
    ):
        papers.papers_of("my_own_loss")
    assert papers.paper_for("my_own_loss") is None
    assert papers.paper_for("oar_synthetic/table2").key == "oar2024stable"


@pytest.mark.parametrize("paper", papers.PAPERS, ids=lambda p: p.key)
def test_a_collective_author_is_braced_whole(paper):
    _, _, fields = _fields(papers.bibtex(paper))
    if paper.authors[0][1] == "":
        assert fields["author"] == "{" + paper.authors[0][0] + "}"
    else:
        assert "{" not in fields["author"]


def test_the_report_ends_with_how_to_cite_in_one_bibtex_block(tmp_path):
    from contrastlab.report.sections import write_report

    report = write_report([], tmp_path / "report.md", metrics_root=tmp_path / "metrics").read_text()
    tail = report[report.index("\n## How to cite\n") :]
    assert "\n## " not in tail[1:]  # the last section
    assert tail.count("```bibtex\n") == 1 and papers.bibtex_block() + "\n```" in tail


#: The configured experiments that reproduce no paper on purpose: the GPU check's (config/gpu-check.yaml).
#: Everything else a config of this repository names belongs to a paper.
NO_PAPER = {"config/gpu-check.yaml": {"gpu_check", "gpu_check_macl", "gpu_check_oar"}}


@pytest.mark.parametrize(
    "name", ["config.yaml", "config/demo.yaml", "config/cpu.yaml", "config/gpu-check.yaml"]
)
def test_every_configured_experiment_belongs_to_a_paper_or_is_the_gpu_checks(name):
    """An experiment's card cites its paper, one of no paper every paper."""
    from contrastlab.hub.publish import citation_of

    experiments = cl_config.load(REPO_ROOT / name)["experiments"]
    assert {e for e in experiments if papers.paper_for(e) is None} == NO_PAPER.get(name, set())
    for experiment in experiments:
        cited = re.findall(r"^@\w+\{([^,]+),", citation_of(experiment), flags=re.M)
        paper = papers.paper_for(experiment)
        assert cited == ([paper.key] if paper else [p.key for p in papers.PAPERS]), experiment


def test_the_records_give_the_tables_claims_and_schedules():
    """The registry's titles, the report's order and the image schedules come from the records."""
    from contrastlab.report.claims import PAPERS as CLAIM_PAPERS
    from contrastlab.tables import TABLES
    from contrastlab.tables.deviations import VISION_PAPER_EPOCHS

    assert CLAIM_PAPERS == tuple(p.prefix for p in papers.PAPERS)
    assert tuple(p for p in CLAIM_PAPERS if p in FOUR_PAPERS) == FOUR_PAPERS
    assert [t.name for p in papers.PAPERS for t in p.tables] == list(TABLES)
    assert len([t for t in TABLES if papers.paper_of(t) in FOUR_PAPERS]) == 12
    title = "Huang et al. 2023 (MACL), Table 9 / B.3: CIFAR-10, linear / kNN top-1"
    assert TABLES["macl_table9"].title == title
    epochs = {e: n for e, n in VISION_PAPER_EPOCHS.items() if papers.paper_of(e) in FOUR_PAPERS}
    assert epochs == {"macl_cifar10": 200, "oar_cifar10": 100, "oar_cifar100": 100}


def _paper_file(tmp_path, name: str, text: str):
    path = tmp_path / f"{name}.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def test_a_paper_file_in_the_wrong_shape_stops_with_one_line(tmp_path):
    record = """\
        order: 1
        name: A 2020
        citation: {key: a2020, kind: misc, title: T, authors: [[A, B]], year: 2020}
        tables: [{name: a2020_table1, experiment: %s, kind: scores, title: "Table 1: x"}]
        """
    _paper_file(tmp_path, "a2020", record % "b2021")
    with pytest.raises(
        ValueError, match=r"a2020.yaml: table 'a2020_table1': its experiment 'b2021' must be named"
    ):
        papers.load_papers(tmp_path)
    _paper_file(tmp_path, "a2020", record % "a2020_study")
    _paper_file(tmp_path, "b2021", (record % "b2021").replace("a2020", "b2021"))
    with pytest.raises(ValueError, match=r"two paper files share an order: \[1, 1\]"):
        papers.load_papers(tmp_path)
    for text, problem in (
        (b"order: 2\nname: B 2021\n", r"b2021.yaml: a paper file needs citation, tables"),
        (
            b"order: 2\nname: B 2021\ncitation: {}\ntables: []\n",
            r"b2021.yaml: its record is not in docs/adding-a-paper.md's shape",
        ),
        (
            b"order: 2\ntables: [\n",
            r"b2021.yaml: not valid YAML: .+ at line 3, column 1; fix it there \(docs/adding-a-paper.md\)$",
        ),
        (b"order: 2\ndate: 2020-13-45\n", r"month must be in 1\.\.12"),  # a value PyYAML cannot build
        (b"order: 2\nname: B \x07\n", "control characters are not allowed"),  # a control character
        (b"order: 2\nname: B \xff\n", r"b2021.yaml: not valid YAML: 'utf-8' codec can't decode"),  # not UTF-8
    ):
        (tmp_path / "b2021.yaml").write_bytes(text)
        with pytest.raises(papers.PaperRecordError) as refused:
            papers.load_papers(tmp_path)
        assert re.search(problem, str(refused.value)) and len(str(refused.value).splitlines()) == 1
    figures = tmp_path / "figures"
    figures.mkdir()
    entry = "figures: {%s: {experiments: [%s], reads: %s, caption: C}}\n"
    for name, experiment, reads in (
        ("a2020/fig1", "a2020", "checkpoints"),  # a reading no job has
        ("b2021/fig1", "a2020", "logs"),  # another paper's name
        ("a2020/fig1", "b2021", "logs"),  # another paper's experiment
    ):
        _paper_file(figures, "a2020", textwrap.dedent(record % "a2020") + entry % (name, experiment, reads))
        with pytest.raises(
            ValueError,
            match=rf"a2020.yaml: figure '{name}' must be named a2020/<figure> and give experiments "
            r"\(of a2020\), reads \(one of logs, metrics, analytic\) and caption \(docs/adding-a-paper.md\)$",
        ):
            papers.load_papers(figures)
    _paper_file(figures, "a2020", textwrap.dedent(record % "a2020") + entry % ("a2020/fig1", "a2020", "logs"))
    (paper,) = papers.load_papers(figures)
    assert paper.figures == {"a2020/fig1": papers.FigureSpec(("a2020",), "logs", "C")}
    assert paper.heading == "A 2020, T" and papers.reference(paper) == "A (2020). T."


def test_a_record_heads_its_report_section_with_its_name_and_title_unless_it_writes_one():
    """A paper's heading is "<name>, <title>" unless its record writes its own ``heading``."""
    assert {p.prefix: p.heading for p in papers.PAPERS if p.prefix in FOUR_PAPERS} == {
        "nie2023": "Nie et al. 2023, On the Inadequacy of Optimizing Alignment and Uniformity in Contrastive "
        "Learning of Sentence Representations (ICLR)",
        "li2024": "Li, Zhang & Nie 2024, A Unified Gradient Paradigm of Contrastive Losses in Sentence "
        "Representation Learning",
        "macl": "Huang et al. 2023, Model-Aware Contrastive Learning - Towards Escaping the Dilemmas (ICML)",
        "oar": "OAR 2024, Stable Contrastive Learning with Orthonormal Anchors Regression",
    }
    assert "heading" not in yaml.safe_load(papers.paper_for("oar").claims.read_text(encoding="utf-8"))
    assert all("paper" not in yaml.safe_load(p.claims.read_text(encoding="utf-8")) for p in papers.PAPERS)


def _doc_blocks(part: str = "files") -> dict[str, str]:
    """{path: text} of each block of docs/adding-a-paper.md that a line **`path`** introduces, in its part:
    ``files`` (the paper, up to "Optional") or ``figures`` (its "Figures" section)."""
    text = (REPO_ROOT / "docs" / "adding-a-paper.md").read_text(encoding="utf-8")
    files, _, figures = text.partition("\n## Optional\n")
    text = {"files": files, "figures": figures}[part]
    found = re.findall(r"^ *\*\*`([^`]+)`\*\*\n( *)```\w*\n(.*?)\n\2```", text, flags=re.M | re.S)
    return {path: textwrap.dedent(block) for path, _, block in found}


CLAIMS_FILE = "src/contrastlab/report/claims/smith2025.yaml"
TABLE = "src/contrastlab/tables/published/smith2025_table1"


def _fifth_paper(root) -> dict[str, str]:
    """The doc's paper added to a copy of the package under ``root``, word for word: the three new files,
    its experiment in config.yaml and its commands run (CITATION.cff, docs/deviations.md); the environment
    that runs the copy. The copy starts from the four papers (a paper added to this tree is left out)."""
    blocks = _doc_blocks()
    written = ["CITATION.cff", "docs/deviations.md"]
    assert list(blocks) == [CLAIMS_FILE, f"{TABLE}.csv", f"{TABLE}.yaml", "config.yaml", *written]
    added = {f"{p.prefix}.yaml" for p in papers.PAPERS if p.prefix not in FOUR_PAPERS}
    ignore = shutil.ignore_patterns("__pycache__", *added)
    shutil.copytree(REPO_ROOT / "src" / "contrastlab", root / "src" / "contrastlab", ignore=ignore)
    shutil.copytree(REPO_ROOT / "schemas", root / "schemas")
    cff = (REPO_ROOT / "CITATION.cff").read_text(encoding="utf-8")
    four = [p for p in papers.PAPERS if p.prefix in FOUR_PAPERS]
    cff = cff[: cff.index("\nreferences:\n") + 1] + papers.cff_references(four)
    (root / "CITATION.cff").write_text(cff, encoding="utf-8")
    for new in (CLAIMS_FILE, f"{TABLE}.csv", f"{TABLE}.yaml"):
        (root / new).write_text(blocks[new], encoding="utf-8")
    config = yaml.safe_load((REPO_ROOT / "config.yaml").read_text(encoding="utf-8"))
    config["experiments"].update(yaml.safe_load(blocks["config.yaml"])["experiments"])
    (root / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(root / "src")}
    (root / "docs").mkdir()
    out = {}
    for path in written:  # each command as the shell runs it
        command = blocks[path].replace(".venv/bin/python", sys.executable)
        run = subprocess.run(command, shell=True, cwd=root, env=env, capture_output=True, text=True)
        assert run.returncode == 0, run.stderr[-3000:]
        out[path] = run.stdout
    assert out["CITATION.cff"].endswith("references written (5 papers)\n")
    page = (root / "docs/deviations.md").read_text(encoding="utf-8")
    assert "\n## Smith & Lee 2025, A Margin for Sentence Embeddings\n" in page
    return env


def _python(code: str, root, env) -> str:
    """The stdout of ``python -c code`` run in the copy of the package at ``root``, which must succeed."""
    run = subprocess.run([sys.executable, "-c", code], cwd=root, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-3000:]
    return run.stdout


def test_the_worked_example_writes_the_title_twice():
    """The title is written in the record and the experiment's ``title``, no more."""
    blocks = _doc_blocks()
    assert [path for path, block in blocks.items() if "A Margin for Sentence Embeddings" in block] == [
        CLAIMS_FILE,
        "config.yaml",
    ]
    assert sum(block.count("A Margin for Sentence Embeddings") for block in blocks.values()) == 2


#: What the copy of the package reports once the fifth paper is added (run in a process of its own, so
#: that the records load from the copy).
_FIFTH_PAPER_CHECK = """
import json, sys
from contrastlab import config as cl_config
from contrastlab.hub.publish import citation_of
from contrastlab.paths import REPO_ROOT, Results
from contrastlab.report import build_report
from contrastlab.report.claims import PAPERS
from contrastlab.tables import TABLES
from contrastlab.tables.published import load_meta

config = cl_config.load(REPO_ROOT / "config.yaml")
config["select"] = {"experiments": ["smith2025", "oar_cifar10"]}
build_report(Results(REPO_ROOT / "out"), config, figures=[])
print(json.dumps({
    "title": TABLES["smith2025_table1"].title,
    "source": load_meta("smith2025_table1")["paper"]["reference"],
    "papers": list(PAPERS),
    "report": (REPO_ROOT / "out" / "report.md").read_text(encoding="utf-8"),
    "citation": citation_of("smith2025_sweep"),
}))
"""


def test_a_fifth_paper_added_as_docs_adding_a_paper_says(tmp_path):
    """docs/adding-a-paper.md's paper, followed word for word, reaches the tables, report, card and CFF."""
    env = _fifth_paper(tmp_path)
    # and, in the same process, this module's tests of the records hold in the copy, with the fifth paper
    run = f"\nimport runpy\ntests = runpy.run_path({__file__!r})\n"
    run += "\n".join(f"tests[{test!r}]()" for test in _RECORD_TESTS)
    seen = json.loads(_python(_FIFTH_PAPER_CHECK + run, tmp_path, env))
    assert seen["title"] == "Smith & Lee 2025, Table 1: STS.Avg"
    assert seen["source"] == "Smith, Lee (2025). A Margin for Sentence Embeddings."
    assert seen["papers"] == ["nie2023", "li2024", "macl", "oar", "smith2025"]
    report = seen["report"]
    oar = report.index("\n## OAR 2024, Stable Contrastive Learning with Orthonormal Anchors Regression\n")
    smith = report.index("\n## Smith & Lee 2025, A Margin for Sentence Embeddings\n")
    section = report[smith : report.index("\n## ", smith + 1)]
    assert oar < smith and "MPT beats InfoNCE on STS.Avg on BERT-base" in section
    assert "Smith & Lee 2025, Table 1: STS.Avg" in section and "## Other tables" not in report
    assert seen["citation"] == (
        "@article{smith2025margin,\n  title = {{A Margin for Sentence Embeddings}},\n"
        "  author = {Smith, Ada and Lee, Bo},\n  journal = {Journal of Made-up Results},\n  year = {2025}\n}"
    )
    references = yaml.safe_load((tmp_path / "CITATION.cff").read_text(encoding="utf-8"))["references"]
    assert references[-1] == {
        "type": "article",
        "title": "A Margin for Sentence Embeddings",
        "authors": [
            {"family-names": "Smith", "given-names": "Ada"},
            {"family-names": "Lee", "given-names": "Bo"},
        ],
        "journal": "Journal of Made-up Results",
        "year": 2025,
    }


#: This module's tests of the records that run again in the copy with the doc's paper.
_RECORD_TESTS = (
    "test_the_bibtex_agrees_with_citation_cff",
    "test_the_records_carry_the_links_their_papers_own_text_names",
    "test_one_block_holds_each_paper_once_and_experiments_name_their_paper",
    "test_the_records_give_the_tables_claims_and_schedules",
    "test_a_record_heads_its_report_section_with_its_name_and_title_unless_it_writes_one",
)


#: What the copy reports of the doc's figure: the catalogue's entry for a config with the paper, its
#: paper's analytic job, and the files its registered function writes.
_FIGURE_CHECK = """
import json
from contrastlab import config as cl_config
from contrastlab.figures import catalog
from contrastlab.figures.registry import drawing
from contrastlab.paths import REPO_ROOT

config = cl_config.load(REPO_ROOT / "config.yaml")
config["select"] = {"experiments": ["smith2025"]}
name = "smith2025/smith2025_fig1"
figure = drawing(name)
written = figure.draw(REPO_ROOT / "out" / name, {"points": 41, "batches": 10})
print(json.dumps({
    "drawn": [f for f in catalog.figures(cl_config.Grid(cl_config.validate(config))) if f["name"] == name],
    "job": catalog.ANALYTIC_FIGURES["smith2025"],
    "reads": figure.reads,
    "written": [str(p.relative_to(REPO_ROOT)) for p in written],
}))
"""


def test_a_figure_added_as_docs_adding_a_paper_says(tmp_path):
    """The doc's figure, followed word for word, is drawn in the paper's analytic job: PNG, PDF and CSV."""
    env = _fifth_paper(tmp_path)
    blocks = _doc_blocks("figures")
    assert list(blocks) == [CLAIMS_FILE, "src/contrastlab/figures/smith2025.py"]
    record = (tmp_path / CLAIMS_FILE).read_text(encoding="utf-8")
    assert record.count("figures: {}\n") == 1
    record = record.replace("figures: {}\n", blocks[CLAIMS_FILE] + "\n")
    (tmp_path / CLAIMS_FILE).write_text(record, encoding="utf-8")
    module = "src/contrastlab/figures/smith2025.py"
    (tmp_path / module).write_text(blocks[module], encoding="utf-8")
    seen = json.loads(_python(_FIGURE_CHECK, tmp_path, env))
    caption = yaml.safe_load(blocks[CLAIMS_FILE])["figures"]["smith2025/smith2025_fig1"]["caption"]
    drawn = {"name": "smith2025/smith2025_fig1", "kind": "analytic", "experiment": "smith2025"}
    assert seen["drawn"] == [{**drawn, "caption": caption}]
    assert seen["job"] == ["smith2025/smith2025_fig1"] and seen["reads"] == "analytic"
    stem = "out/smith2025/smith2025_fig1"
    assert seen["written"] == [f"{stem}.png", f"{stem}.pdf", f"{stem}.csv"]
    numbers = (tmp_path / f"{stem}.csv").read_text().splitlines()
    assert numbers[0] == "gap,loss" and len(numbers) == 42 and numbers[-1] == "1,0"
