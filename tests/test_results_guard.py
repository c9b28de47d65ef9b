"""The guard that keeps the suite off the checkout's results/ and resources/ (tests/results_guard.py; run
once per session by tests/conftest.py), on folders of its own."""

from __future__ import annotations

import os

from results_guard import changes, snapshot


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
