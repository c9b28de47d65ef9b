"""The documents a user reads speak of the project a clone has (issue 78 item 7): every relative link in the
README and docs/ reaches a file of the checkout, and the user-facing reference pages name no path of the
development machines (an absolute virtualenv, the ``../shared`` folder beside our checkouts)."""

import re
import subprocess
from pathlib import PurePosixPath

import pytest

from contrastlab.paths import REPO_ROOT

#: Pages the README links as reference for users; developer pages (docs/development.md) may name ../shared.
USER_REFERENCE = ["docs/contracts.md", "docs/cost.md"]

MARKDOWN_LINK = re.compile(r"\]\(([^)\s]+)\)")


def _tracked() -> set[str]:
    out = subprocess.run(
        ["git", "ls-files"], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    ).stdout
    files = set(out.splitlines())
    folders = {str(parent) for name in files for parent in PurePosixPath(name).parents}
    return files | folders


def _relative_links(page: str) -> list[str]:
    links = MARKDOWN_LINK.findall((REPO_ROOT / page).read_text())
    return [link.split("#")[0] for link in links if not re.match(r"[a-z]+:|#", link) and link.split("#")[0]]


@pytest.mark.parametrize("page", USER_REFERENCE)
def test_a_user_reference_page_names_no_development_machine_path(page):
    text = (REPO_ROOT / page).read_text()
    assert "../shared" not in text and "/work/" not in text and "protocol.md" not in text


def test_every_relative_link_of_the_readme_and_docs_reaches_a_file_of_the_checkout():
    tracked = _tracked()
    pages = [
        "README.md",
        *sorted(name for name in tracked if name.startswith("docs/") and name.endswith(".md")),
    ]
    broken = []
    for page in pages:
        base = (REPO_ROOT / page).parent
        for link in _relative_links(page):
            target = (base / link).resolve()
            try:
                name = str(target.relative_to(REPO_ROOT.resolve()))
            except ValueError:
                broken.append(f"{page}: {link} (outside the checkout)")
                continue
            if name.rstrip("/") not in tracked:
                broken.append(f"{page}: {link}")
    assert broken == []
