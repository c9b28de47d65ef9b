"""Write CI's section of docs/measured.md from .ci/run's own timestamps and pytest's summary line.

Usage: python .ci/measured.py STEPS_TSV TEST_LOG docs/measured.md

STEPS_TSV holds one "<unix seconds>\t<step>" line per step .ci/run started, the last one "done"; a
step took until the next one started. Only the text between the ci:begin and ci:end markers changes.
"""

from __future__ import annotations

import itertools
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

BEGIN, END = "<!-- ci:begin", "<!-- ci:end -->"
#: pytest's last line, "2065 passed, 10 skipped in 797.73s (0:13:17)": bare under -q, else between "=" rules.
SUMMARY = re.compile(r"^(?:=+ )?(\d+ passed[^=\n]*? in [\d.]+s(?: \([^)]*\))?)(?: =+)?$", re.MULTILINE)


def clock(seconds: float) -> str:
    """``m:ss`` (``h:mm:ss`` past an hour)."""
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def pytest_lines(log: Path) -> list[str]:
    """pytest's final summary ("N passed, M skipped in S s") and the fault suite's tally, as they ran."""
    text = log.read_text(errors="replace") if log.is_file() else ""
    found = []
    summary = SUMMARY.findall(text)
    if summary:
        found.append(f"pytest: {summary[-1]}")
    faults = re.findall(r"\d+ faults injected, \d+ handled", text)
    if faults:
        found.append(f"fault suite: {faults[-1]}")
    return found


def section(steps: list[tuple[float, str]], log: Path) -> str:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout
    start, end = steps[0][0], steps[-1][0]
    rows = [
        f"| {name} | {time.strftime('%H:%M:%S', time.gmtime(at))} | {clock(following - at)} |"
        for (at, name), (following, _) in itertools.pairwise(steps)
    ]
    machine = f"{os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}"
    lines = [
        "## CI: `bash .ci/run` on a fresh clone",
        "",
        f"Commit `{commit.strip() or 'unknown'}`, {time.strftime('%Y-%m-%d', time.gmtime(start))} (UTC), "
        f"{machine}: **{clock(end - start)} in all**.",
        "",
        "| step | started (UTC) | took |",
        "|---|---|---|",
        *rows,
        "",
        *(f"- {line}" for line in pytest_lines(log)),
    ]
    return "\n".join(lines).rstrip() + "\n"


def main(steps_file: str, log: str, page: str) -> None:
    steps = [
        (float(at), name)
        for at, name in (line.split("\t", 1) for line in Path(steps_file).read_text().splitlines() if line)
    ]
    path = Path(page)
    text = path.read_text()
    head, rest = text.split(BEGIN, 1)
    marker_line, _ = rest.split("\n", 1)
    _, tail = rest.split(END, 1)
    path.write_text(f"{head}{BEGIN}{marker_line}\n{section(steps, Path(log))}{END}{tail}")
    print(f"wrote CI's times into {page}")


if __name__ == "__main__":
    main(*sys.argv[1:4])
