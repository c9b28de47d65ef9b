"""LICENSE and CITATION.cff say what pyproject.toml says (``cffconvert --validate`` checks the file against
the CFF 1.2.0 schema; it pins an older jsonschema than the project's, so it runs outside the suite)."""

from __future__ import annotations

import tomllib

import yaml

from contrastlab.paths import REPO_ROOT


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
