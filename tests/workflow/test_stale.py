"""A dry run names the finished cells trained by other code (another commit, a dirty tree) and reruns none
of them (issue 82 item 6; contrastlab.workflow.stale)."""

from __future__ import annotations

import json
from types import SimpleNamespace

from contrastlab.paths import REPO_ROOT, Results, write_text
from contrastlab.provenance import code_differs, git_head
from contrastlab.workflow.stale import stale_note, trained_by_other_code
from tests.e2e.conftest import demo_process

HEAD = "a" * 40


def _trained(results: Results, cell, sha: str | None, dirty: bool) -> None:
    log = results.checkpoint(cell, "train_log.jsonl")
    meta = {"git_sha": sha, "git_dirty": dirty}
    write_text(log, json.dumps({"event": "start", "meta": meta}) + "\n" + json.dumps({"step": 1}) + "\n")


def _cell(method: str) -> SimpleNamespace:
    return SimpleNamespace(experiment="nie2023", backbone="tiny-bert", method=method, seed=42)


def test_the_cells_trained_at_another_commit_or_from_a_dirty_tree_are_named(tmp_path):
    results = Results(tmp_path)
    cells = [_cell(m) for m in ("cl", "mpt", "dcl", "au", "met", "mat", "old", "none")]
    commits = [(HEAD, False), ("b" * 40, False), (HEAD, True), ("c" * 40, True), *[("d" * 40, False)] * 3]
    for cell, (sha, dirty) in zip(cells, [*commits, (None, None)], strict=True):
        _trained(results, cell, sha, dirty)
    found = trained_by_other_code(results, [*cells, _cell("untrained")], HEAD)
    assert found[:3] == [
        ("nie2023/tiny-bert/mpt/seed42", "at bbbbbbb"),
        ("nie2023/tiny-bert/dcl/seed42", "from a dirty tree at aaaaaaa"),
        ("nie2023/tiny-bert/au/seed42", "at ccccccc, dirty"),
    ]
    assert len(found) == 6 and stale_note([], HEAD) is None
    # a commit whose code is HEAD's (it changed the docs only) trained the same code: not named
    same = trained_by_other_code(results, cells, HEAD, code_differs=lambda sha: sha != "b" * 40)
    assert [path for path, _ in same] == [path for path, _ in found if "/mpt/" not in path]
    assert stale_note(found, HEAD) == (
        "contrastlab note: 6 finished cell(s) were trained by other code than this checkout's (aaaaaaa) and "
        "are kept, not rerun: nie2023/tiny-bert/mpt/seed42 (at bbbbbbb), nie2023/tiny-bert/dcl/seed42 (from "
        "a dirty tree at aaaaaaa), nie2023/tiny-bert/au/seed42 (at ccccccc, dirty), "
        "nie2023/tiny-bert/met/seed42 (at ddddddd), nie2023/tiny-bert/mat/seed42 (at ddddddd) and 1 more; "
        "to retrain one, remove its checkpoints/<cell> folder (or run its train_log.jsonl as the target with "
        "--forcerun train)"
    )


def test_a_dry_run_names_them(tmp_path):
    """Snakemake's dry run of the demo with one finished cell trained at another commit: the note names it
    (and the dry run finds that cell's target done)."""
    results = Results(tmp_path / "results")
    _trained(results, _cell("cl"), "b" * 40, False)
    target = results.checkpoint(_cell("cl"), "train_log.jsonl")
    done = demo_process(REPO_ROOT, tmp_path, "--", str(target), args=("-n",))
    notes = [line for line in done.stderr.splitlines() if line.startswith("contrastlab note: 1 finished")]
    assert notes == [
        "contrastlab note: 1 finished cell(s) were trained by other code than this checkout's "
        f"({(git_head() or 'unknown')[:7]}) and are kept, not rerun: nie2023/tiny-bert/cl/seed42 "
        "(at bbbbbbb); "
        "to retrain one, remove its checkpoints/<cell> folder (or run its train_log.jsonl as the target with "
        "--forcerun train)"
    ], done.stderr[-3000:]
    assert done.returncode == 0 and "Nothing to be done" in done.stdout + done.stderr


def test_the_code_of_head_is_heads_and_an_unknown_commit_differs():
    assert code_differs(git_head()) is False and code_differs("0" * 40) is True
