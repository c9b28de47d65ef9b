"""A failing job says one line naming the job (rule and cell), the error and the log; the traceback stays
in the job's log file (issue 10 item 4)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap

from contrastlab.paths import REPO_ROOT

from .test_dryrun import snakemake_process


def _contrastlab_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("contrastlab:")]


def test_training_script_failure_is_one_line_naming_the_cell(tmp_path):
    log = tmp_path / "train.log"
    driver = textwrap.dedent(
        f"""
        import runpy
        from types import SimpleNamespace
        import yaml
        config = yaml.safe_load(open({str(REPO_ROOT / "config" / "demo.yaml")!r}))
        config["resources_dir"] = {str(tmp_path)!r}
        config["data"].update(senteval_dir={str(tmp_path)!r}, wiki_path={str(tmp_path / "corpus.txt")!r})
        sm = SimpleNamespace(
            config=config,
            rule="train",
            wildcards={{"experiment": "nie2023", "backbone": "tiny-bert", "method": "cl", "seed": "42"}},
            log=[{str(log)!r}],
            threads=1,
            params=SimpleNamespace(
                settings={{"loss": "infonce", "max_steps": 2}},
                state_dir={str(tmp_path / "state")!r},
            ),
            input=SimpleNamespace(backbone={str(tmp_path / "no-such-backbone")!r}),
            output=SimpleNamespace(
                model={str(tmp_path / "model")!r}, log_jsonl={str(tmp_path / "l.jsonl")!r}
            ),
        )
        runpy.run_path({str(REPO_ROOT / "scripts" / "train.py")!r}, init_globals={{"snakemake": sm}})
        """
    )
    done = subprocess.run([sys.executable, "-c", driver], capture_output=True, text=True, timeout=300)
    assert done.returncode == 1
    lines = _contrastlab_lines(done.stderr)
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("contrastlab: rule train nie2023/tiny-bert/cl/seed42: ")
    assert "no-such-backbone" in lines[0] and f"(log: {log})" in lines[0]
    assert "Traceback" not in done.stderr and "Traceback" in log.read_text()


def test_bad_senteval_file_stops_the_workflow_with_one_line(tmp_path, shared):
    """A user copy whose sts-dev.csv lost its last rows: named once, before any job runs (a failing data
    job would delete the data marker and cost every finished cell)."""
    data = tmp_path / "senteval"
    shutil.copytree(shared / "data" / "senteval", data)
    dev = data / "downstream" / "STS" / "STSBenchmark" / "sts-dev.csv"
    dev.write_text("".join(dev.read_text().splitlines(keepends=True)[:-5]))
    done = snakemake_process(
        REPO_ROOT,
        "--cores",
        "1",
        "--configfile",
        "config/demo.yaml",
        "--config",
        f"results_dir={tmp_path}/results",
        f"resources_dir={tmp_path}/resources",
        f"data={{senteval_dir: {data}, fixture: false}}",
        "--",
        f"{tmp_path}/results/state/data/senteval.ready.json",
    )
    out = done.stdout + done.stderr
    assert done.returncode != 0
    lines = _contrastlab_lines(out)
    assert len(lines) == 1, out[-3000:]
    assert lines[0].startswith("contrastlab: data: SentEvalDataError: ") and "sts-dev.csv" in lines[0], lines
    assert "Select jobs to execute" not in out  # stopped while the workflow was read
    assert "Traceback" not in out
