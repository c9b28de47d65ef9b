"""Every command block of the README and docs/ is checked as written, or its page says what it needs that the
suite lacks.

A block is a fenced block whose language is bash, sh, console or shell, or a plain one whose first line is
a command. Each command is checked by the first that applies: ``make <target> [NAME=value ...]``: ``make
-n`` of the same words; ``snakemake ...``: read by Snakemake's own parser, its profile and config files
present, its ``--config`` entries ones Snakemake takes, the config loaded and validated, and a cell it
names as its target one of that config's cells; a short command run as written (:data:`RUN`); a command
another test runs (:data:`BY_TEST`); otherwise the block is marked ``<!-- needs: <what> -->`` on the line
before it (a GPU, the internet, a cluster, the real data), and the page's text says so. docs/history/ and
docs/gpu-runs/ are records of runs made, not instructions: left out.
"""

from __future__ import annotations

import functools
import json
import re
import shlex
import subprocess
import textwrap
from dataclasses import dataclass

import pytest

from contrastlab import config as cl_config
from contrastlab.config.invocation import config_entry_problem, configfile_problem
from contrastlab.paths import REPO_ROOT
from tests.make_command import make_command, make_env

PAGES = [
    "README.md",
    *sorted(str(p.relative_to(REPO_ROOT)) for p in (REPO_ROOT / "docs").glob("*.md")),
    "docs/screenshots/README.md",
]
COMMAND_LANGUAGES = {"bash", "sh", "console", "shell"}
COMMAND_START = re.compile(
    r"(\.venv/bin/|make |snakemake |python |PYTHONPATH=|ssh |for |git |dvc |pre-commit )"
)
FENCE = re.compile(r"^( *)```(\w*)\n(.*?)\n\1```", flags=re.M | re.S)
#: What else begins an indented command block (an indented line of prose begins otherwise).
INDENTED_START = re.compile(r"(docker |apptainer |CONTRASTLAB_\w+=)")
NEEDS = re.compile(r"<!-- needs: ([^>]+?) -->\s*$")

_FIFTH_PAPER = "tests/test_papers.py::test_a_fifth_paper_added_as_docs_adding_a_paper_says"
#: Commands that a test of their own runs: (page, the command as the page writes it) -> that test.
BY_TEST = {
    **{
        ("docs/adding-a-paper.md", command): _FIFTH_PAPER
        for command in (
            ".venv/bin/python -m contrastlab.papers --cff",
            ".venv/bin/python -m contrastlab.tables.deviations config.yaml > docs/deviations.md",
        )
    },
    ("docs/reproduction.md", ".venv/bin/dvc repro"): "tests/e2e/test_dvc.py::demo",
    # a local folder as the remote
    ("docs/reproduction.md", ".venv/bin/dvc remote add -d store /mnt/shared/contrastlab-dvc"): (
        "tests/e2e/test_dvc.py::demo"
    ),
    **{
        ("docs/reproduction.md", command): "tests/e2e/test_dvc.py"
        for command in (
            ".venv/bin/dvc exp run -S training.lr=1e-4",
            ".venv/bin/dvc exp show",
            ".venv/bin/dvc metrics show",
            ".venv/bin/dvc plots show",
            "git add dvc.lock summary/",
            'git add .dvc/config dvc.lock summary/demo.json resources/*.dvc && git commit -m "freeze demo"',
            ".venv/bin/dvc pull",
        )
    },
    (
        "docs/reproduction.md",
        ".venv/bin/snakemake --configfile config/demo.yaml --report results/demo/snakemake-report.zip",
    ): "tests/e2e/test_pipeline.py",
}


#: Commands short enough to run here as written, in a scratch folder beside a link to the checkout's .venv.
RUN = {
    '.venv/bin/python -c "from contrastlab.cost.measured import migrate_benchmarks as m; '
    "print(len(m('results/demo')))\"": "0\n",
}


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    text: str
    needs: str | None  # what its page's marker says it needs

    @property
    def commands(self) -> list[str]:
        """Its commands, each on one line (continuations joined), without comments."""
        joined = re.sub(r"\\\n\s*", " ", self.text)
        return [command for command in map(_uncommented, joined.splitlines()) if command]


