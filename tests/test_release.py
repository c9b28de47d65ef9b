"""A release is one version everywhere: pyproject.toml, CITATION.cff, ``contrastlab.__version__`` and the
latest release of CHANGELOG.md (Keep a Changelog: an Unreleased section, then ``## [x.y.z] - date``); and
.pre-commit-config.yaml runs the project's own lint as local hooks."""

from __future__ import annotations

import re
import tomllib

import yaml

import contrastlab
from contrastlab.paths import REPO_ROOT

#: A release heading of a Keep a Changelog text: its (version, date), newest first.
RELEASE = re.compile(r"^## \[(\d+\.\d+\.\d+)\] - (\d{4}-\d{2}-\d{2})$", flags=re.M)


def test_the_version_is_the_changelogs_latest_release_everywhere():
    """The version moves with the CHANGELOG."""
    text = (REPO_ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    releases = RELEASE.findall(text)
    assert releases[0] == ("0.2.0", "2026-11-27")
    assert text.index("## [Unreleased]") < text.index("## [0.2.0]")
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    citation = yaml.safe_load((REPO_ROOT / "CITATION.cff").read_text())
    assert project["version"] == citation["version"] == contrastlab.__version__ == releases[0][0]


def test_a_changelog_release_heading_is_read_only_in_its_own_form():
    text = (
        "## [Unreleased]\n\n## [1.10.0] - 2027-01-02\n- x\n## [1.9.0] 2026-12-01\n## [1.8.0] - 2026-11-30\n"
    )
    assert RELEASE.findall(text) == [("1.10.0", "2027-01-02"), ("1.8.0", "2026-11-30")]


def test_pre_commit_runs_the_projects_own_lint_as_local_hooks():
    """Local hooks only (nothing fetched), the environment's tools: ``make lint``'s ruff check and
    lint-imports, and ``ruff format --check``."""
    config = yaml.safe_load((REPO_ROOT / ".pre-commit-config.yaml").read_text())
    assert [repo["repo"] for repo in config["repos"]] == ["local"]
    hooks = {hook["id"]: hook for hook in config["repos"][0]["hooks"]}
    assert {name: hook["entry"] for name, hook in hooks.items()} == {
        "ruff-check": ".venv/bin/ruff check",
        "ruff-format": ".venv/bin/ruff format --check",
        "lint-imports": ".venv/bin/lint-imports",
    }
    assert {hook["language"] for hook in hooks.values()} == {"system"}
    lint = re.search(r"^lint:.*\n((?:\t.*\n)+)", (REPO_ROOT / "Makefile").read_text(), flags=re.M).group(1)
    assert "$(BIN)/ruff check" in lint and "$(BIN)/lint-imports" in lint  # the same tools make lint runs
    assert all((REPO_ROOT / hook["entry"].split()[0]).is_file() for hook in hooks.values())
