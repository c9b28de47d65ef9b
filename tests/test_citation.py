"""LICENSE and CITATION.cff say what pyproject.toml says, CITATION.cff's references are the papers' records
as ``python -m contrastlab.papers --cff`` writes them, and ``cffconvert --validate`` finds CITATION.cff
valid against the CFF 1.2.0 schema (cffconvert requires jsonschema < 4, the project >= 4.20: make install
gives it an environment of its own, .venv/cffconvert, under constraints-cffconvert.txt)."""

from __future__ import annotations

import subprocess
import tomllib

import pytest
import yaml
from test_install import install, pins  # scripts/install.py, which puts cffconvert in place

from contrastlab import papers
from contrastlab.paths import REPO_ROOT

CFFCONVERT = install.CFFCONVERT_ENV / "bin" / "cffconvert"


def cffconvert_validate(path) -> subprocess.CompletedProcess:
    assert CFFCONVERT.is_file(), f"{CFFCONVERT} is missing: make install (scripts/install.py) puts it there"
    return subprocess.run(
        [str(CFFCONVERT), "--validate", "-i", str(path)], capture_output=True, text=True, timeout=120
    )


def test_cffconvert_validates_the_citation():
    done = cffconvert_validate(REPO_ROOT / "CITATION.cff")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Citation metadata are valid according to schema version 1.2.0." in done.stdout


def test_cffconvert_rejects_a_citation_without_its_authors(tmp_path):
    """The check can fail: the same file without ``authors`` (required by the schema) is refused."""
    citation = yaml.safe_load((REPO_ROOT / "CITATION.cff").read_text())
    del citation["authors"]
    broken = tmp_path / "CITATION.cff"
    broken.write_text(yaml.safe_dump(citation, sort_keys=False))
    done = cffconvert_validate(broken)
    assert done.returncode != 0 and "'authors' is a required property" in done.stdout + done.stderr


def test_cffconverts_own_pins_keep_it_apart_from_the_project():
    pinned = pins(install.CFFCONVERT_CONSTRAINTS)
    assert pinned["cffconvert"] == "2.0.0" and pinned["jsonschema"].startswith("3.")
    assert install.CFFCONVERT_ENV.parent == install.CUDA_CHOICE.parent  # inside the project's environment


def test_the_licence_and_the_citation_agree_with_the_package():
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    citation = yaml.safe_load((REPO_ROOT / "CITATION.cff").read_text())
    assert citation["cff-version"] == "1.2.0" and citation["type"] == "software"
    assert citation["version"] == project["version"]
    assert citation["license"] == project["license"]["text"] == "MIT"
    assert (REPO_ROOT / "LICENSE").read_text().startswith("MIT License\n")


def test_the_citation_names_the_four_reproduced_papers():
    titles = [r["title"] for r in yaml.safe_load((REPO_ROOT / "CITATION.cff").read_text())["references"]]
    wanted = ("On the Inadequacy of Optimizing Alignment", "A Unified Paradigm for Gradient",
              "Model-Aware Contrastive Learning", "Orthonormal Anchors Regression")  # fmt: skip
    assert all(sum(w in t for t in titles) == 1 for w in wanted), titles


def test_the_references_are_current_as_the_command_writes_them(tmp_path):
    """CITATION.cff's references are as ``python -m contrastlab.papers --cff`` writes them, the rest kept."""
    text = (REPO_ROOT / "CITATION.cff").read_text(encoding="utf-8")
    head = text[: text.index("\nreferences:\n") + 1]
    assert text == head + papers.cff_references(), "CITATION.cff is stale: python -m contrastlab.papers --cff"
    assert papers.cff_references().count("\n  - type: ") == len(papers.PAPERS) >= 4  # 4: the tree's papers
    stale = tmp_path / "CITATION.cff"
    removed = "references:\n  - type: article\n    title: A paper since removed\n"
    stale.write_text(head + removed, encoding="utf-8")
    assert papers.write_cff(stale) is True and stale.read_text(encoding="utf-8") == text
    assert papers.write_cff(stale) is False  # current: left as it is
    stale.write_text(head, encoding="utf-8")
    with pytest.raises(ValueError, match=r"^contrastlab: .*CITATION.cff has no 'references:' line: add one"):
        papers.write_cff(stale)
    assert papers.main(["--cff", "extra"]) == 2  # the usage, and nothing written