def _uncommented(line: str) -> str:
    """``line`` without its trailing ``# comment`` (a ``#`` outside quotes), spaces squeezed."""
    quote, out = None, []
    for ch in line:
        if quote is None and ch == "#":
            break
        if ch in "'\"":
            quote = None if quote == ch else (ch if quote is None else quote)
        out.append(ch)
    return " ".join("".join(out).split())


def _indented_blocks(page: str, text: str) -> list[Block]:
    """The page's indented code blocks (four spaces, after a blank line or a marker, outside any fence)
    whose first line is a command."""
    lines = FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text).split("\n")
    found, k = [], 0
    while k < len(lines):
        before = lines[k - 1] if k else ""
        if lines[k].startswith("    ") and (not before.strip() or NEEDS.search(before)):
            end = k
            while end < len(lines) and lines[end].startswith("    "):
                end += 1
            body = textwrap.dedent("\n".join(lines[k:end]))
            if COMMAND_START.match(body) or INDENTED_START.match(body):
                marker = NEEDS.search(before)
                found.append(Block(page, k + 1, body, marker.group(1) if marker else None))
            k = end
        k += 1
    return found


def blocks() -> list[Block]:
    """Every command block of :data:`PAGES`: the fenced ones, then the indented ones, page by page."""
    found = []
    for page in PAGES:
        text = (REPO_ROOT / page).read_text(encoding="utf-8")
        found += _indented_blocks(page, text)
        for match in FENCE.finditer(text):
            body, language = match.group(3), match.group(2)
            first = body.strip().splitlines()[0].strip() if body.strip() else ""
            if language not in COMMAND_LANGUAGES and not (language == "" and COMMAND_START.match(first)):
                continue
            before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
            marker = NEEDS.search(before)
            line = text[: match.start()].count("\n") + 1
            found.append(Block(page, line, textwrap.dedent(body), marker.group(1) if marker else None))
    return found


def how(block: Block, command: str) -> str | None:
    """How ``command`` of ``block`` is checked here, or by which test; None: by nothing."""
    if (block.page, command) in BY_TEST:
        return f"run by {BY_TEST[(block.page, command)]}"
    words = command.split()
    if command in RUN:
        return "run as written in a scratch folder"
    if words[0] == "make":
        return "make -n"
    if words[0] in ("snakemake", ".venv/bin/snakemake") and "<" not in command:
        return "read by Snakemake's parser, config loaded with its --config"
    return None


def listing() -> list[str]:
    """Every command block with how each command is checked (``needs <what>`` for what the page marks)."""
    lines = []
    for block in blocks():
        marked = f"needs {block.needs} (marked in the page)" if block.needs else "UNCHECKED"
        for command in block.commands:
            lines.append(f"{block.page}:{block.line}: {command[:90]} -> {how(block, command) or marked}")
    return lines


def test_every_command_block_is_checked_or_marked_as_needing_what_the_suite_lacks():
    lines = listing()
    print("\n".join(lines))  # the listing, with -s
    assert len(lines) >= 60 and {b.page for b in blocks()} >= {"README.md", "docs/reproduction.md"}
    unchecked = [line for line in lines if line.endswith("UNCHECKED")]
    assert unchecked == [], "\n".join(unchecked)


def test_a_marked_page_says_so_in_its_text():
    """A marker is for the reader too: the page's text names what the block needs, near it."""
    for block in blocks():
        if block.needs:
            text = (REPO_ROOT / block.page).read_text(encoding="utf-8").splitlines()
            near = " ".join(text[max(0, block.line - 6) : block.line - 1]).lower()
            first_word = block.needs.split()[0].lower()
            assert first_word in near.replace("<!-- needs:", ""), (block.page, block.line, block.needs)


def _commands(kind: str) -> list[tuple[str, str]]:
    return [
        (f"{b.page}:{b.line}", c)
        for b in blocks()
        for c in b.commands
        if how(b, c) is not None and how(b, c).startswith(kind)
    ]


