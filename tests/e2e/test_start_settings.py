"""Settings outside the config that a run reads as it starts, through Snakemake itself (dry runs of the demo
preset): ``CONTRASTLAB_IMAGE`` matters to ``--sdm apptainer`` runs only, and an artifacts lock of the wrong
shape stops the run in one line naming the file (docs/reliability.md M4, M5)."""

from __future__ import annotations

import json

import pytest

from .conftest import demo_process, one_line_failure, said, succeeded

HOSTILE_IMAGE = "garbage image; $(touch {})"
DRY_RUN = ("-n", "--cores", "1")


@pytest.mark.fault(
    "CONTRASTLAB_IMAGE='garbage image; $(touch …)' (M4)",
    "a local run ignores it; --sdm apptainer stops in one line naming CONTRASTLAB_IMAGE; nothing runs",
)
def test_a_hostile_image_variable_stops_only_an_apptainer_run_in_one_line(
    repo_root, tmp_path, monkeypatch, observed
):
    image = HOSTILE_IMAGE.format(tmp_path / "PWN")
    monkeypatch.setenv("CONTRASTLAB_IMAGE", image)
    out = succeeded(demo_process(repo_root, tmp_path, args=DRY_RUN))
    assert said(out) == [] and "Invalid singularity image" not in out and "train " in out, out[-3000:]
    line = one_line_failure(demo_process(repo_root, tmp_path, args=(*DRY_RUN, "--sdm", "apptainer")))
    observed(line)
    assert line == (
        f"contrastlab: CONTRASTLAB_IMAGE={image!r} is not an image address (it holds whitespace); set it "
        "to a docker:// address or an image file (docs/cluster.md), or unset it for contrastlab's own image"
    )
    assert not (tmp_path / "PWN").exists()


@pytest.mark.fault(
    "artifacts lock of the wrong shape ({'format': 1, 'data': {'senteval.tar': 'x'}}) or a folder (M5)",
    "one contrastlab: line naming the file: not an artifacts lock of format 1, move it aside",
)
@pytest.mark.parametrize("shape", ["entry", "folder"])
def test_an_artifacts_lock_of_the_wrong_shape_stops_the_run_in_one_line(repo_root, tmp_path, shape, observed):
    lock = tmp_path / "badlock3.json"
    if shape == "folder":
        lock.mkdir()
        expected = f"{lock} is a folder, not an artifacts lock of format 1"
    else:
        lock.write_text(json.dumps({"format": 1, "data": {"senteval.tar": "x"}}))
        expected = (
            f"{lock} is not an artifacts lock of format 1 (its data entry 'senteval.tar' is not a mapping)"
        )
    done = demo_process(repo_root, tmp_path, f"artifacts_lock={lock}", args=DRY_RUN)
    line = one_line_failure(done)
    observed(line)
    assert line == f"contrastlab: {expected}; move it aside and run again to write one"
    assert "Error in file" not in done.stdout + done.stderr
