"""Issue 63 item 7 (P6, P9): a re-render of the tables and report that fails leaves the previous set in
place; a render cut short never replaces the kept set (contrastlab.workflow.previous_report)."""

from __future__ import annotations

import pytest

from contrastlab.workflow.previous_report import forget_previous, keep_previous, kept_dir, restore_previous


def _rendered(root, text):
    outputs = [root / "tables" / "t.csv", root / "tables" / "t.md", root / "report.md", root / "report.html"]
    for path in outputs:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{text} {path.name}")
    return outputs


@pytest.mark.fault(
    "disk full while the tables and report are re-rendered (Snakemake removed the outputs)",
    "the previous tables and report are back in place",
)
def test_a_failed_rerender_puts_the_previous_set_back(tmp_path, observed):
    outputs = _rendered(tmp_path, "old")
    assert keep_previous(tmp_path, outputs) is None  # onstart
    for path in outputs:  # Snakemake clears the job's outputs before it runs, and after it failed
        path.unlink()
    assert (kept_dir(tmp_path) / "report.html").read_text() == "old report.html"  # readable meanwhile
    note = restore_previous(tmp_path, outputs)  # onerror
    assert [path.read_text() for path in outputs] == [f"old {path.name}" for path in outputs]
    assert note and "previous 4 files are back" in note and not kept_dir(tmp_path).exists()
    observed(note.removeprefix("contrastlab note: "))


def test_a_render_cut_short_never_replaces_the_kept_set(tmp_path):
    outputs = _rendered(tmp_path, "old")
    keep_previous(tmp_path, outputs)
    for path in outputs:
        path.unlink()
    outputs[0].write_text("new t.csv")  # a killed render: one new table, no report
    assert keep_previous(tmp_path, outputs) is None  # the next run's onstart
    assert (kept_dir(tmp_path) / "tables" / "t.csv").read_text() == "old t.csv"
    # A run whose re-render succeeded (or never ran) keeps its outputs; success drops the kept set.
    outputs = _rendered(tmp_path, "new")
    assert restore_previous(tmp_path, outputs) is None and outputs[0].read_text() == "new t.csv"
    forget_previous(tmp_path)
    assert not kept_dir(tmp_path).exists()