@pytest.mark.parametrize(("where", "command"), _commands("make -n"), ids=lambda v: v if ":" in v else None)
def test_each_make_line_names_a_target_that_takes_its_words(where, command):
    words = [w for w in shlex.split(command) if w != "..."]
    argv = make_command("-n", *words[1:])  # -o install: the recipe printed, nothing installed
    done = subprocess.run(argv, cwd=REPO_ROOT, env=make_env(), capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, f"{where}: {command}\n{done.stderr}"


@functools.cache
def _loaded(configfile: str, overrides: str) -> dict:
    return cl_config.load(REPO_ROOT / configfile, json.loads(overrides) or None)


@pytest.mark.parametrize(
    ("where", "command"), _commands("read by Snakemake"), ids=lambda v: v if ":" in v else None
)
def test_each_snakemake_line_is_read_and_its_config_loads(where, command):
    from snakemake.cli import get_argument_parser, parse_config

    argv = [w for w in shlex.split(command)[1:] if w != "..."]
    args = get_argument_parser().parse_args(argv)  # an unknown option ends the test (SystemExit)
    for profile in [args.workflow_profile] if args.workflow_profile else []:
        assert (REPO_ROOT / profile / "config.yaml").is_file(), f"{where}: no profile {profile}"
    assert configfile_problem(argv) is None and config_entry_problem(argv) is None, where
    configfiles = [str(p) for p in args.configfile or []] or ["config.yaml"]
    overrides = parse_config(args.config or [])
    config = _loaded(configfiles[0], json.dumps(overrides))
    grid = cl_config.Grid(config)
    for target in args.targets or []:
        cell = re.search(r"(?:metrics|checkpoints)/([^/]+)/([^/]+)/([^/]+)/seed(\d+)/", target)
        if cell:
            experiment, backbone, method, seed = cell.groups()
            assert cl_config.Cell(experiment, backbone, method, int(seed)) in grid.cells, (
                f"{where}: {grid.experiment(experiment).not_a_cell(backbone, method, seed)}"
            )


@pytest.mark.parametrize("command", sorted(RUN))
def test_each_short_command_runs_as_written(tmp_path, command):
    """Run in a scratch folder holding only a link to the checkout's .venv."""
    (tmp_path / ".venv").symlink_to(REPO_ROOT / ".venv")
    done = subprocess.run(command, shell=True, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout == RUN[command], done.stderr[-2000:]


def test_the_tests_named_for_a_command_exist():
    for (page, command), test in BY_TEST.items():
        path, _, name = test.partition("::")
        source = (REPO_ROOT / path).read_text(encoding="utf-8")
        assert not name or re.search(rf"^def {name}\(", source, flags=re.M), test
        page_text = (REPO_ROOT / page).read_text(encoding="utf-8")
        assert command.split()[0] in page_text


def test_an_unmarked_block_with_a_placeholder_is_caught(tmp_path, monkeypatch):
    """The check can fail: a block with a ``<placeholder>`` and no marker is unchecked."""
    block = Block("x.md", 1, "snakemake --configfile <yours>", None)
    assert [how(block, c) for c in block.commands] == [None]
    assert how(Block("x.md", 1, "ssh you@host", "a cluster"), "ssh you@host") is None


def test_make_screenshots_without_a_demo_or_a_browser_says_so_in_one_line(tmp_path, monkeypatch):
    from tests.report import chromium

    report = tmp_path / "report.html"
    with pytest.raises(
        SystemExit,
        match=r"^contrastlab: make screenshots reads .*report.html, which is not there; "
        r"run make demo first$",
    ):
        chromium.docs_screenshots(report, tmp_path)
    report.write_text("<html></html>")
    monkeypatch.setattr(chromium, "browser", lambda: None)
    with pytest.raises(
        SystemExit, match=r"^contrastlab: make screenshots needs Chromium \(apt-get install chromium\)"
    ):
        chromium.docs_screenshots(report, tmp_path)
    assert list(tmp_path.iterdir()) == [report]
