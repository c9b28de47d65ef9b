"""Settings outside the config that a run reads as it starts, through Snakemake itself (dry runs of the demo
preset): ``CONTRASTLAB_IMAGE`` matters to ``--sdm apptainer`` runs only, and an artifacts lock of the wrong
shape stops the run in one line naming the file (docs/reliability.md M4, M5)."""

from __future__ import annotations

import json

import pytest

from .test_dryrun import demo_process, said

HOSTILE_IMAGE = "garbage image; $(touch {})"


def _dry_run(repo_root, tmp_path, *config: str, sdm: tuple[str, ...] = ()):
    """:func:`demo_process` (a dry run): the exit status, the output and its ``contrastlab:`` lines."""
    done = demo_process(repo_root, tmp_path, *config, args=("-n", "--cores", "1", *sdm))
    out = done.stdout + done.stderr
    return done.returncode, out, said(out)


@pytest.mark.fault(
    "CONTRASTLAB_IMAGE='garbage image; $(touch …)' (M4)",
    "a local run ignores it; --sdm apptainer stops in one line naming CONTRASTLAB_IMAGE; nothing runs",
)
def test_a_hostile_image_variable_stops_only_an_apptainer_run_in_one_line(
    repo_root, tmp_path, monkeypatch, observed
):
    image = HOSTILE_IMAGE.format(tmp_path / "PWN")
    monkeypatch.setenv("CONTRASTLAB_IMAGE", image)
    status, out, said = _dry_run(repo_root, tmp_path)
    assert (status, said) == (0, []), out[-3000:]
    assert "Invalid singularity image" not in out and "train " in out
    status, out, said = _dry_run(repo_root, tmp_path, sdm=("--sdm", "apptainer"))
    observed(said[0] if said else out.strip().splitlines()[-1])
    assert said == [
        f"contrastlab: CONTRASTLAB_IMAGE={image!r} is not an image address (it holds whitespace); set it "
        "to a docker:// address or an image file (docs/cluster.md), or unset it for contrastlab's own image"
    ], out[-3000:]
    assert status == 1 and "Traceback" not in out
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
    status, out, said = _dry_run(repo_root, tmp_path, f"artifacts_lock={lock}")
    observed(said[0] if said else out.strip().splitlines()[-1])
    assert said == [f"contrastlab: {expected}; move it aside and run again to write one"], out[-3000:]
    assert status == 1 and "Traceback" not in out and "Error in file" not in out
