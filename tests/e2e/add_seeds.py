"""The report's add-seeds script as bash runs it, and the cells that a dry run of each of its commands
plans (tests/e2e/test_pipeline.py on the demo's own report, test_search_workflow.py on a finished search)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import yaml


def report_script(report: str) -> list[str]:
    """The add-seeds script of a report.md: the indented code block in its commands box."""
    box = report.split('<div class="commands" markdown="1">', 1)[1].split("</div>", 1)[0]
    return [line.removeprefix("    ") for line in box.strip("\n").splitlines()]


def script_commands(script: list[str], folder: Path) -> list[list[str]]:
    """The arguments each command of ``script`` passes to ``.venv/bin/snakemake``: bash runs the script in
    ``folder``, where a ``.venv/bin/snakemake`` records them."""
    fake = folder / ".venv" / "bin" / "snakemake"
    fake.parent.mkdir(parents=True)
    fake.write_text("#!/bin/sh\nprintf '%s\\0' \"$@\" >> commands\nprintf '\\n' >> commands\n")
    fake.chmod(0o755)
    subprocess.run(["bash", "-c", "\n".join(script)], cwd=folder, check=True, env={"PATH": "/usr/bin:/bin"})
    return [line.split("\0")[:-1] for line in (folder / "commands").read_text().splitlines()]


def named_cells(argv: list[str]) -> set[str]:
    """The cells (``experiment/backbone/method/seed``) a command's ``select=`` word names (none without)."""
    words = [yaml.safe_load(word.removeprefix("select=")) for word in argv if word.startswith("select=")]
    return {
        f"{e}/{b}/{m}/seed{s}"
        for select in words
        for e in select["experiments"]
        for b in select["backbones"]
        for m in select["methods"]
        for s in select["seeds"]
    }


def planned_cells(output: str) -> set[str]:
    """The cells (``experiment/backbone/method/seed``) of the jobs a dry run lists, from their wildcards."""
    cells = set()
    for line in re.findall(r"^\s*wildcards: (.*)$", output, re.M):
        wildcards = dict(pair.split("=", 1) for pair in line.split(", "))
        if {"experiment", "backbone", "method", "seed"} <= set(wildcards):
            cells.add("{experiment}/{backbone}/{method}/seed{seed}".format(**wildcards))
    return cells
