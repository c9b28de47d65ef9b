"""The suite never touches the user's results: what lies under the checkout's ``results/`` and
``resources/`` is the same after the run as before it (tests/conftest.py checks it once per run, in the
controlling process, listing any changed file). A file is its relative path, size and modification time
(``os.lstat``); folders are not compared (an empty folder left behind changes nothing a table reads).

A user's workflow run beside the suite (``make demo`` beside ``make test``, reliability 8, C4) changes
those folders too. The guard still fails then, but names that likely cause (:func:`likely_cause`): a
live run record not started by the suite, a Snakemake log written meanwhile, changed files inside a
workflow's results folder.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

import psutil

from contrastlab.workflow.recovery import _gone, this_machine

Snapshot = dict[str, tuple[int, int]]


def snapshot(roots: Iterable[str | os.PathLike], base: str | os.PathLike) -> Snapshot:
    """Every file under ``roots`` (absent ones are empty) as {path relative to ``base``: (size, mtime_ns)}."""
    found: Snapshot = {}
    for root in roots:
        for folder, _, files in os.walk(root):  # followlinks=False: a linked folder is not descended
            for name in files:
                path = Path(folder) / name
                try:
                    info = path.lstat()
                except FileNotFoundError:  # removed while walking (a run still writing): not there
                    continue
                found[os.path.relpath(path, base)] = (info.st_size, info.st_mtime_ns)
    return found


def changed_paths(before: Mapping[str, tuple[int, int]], after: Mapping[str, tuple[int, int]]) -> list[str]:
    """The files created, changed or deleted between two snapshots, sorted."""
    return sorted(path for path in set(before) | set(after) if before.get(path) != after.get(path))


def changes(before: Mapping[str, tuple[int, int]], after: Mapping[str, tuple[int, int]]) -> list[str]:
    """One line per file created, changed or deleted between two snapshots, sorted by path."""
    lines = []
    for path in changed_paths(before, after):
        if path not in before:
            lines.append(f"created {path}")
        elif path not in after:
            lines.append(f"deleted {path}")
        else:
            (size, mtime), (new_size, new_mtime) = before[path], after[path]
            lines.append(f"changed {path} (size {size} -> {new_size}, mtime_ns {mtime} -> {new_mtime})")
    return lines


def _descends_from(pid: int, ancestor: int) -> bool:
    """Whether process ``pid`` is ``ancestor`` or was started under it."""
    try:
        parents = psutil.Process(pid).parents()
    except psutil.Error:  # gone, or not ours to read
        return False
    return pid == ancestor or any(parent.pid == ancestor for parent in parents)


def live_workflow_runs(root: str | os.PathLike) -> dict[str, str]:
    """{record: "pid N (`command` on results_dir)"} of the workflow runs of this host live now on the
    checkout at ``root`` (their records under ``results/*/state/runs`` and ``.snakemake/contrastlab-runs``),
    leaving out those started under this process: the suite's own."""
    root, suite, machine = Path(root), os.getpid(), this_machine()
    records = [*root.glob("results/state/runs/*.json"), *root.glob("results/*/state/runs/*.json")]
    for entry in root.glob(".snakemake/contrastlab-runs/*.json"):
        try:
            records.append(Path(json.loads(entry.read_text())["record"]))
        except (OSError, ValueError, KeyError, TypeError):
            continue
    found = {}
    for path in records:
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if _gone(record, machine) is False and not _descends_from(int(record["pid"]), suite):
            command = " ".join(map(str, record.get("command", [])))[:120]
            where = os.path.relpath(record["results_dir"], root) if record.get("results_dir") else "?"
            found[os.path.realpath(path)] = f"pid {record['pid']} (`{command}` on {where})"
    return found


def likely_cause(
    root: str | os.PathLike, touched: Iterable[str], runs: Mapping[str, str], since_ns: int
) -> str | None:
    """The line that names another run as the likely cause of the ``touched`` files (relative to ``root``),
    or ``None``: the workflow ``runs`` seen live during the session (:func:`live_workflow_runs`), the
    Snakemake logs written in the checkout since ``since_ns``, and the results folders (those holding a
    ``state/runs`` folder: a workflow run wrote them) that the touched files lie in."""
    root = Path(root)
    logs = [p for p in root.glob(".snakemake/log/*.log") if os.lstat(p).st_mtime_ns >= since_ns]
    folders = sorted(
        {
            str(parent)
            for path in touched
            for parent in Path(path).parents
            if (root / parent / "state" / "runs").is_dir()
        }
        - {"."}
    )
    seen = [f"a workflow run of this checkout was live ({', '.join(sorted(runs.values()))})"] if runs else []
    if logs:
        seen.append(f"Snakemake logged {len(logs)} run(s) in {root / '.snakemake' / 'log'}")
    if folders:
        seen.append(f"the files under {', '.join(folders)} lie in a workflow's results folder")
    if not seen:
        return None
    return (
        f"another run used this checkout's results/ or resources/ meanwhile: {'; '.join(seen)}. If that run "
        "was yours (make demo beside make test), run the suite again once it has ended; if not, a test "
        "wrote into the checkout"
    )


#: The audit events (``sys.addaudithook``) that read a file or list a folder; a bare ``stat`` is no read.
READ_EVENTS = frozenset({"open", "os.listdir", "os.scandir"})


class ReadGuard:
    """The files and folders under ``roots`` that a test opened or listed, noted by an audit hook
    (:meth:`hook`, installed once per process) between :meth:`start` and :meth:`stop`: the checkout's
    results/ after ``make demo`` must not change what a test sees: a test that looks for a file there
    and finds none would fail once it is there."""

    def __init__(self, roots: Iterable[str | os.PathLike]) -> None:
        folders = {os.path.abspath(r) for r in roots} | {os.path.realpath(r) for r in roots}
        self.roots = tuple(sorted(folder + os.sep for folder in folders))
        self.test: str | None = None
        self.reads: list[str] = []

    def start(self, test: str) -> None:
        self.test, self.reads = test, []

    def stop(self) -> list[str]:
        """The paths read since :meth:`start` (sorted, once each); stops noting."""
        self.test = None
        return sorted(set(self.reads))

    def hook(self, event: str, args: tuple) -> None:
        if self.test is None or event not in READ_EVENTS or not args:
            return
        path = args[0]
        if path is None or isinstance(path, int):  # a file descriptor: its opening was seen
            return
        try:
            path = os.path.abspath(os.fsdecode(path))
        except (TypeError, ValueError):
            return
        # a path looked for and not there is no read (config.yaml's plan asks for results/search's pins);
        # nor is a listing of results/ itself (it names the presets run, none of their numbers)
        if path.startswith(self.roots) and os.path.exists(path):
            self.reads.append(path)
