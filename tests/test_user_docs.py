"""The documents a user reads speak of the project a clone has: every relative link reaches a file of the
checkout, and the user-facing pages name no path of the development machines."""

import inspect
import pkgutil
import re
import subprocess
import sys
from pathlib import PurePosixPath

import pytest

import contrastlab
from contrastlab import config as cl_config
from contrastlab.paths import REPO_ROOT

#: Pages that may name the development machines' ``../shared``: the developers' guide (it says where the
#: tests look for the real data) and the measurements' record (the commands as they were run).
DEVELOPER_PAGES = {"docs/development.md", "docs/measured.md"}
#: Every page a user reads: the README and docs/ (the records under docs/history and docs/gpu-runs aside).
USER_REFERENCE = sorted(
    str(page.relative_to(REPO_ROOT))
    for page in [REPO_ROOT / "README.md", *(REPO_ROOT / "docs").glob("*.md")]
    if str(page.relative_to(REPO_ROOT)) not in DEVELOPER_PAGES
)

MARKDOWN_LINK = re.compile(r"\]\(([^)\s]+)\)")


def _tracked() -> set[str]:
    files = set(subprocess.check_output(["git", "ls-files"], cwd=REPO_ROOT, text=True).splitlines())
    folders = {str(parent) for name in files for parent in PurePosixPath(name).parents}
    return files | folders


def _relative_links(page: str) -> list[str]:
    links = MARKDOWN_LINK.findall((REPO_ROOT / page).read_text())
    return [link.split("#")[0] for link in links if not re.match(r"[a-z]+:|#", link) and link.split("#")[0]]


@pytest.mark.parametrize("page", USER_REFERENCE)
def test_a_user_reference_page_names_no_development_machine_path(page):
    text = (REPO_ROOT / page).read_text()
    assert "../shared" not in text and "/work/" not in text and "protocol.md" not in text


def test_the_presets_cite_no_file_that_does_not_ship():
    """The presets cite only shipped files; config/cpu.yaml's CI data layout is said and overridable."""
    for preset in [REPO_ROOT / "config.yaml", *sorted((REPO_ROOT / "config").glob("*.yaml"))]:
        text = preset.read_text()
        assert "protocol.md" not in text and "/work/" not in text, preset
        outside_data = [
            line
            for line in text.splitlines()
            if "../shared" in line and "_dir:" not in line and "wiki_path:" not in line
        ]
        assert outside_data == [], preset


def test_make_help_says_where_the_demo_writes():
    """make help names results/demo/... for the demo and no literal $(SHARED)."""
    helps = dict(re.findall(r"^([a-z-]+):.*?## (.*)$", (REPO_ROOT / "Makefile").read_text(), flags=re.M))
    demo = cl_config.load(REPO_ROOT / "config" / "demo.yaml")["results_dir"]
    assert helps["demo"].endswith(f"{demo}/tables/*.{{csv,md,tex}}, {demo}/report.html")
    assert "$(" not in helps["cpu"] and "SHARED=<folder" in helps["cpu"]


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


def test_the_demo_section_sizes_oar_synthetic_study_as_the_presets_do():
    """docs/reproduction.md's demo states the synthetic study's seeds as config/demo.yaml and config.yaml
    set them (the demo once ran it at the full run's size)."""
    from contrastlab.training.synthetic import SyntheticSettings

    demo = cl_config.load(REPO_ROOT / "config" / "demo.yaml")["oar_synthetic"]
    full = SyntheticSettings(**cl_config.load(REPO_ROOT / "config.yaml")["oar_synthetic"])
    text = (REPO_ROOT / "docs" / "reproduction.md").read_text(encoding="utf-8")
    section = " ".join(text.split("### The demo")[1].split("\n## ")[0].split())
    assert f"{demo['seeds']} seeds" in section and f"{full.seeds} seeds" in section
    same = demo["seeds"] == full.seeds and bool(demo["sweep"])
    assert ("same size as in the full run" in section) == same


def test_every_module_a_page_names_is_where_it_says():
    """`contrastlab.a.b`, a `.c` beside it (`contrastlab.a.c`) and `room.module.name` name a module of the
    package, or a name it defines or exports (its __all__)."""
    rooms, wrong = {m.name for m in pkgutil.iter_modules(contrastlab.__path__)}, []
    for page in USER_REFERENCE:
        text, last = (REPO_ROOT / page).read_text(encoding="utf-8"), (0, "")
        for match in re.finditer(r"`(\.?[A-Za-z_][\w.]*\w)", text):
            name, full = match.group(1), None
            if name.startswith("contrastlab."):
                full, last = name, (match.end(), name)
            elif name.startswith(".") and last[1] and match.start() - last[0] < 10:
                full = last[1].rsplit(".", 1)[0] + name
            elif name.split(".")[0] in rooms and name.count(".") >= 2 and not name.endswith(".json"):
                full = f"contrastlab.{name}"
            try:
                obj = full and pkgutil.resolve_name(full)
            except (ImportError, AttributeError) as error:
                wrong.append(f"{page}: {name} ({error})")
                continue
            owner, _, short = (full or "").rpartition(".")
            exported = getattr(sys.modules.get(owner), "__all__", None)
            if (inspect.isfunction(obj) or inspect.isclass(obj)) and exported is not None:
                if obj.__module__ != owner and short not in exported:
                    wrong.append(f"{page}: {name} (defined in {obj.__module__})")
    assert wrong == []


def test_the_readme_says_where_pre_commit_comes_from():
    """`pre-commit install`, which the README offers, finds no pre-commit in .venv: make install has none."""
    readme = " ".join((REPO_ROOT / "README.md").read_text(encoding="utf-8").split())
    lock = (REPO_ROOT / "requirements.lock").read_text(encoding="utf-8")
    assert "\npre-commit==" in lock or "pip install pre-commit" in readme


def test_every_test_a_page_names_by_its_id_exists():
    """A page that names a test as ``tests/<file>.py::<test>`` names one the suite has (a moved test once
    left docs/gpu-defects.md pointing at the module it had left)."""
    pages = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]
    named = {m for page in pages for m in re.findall(r"(tests/[\w/]+\.py)::(\w+)", page.read_text())}
    missing = [
        f"{path}::{name}"
        for path, name in sorted(named)
        if f"def {name}(" not in (REPO_ROOT / path).read_text()
    ]
    assert missing == []
