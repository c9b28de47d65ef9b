"""The one atomic write (contrastlab.paths): a file or a folder is replaced whole or not at all."""

from __future__ import annotations

import os

import pytest

from contrastlab.paths import atomic_dir, atomic_write


def test_atomic_dir_replaces_the_folder_whole(tmp_path):
    target = tmp_path / "model"
    (target / "old").mkdir(parents=True)
    with atomic_dir(target) as tmp:
        assert tmp.parent == tmp_path and tmp.name == f".model.{os.getpid()}.partial" and not tmp.exists()
        (tmp / "sub").mkdir(parents=True)
        (tmp / "sub" / "weights").write_text("new")
        assert not (target / "sub").exists()  # nothing is visible before the block ends
    assert sorted(p.name for p in target.iterdir()) == ["sub"]
    assert (target / "sub" / "weights").read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]


def test_atomic_dir_keeps_the_old_folder_when_the_write_fails(tmp_path):
    target = tmp_path / "model"
    target.mkdir()
    (target / "weights").write_text("old")
    with pytest.raises(OSError, match="No space left"), atomic_dir(target, fsync=True) as tmp:
        tmp.mkdir()
        (tmp / "weights").write_text("half")
        raise OSError(28, "No space left on device")
    assert (target / "weights").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]  # no leftover


def test_a_file_and_a_folder_use_one_temporary_name(tmp_path):
    with atomic_write(tmp_path / "a.json") as file_tmp, atomic_dir(tmp_path / "b") as dir_tmp:
        file_tmp.write_text("{}")
        dir_tmp.mkdir()
    assert (file_tmp.name, dir_tmp.name) == (f".a.json.{os.getpid()}.partial", f".b.{os.getpid()}.partial")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json", "b"]
