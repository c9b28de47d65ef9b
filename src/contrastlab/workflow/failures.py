"""A failed job's one ``contrastlab:`` line: how it is worded (a full disk is named whichever library hit
it), and how the workflow prints the failed jobs' lines again as the very last lines of its output.

Snakemake goes on printing after a job's script printed its line (:func:`contrastlab.workflow.job.logged_to`),
so the Snakefile's ``onerror`` reads the failed jobs' lines back from their logs (:func:`failure_lines`)
and prints them when the process exits (:func:`print_at_exit`): the output ends with the line the docs
promise.
"""

from __future__ import annotations

import atexit
import errno
import os
import shlex
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from contrastlab.paths import CELL_FIELDS, cell_path

#: The start of the line a job's log ends with when Snakemake's retry was refused (job.logged_to).
NOT_RETRIED = "contrastlab: not retried (a retry fails the same way): "


def snakemake_dict(job: Any, name: str) -> dict[str, Any]:
    """``job``'s ``name`` (its ``wildcards``, ``input``, ``output`` or ``resources``: Snakemake's Namedlist,
    or a dict) as a dict; empty where it has none."""
    found = getattr(job, name, None)
    return dict(found.items()) if hasattr(found, "items") else {}


def job_results_dir(job: Any) -> str:
    """The ``results_dir`` of ``job``'s config (``results`` where it names none)."""
    return (getattr(job, "config", None) or {}).get("results_dir", "results")


def cell_label(wildcards: dict[str, Any]) -> str:
    """A job's cell (``<experiment>/<backbone>/<method>/seed<seed>``), else its wildcards' values by ``/``."""
    if set(CELL_FIELDS) <= set(wildcards):
        return cell_path(wildcards)
    return "/".join(map(str, wildcards.values()))


def disk_full(error: BaseException) -> OSError | None:
    """The ``OSError`` ENOSPC in ``error``'s chain (itself, its ``__cause__`` or ``__context__``, and
    theirs), or None: torch's "enforce fail ... unexpected pos" is a RuntimeError raised from it."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, OSError) and error.errno == errno.ENOSPC:
            return error
        error = error.__cause__ or error.__context__
    return None


def failure_line(error: BaseException, label: str, log_path: str | os.PathLike) -> str:
    """The one line a failed job prints: ``contrastlab: <label>: <Error>: <message> (log: <path>)``; a
    full disk anywhere in the error's chain (:func:`disk_full`) as ``no space left on <folder>`` and
    the fix."""
    where = f"{label}: " if label else ""
    message = " ".join(str(error).split())
    full = disk_full(error)
    if full is not None:
        # the folder of the file the OSError names, else the results folder the job's log lies in
        # (<results_dir>/logs/...: what the job writes), else the log's
        if full.filename:
            folder = Path(os.fsdecode(full.filename)).parent
        else:
            log = Path(log_path)
            folder = next((p.parent for p in log.parents if p.name == "logs"), log.parent)
        df = shlex.join(["df", "-h", str(folder)])
        what = f"no space left on {folder}; free space there ({df}) and run the same command again"
        return f"contrastlab: {where}{what} ({type(error).__name__}: {message}) (log: {log_path})"
    return f"contrastlab: {where}{type(error).__name__}: {message} (log: {log_path})"


def _log_line(log: str | os.PathLike) -> str | None:
    """The last ``contrastlab:`` line of a job's log (a refused retry's note gives the line it quotes)."""
    try:
        lines = Path(log).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    found = next((line for line in reversed(lines) if line.startswith("contrastlab: ")), None)
    return found.removeprefix(NOT_RETRIED) if found else None


def failure_lines(jobs: Iterable[Any]) -> list[str]:
    """The ``contrastlab:`` line of each failed Snakemake job (``rule``, ``wildcards``, ``log``; a group
    job's ``jobs`` each), read from the end of its log; a job whose log holds none (it failed before its
    script ran, or its log could not be written) gets a line naming the rule and the log."""
    lines: list[str] = []
    for job in jobs:
        for one in getattr(job, "jobs", None) or [job]:
            logs = [str(log) for log in (getattr(one, "log", None) or [])]
            found = [line for line in map(_log_line, logs) if line]
            if found:
                lines += found
                continue
            cell = cell_label(snakemake_dict(one, "wildcards"))
            label = f"rule {one.rule.name} {cell}".strip()
            where = f" (log: {', '.join(logs)})" if logs else ""
            lines.append(
                f"contrastlab: {label} failed without a contrastlab: line; see its output above (a job "
                f"killed, e.g. out of memory, resumes when the same command runs again){where}"
            )
    return list(dict.fromkeys(lines))


def print_at_exit(lines: list[str]) -> None:
    """Print ``lines`` to stderr when this process exits: after Snakemake's last words (its error
    summary and ``WorkflowError``, printed after ``onerror`` returns), so they end the output."""
    if lines:
        atexit.register(lambda: print("\n".join(lines), file=sys.stderr, flush=True))
