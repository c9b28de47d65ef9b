"""One results folder under two names while a run is live (``results/b -> a``): the live run's record
and its claim on the folder's real path stop a second run before it plans anything."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import textwrap

import pytest

from contrastlab.workflow.recovery import runs_folder
from tests.workflow.helpers import results_under_two_names

from .conftest import one_line_failure, snakemake_process, succeeded


@pytest.mark.fault(
    "a live run's record on results/a; `snakemake -n` on results/b, a symlink to a (C3)",
    "refused in one line naming its pid and command, before planning; once that run is gone, it plans",
)
def test_a_run_on_another_name_of_a_live_runs_folder_is_refused(repo_root, tmp_path, observed):
    real, link = results_under_two_names(tmp_path)
    code = textwrap.dedent(
        f"""
        import time
        from contrastlab.workflow.recovery import claim_results_folder, record_running_workflow
        assert claim_results_folder({str(real)!r}) is None  # a run's first step on its folder (R4)
        record_running_workflow({str(real)!r})
        print("recorded", flush=True)
        time.sleep(300)
        """
    )
    live = subprocess.Popen([sys.executable, "-c", code], cwd=tmp_path, stdout=subprocess.PIPE, text=True)
    args = ["-n", "--cores", "1", "--configfile", "config/demo.yaml", "--config", f"results_dir={link}"]
    args.append(f"resources_dir={tmp_path / 'resources'}")
    try:
        assert live.stdout.readline() == "recorded\n"
        (record,) = runs_folder(real).glob("*.json")
        command = shlex.join(json.loads(record.read_text())["command"])
        refused = snakemake_process(repo_root, *args)
        line = one_line_failure(refused)
        assert line == (
            f"contrastlab: {link} is in use by another run on this host (pid {live.pid}, started as "
            f"`{command}` on {real}); wait for it to end or stop it (kill {live.pid}), then run this command "
            "again"
        )
        assert "Job stats" not in refused.stdout + refused.stderr and record.is_file(), refused.stderr[-3000:]
        observed(line)
    finally:
        live.kill()
        live.wait()

    # the run is gone: its record is recovered as before
    output = succeeded(snakemake_process(repo_root, *args))
    assert "Job stats" in output, output[-3000:]
    assert f"contrastlab: a run on {link} (pid {live.pid}) was killed; removed its 0 stale" in output
    assert not record.exists()
