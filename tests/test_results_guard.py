"""The guard that keeps the suite off the checkout's results/ and resources/ (tests/results_guard.py; run
once per session by tests/conftest.py), on folders of its own."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from results_guard import ReadGuard, changed_paths, changes, likely_cause, live_workflow_runs, snapshot


def test_a_created_a_changed_and_a_deleted_file_are_each_named(tmp_path):
    results, resources = tmp_path / "results", tmp_path / "resources"
    cell = results / "demo" / "metrics" / "nie2023" / "tiny-bert" / "cl" / "seed42"
    cell.mkdir(parents=True)
    (cell / "metrics.json").write_text('{"stsb": 0.5}')
    (cell / "old.json").write_text("{}")
    before = snapshot([results, resources], tmp_path)  # resources/ absent: nothing there
    where = "results/demo/metrics/nie2023/tiny-bert/cl/seed42"
    assert set(before) == {f"{where}/metrics.json", f"{where}/old.json"}

    (cell / "failed.json").write_text('{"error": "..."}')  # what test_failures.py used to leave
    (cell / "metrics.json").write_text('{"stsb": 0.25}')
    (cell / "old.json").unlink()
    (resources / "models").mkdir(parents=True)
    (resources / "models" / "config.json").write_text("{}")
    lines = changes(before, snapshot([results, resources], tmp_path))

    assert [line.split(" (")[0] for line in lines] == [  # sorted by path
        "created resources/models/config.json",
        f"created {where}/failed.json",
        f"changed {where}/metrics.json",
        f"deleted {where}/old.json",
    ]


def test_a_file_rewritten_with_the_same_size_is_changed_and_an_untouched_tree_is_quiet(tmp_path):
    (tmp_path / "results").mkdir()
    path = tmp_path / "results" / "table.csv"
    path.write_text("a,b\n")
    before = snapshot([tmp_path / "results"], tmp_path)
    assert changes(before, snapshot([tmp_path / "results"], tmp_path)) == []
    (tmp_path / "results" / "empty-folder").mkdir()  # folders are not files: nothing a table reads
    assert changes(before, snapshot([tmp_path / "results"], tmp_path)) == []

    os.utime(path, ns=(before["results/table.csv"][1] + 10**9,) * 2)  # same bytes, written again
    assert changes(before, snapshot([tmp_path / "results"], tmp_path))[0].startswith(
        "changed results/table.csv"
    )


def test_a_link_is_itself_not_what_it_points_to(tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "big.bin").write_text("x")
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "linked").symlink_to(outside, target_is_directory=True)
    assert snapshot([tmp_path / "results"], tmp_path) == {}  # a linked folder is not descended


def _finished_demo(root):
    """A checkout whose results/demo a workflow run wrote (its runs folder) and whose resources hold data."""
    (root / "results" / "demo" / "state" / "runs").mkdir(parents=True)
    (root / "results" / "demo" / "metrics.json").write_text("{}")
    (root / "resources" / "data").mkdir(parents=True)
    (root / "resources" / "data" / "corpus.txt").write_text("a\n")
    return snapshot([root / "results", root / "resources"], root)


def _run_outside_the_suite(root, results):
    """A process that records itself as a workflow run on ``results`` from the checkout ``root`` and lives
    on, started as a daemon (forked twice) so that it descends from no process of the suite, as a
    ``make demo`` in another terminal; returns its pid."""
    code = textwrap.dedent(
        f"""
        import os, sys, time
        if os.fork():
            sys.exit(0)
        os.setsid()
        from contrastlab.workflow.recovery import record_running_workflow
        record_running_workflow({str(results)!r}, [], {str(root)!r})
        print(os.getpid(), flush=True)
        os.close(1)
        os.close(2)  # the caller reads both to their end
        time.sleep(120)
        """
    )
    done = subprocess.run([sys.executable, "-c", code, "demo"], capture_output=True, text=True, check=True)
    return int(done.stdout)


@pytest.mark.fault(
    "a workflow run on the checkout's results/demo (make demo) live beside the suite (C4)",
    "the guard still fails, and names that run (pid, command, folder) as the likely cause",
)
def test_a_workflow_run_beside_the_suite_is_named_as_the_likely_cause(tmp_path, observed):
    before = _finished_demo(tmp_path)
    since = time.time_ns()
    pid = _run_outside_the_suite(tmp_path, tmp_path / "results" / "demo")
    try:
        runs = live_workflow_runs(tmp_path)
        (tmp_path / "results" / "demo" / "metrics.json").write_text('{"stsb": 1}')  # what the run writes
        (tmp_path / "resources" / "data" / "corpus.txt").write_text("b\n")
        after = snapshot([tmp_path / "results", tmp_path / "resources"], tmp_path)
        touched = changed_paths(before, after)
        assert [p for p in touched if "state" not in p] == [
            "resources/data/corpus.txt",
            "results/demo/metrics.json",
        ]
        cause = likely_cause(tmp_path, touched, runs, since)
    finally:
        os.kill(pid, signal.SIGKILL)

    assert list(runs.values()) == [f"pid {pid} (`-c demo` on results/demo)"]
    assert cause == (
        f"another run used this checkout's results/ or resources/ meanwhile: a workflow run of this checkout "
        f"was live (pid {pid} (`-c demo` on results/demo)); the files under results/demo lie in a workflow's "
        "results folder. If that run was yours (make demo beside make test), run the suite again once it has "
        "ended; if not, a test wrote into the checkout"
    )
    observed(cause[:150])


def test_a_test_that_writes_into_the_checkout_is_caught_with_no_run_to_blame(tmp_path):
    before = _finished_demo(tmp_path)
    since = time.time_ns()
    (tmp_path / "resources" / "data" / "corpus.txt").write_text("b\n")  # a test writing into resources/
    touched = changed_paths(before, snapshot([tmp_path / "results", tmp_path / "resources"], tmp_path))
    assert touched == ["resources/data/corpus.txt"]
    # A workflow run the suite started itself (a child of this process) is no other run.
    code = textwrap.dedent(
        f"""
        import time
        from contrastlab.workflow.recovery import record_running_workflow
        record_running_workflow({str(tmp_path / "results" / "demo")!r}, [], {str(tmp_path)!r})
        print("recorded", flush=True)
        time.sleep(120)
        """
    )
    suites_own = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert suites_own.stdout.readline() == "recorded\n"
        assert live_workflow_runs(tmp_path) == {}
    finally:
        suites_own.kill()
        suites_own.wait()
    assert likely_cause(tmp_path, touched, {}, since) is None
    (tmp_path / ".snakemake" / "log").mkdir(parents=True)
    (tmp_path / ".snakemake" / "log" / "2026-01-01T000000.000000.snakemake.log").write_text("")
    assert likely_cause(tmp_path, touched, {}, since) == (
        "another run used this checkout's results/ or resources/ meanwhile: Snakemake logged 1 run(s) in "
        f"{tmp_path / '.snakemake' / 'log'}. If that run was yours (make demo beside make test), run the "
        "suite again once it has ended; if not, a test wrote into the checkout"
    )


def test_a_read_or_a_listing_under_the_guarded_folders_is_noted_and_a_stat_is_not(tmp_path):
    """tests/conftest.py fails a test that opens or lists a path under the checkout's results/ or
    resources/; what lies elsewhere, and a bare existence check, are not reads."""
    results = tmp_path / "results"
    figure = results / "demo" / "figures" / "li2024" / "li2024_fig8b.csv"
    figure.parent.mkdir(parents=True)
    figure.write_text("method,value\n")
    elsewhere = tmp_path / "elsewhere.csv"
    elsewhere.write_text("method,value\n")
    guard = ReadGuard([results])
    sys.addaudithook(guard.hook)  # inert once stopped (an audit hook stays for the process)
    figure.read_text(), elsewhere.read_text(), figure.is_file()
    assert guard.reads == []  # not started: nothing noted
    guard.start("test")
    assert figure.is_file() and elsewhere.read_text()
    assert guard.stop() == []
    guard.start("test")
    figure.read_text()
    os.listdir(results / "demo")
    (results / "missing.json").exists(), (results / "nowhere").is_dir()
    with contextlib.suppress(FileNotFoundError):
        (results / "missing.json").read_text()  # looked for and not there: the test fails once it is
    assert guard.stop() == sorted([str(figure), str(results / "demo")])
