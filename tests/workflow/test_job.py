"""contrastlab.workflow.job without Snakemake: a job's label in one-line errors, where its failure record
lies, which failures a retry cannot help, and its TensorBoard folder."""

from __future__ import annotations

import builtins
import errno
import json
import signal
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from contrastlab.workflow.failures import failure_lines
from contrastlab.workflow.job import events_dir_of, failure_record, is_deterministic_failure, job_label


@pytest.mark.parametrize(
    ("error", "deterministic"),
    [
        (FloatingPointError("loss is nan"), True),
        (MemoryError(), True),
        (ValueError("bad setting"), True),
        (OSError("node lost"), False),
        (RuntimeError("CUDA error: an illegal memory access"), False),
    ],
)
def test_only_failures_a_retry_reproduces_are_deterministic(error, deterministic):
    assert is_deterministic_failure(error) is deterministic


OTHER_CELL = {"experiment": "nie2023", "backbone": "bert-base", "method": "mpt", "seed": "42"}


def job(rule: str, wildcards: dict) -> SimpleNamespace:
    """A job of ``rule`` with ``wildcards``, as Snakemake hands it to a script."""
    return SimpleNamespace(rule=rule, wildcards=wildcards, config={"results_dir": "results/demo"})


def test_a_cells_job_is_labelled_and_records_its_failure_where_its_metrics_lie():
    train = job("train", OTHER_CELL)
    assert job_label(train) == "rule train nie2023/bert-base/mpt/seed42"
    assert failure_record(train) == Path("results/demo/metrics/nie2023/bert-base/mpt/seed42/failed.json")
    # a config without results_dir: the relative default, i.e. the working directory's results/
    assert failure_record(SimpleNamespace(wildcards=OTHER_CELL, config={})) == Path(
        "results/metrics/nie2023/bert-base/mpt/seed42/failed.json"
    )
    # Snakemake's wildcards: attributes too
    train.wildcards = SimpleNamespace(**OTHER_CELL, items=OTHER_CELL.items)
    assert events_dir_of(train) == Path("results/demo/tensorboard/nie2023/bert-base/mpt/seed42")


def test_a_job_of_no_cell_is_labelled_by_its_wildcards_and_records_no_failure():
    select = job(
        "search_select", {"experiment": "nie2023", "backbone": "bert-base", "method": "mpt", "stage": "2"}
    )
    assert job_label(select) == "rule search_select nie2023/bert-base/mpt/2"
    assert failure_record(select) is None
    assert failure_record(job("encode_pretrained", {"backbone": "b"})) is None
    assert job_label(job("tables", {})) == "rule tables"


# --- Issue 63: a full disk named whichever library hit it (P7); the line when the log cannot be opened
# (P9); the log ends with the line, which the workflow prints again at its very end (item 7) -------------

ENFORCE = "[enforce fail at inline_container.cc:672] . unexpected pos 25984 vs 25878"


def _disk_full() -> RuntimeError:
    """torch's error on a full disk: a RuntimeError whose chained cause is the OSError (ENOSPC)."""
    try:
        try:
            raise OSError(errno.ENOSPC, "No space left on device")
        except OSError as cause:
            raise RuntimeError(ENFORCE) from cause
    except RuntimeError as error:
        return error


def _fail_in_job(tmp_path, error, capsys):
    from contrastlab.workflow.job import logged_to

    log = tmp_path / "results" / "logs" / "train" / "cell.log"
    record = tmp_path / "results" / "metrics" / "failed.json"
    with pytest.raises(SystemExit) as stop:
        with logged_to(log, "rule train nie2023/tiny-bert/cl/seed42", failure_record=record, run="r1"):
            raise error
    assert stop.value.code == 1
    return capsys.readouterr().err.strip().splitlines(), log, record


@pytest.mark.fault(
    "full disk under torch's save (RuntimeError chained from ENOSPC)", "'no space left on <folder>'"
)
def test_a_full_disk_is_named_whichever_library_hit_it(tmp_path, capsys, observed):
    lines, log, record = _fail_in_job(tmp_path, _disk_full(), capsys)
    assert len(lines) == 1, lines
    assert lines[0].startswith(
        f"contrastlab: rule train nie2023/tiny-bert/cl/seed42: no space left on {tmp_path / 'results'}; "
    ), lines[0]
    assert "free space there" in lines[0] and lines[0].endswith(f"(log: {log})"), lines[0]
    # A retry without freeing space fails the same way: the SLURM retry stops at once.
    assert json.loads(record.read_text())["retry_can_help"] is False
    assert is_deterministic_failure(_disk_full()) and not is_deterministic_failure(RuntimeError(ENFORCE))
    observed(lines[0].split(": ", 2)[2][:90])


@pytest.mark.fault("the job's log cannot be opened (disk full)", "the one contrastlab: line still, exit 1")
def test_the_line_is_printed_when_the_log_cannot_be_opened(tmp_path, capsys, monkeypatch, observed):
    from contrastlab.workflow.job import logged_to

    log = tmp_path / "results" / "logs" / "tables.log"
    real_open = builtins.open

    def full_disk_open(file, *args, **kwargs):
        if str(file) == str(log):
            raise OSError(errno.ENOSPC, "No space left on device", str(log))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", full_disk_open)
    ran = []
    with pytest.raises(SystemExit) as stop:
        with logged_to(log, "rule tables"):
            ran.append(True)
    assert stop.value.code == 1 and not ran
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith(f"contrastlab: rule tables: no space left on {log.parent}; "), lines[0]
    assert f"{log}" in lines[0]
    observed(lines[0][:100])


@pytest.mark.fault("a job fails", "its log ends with the contrastlab: line the workflow prints last")
def test_the_log_ends_with_the_line_and_the_workflow_reads_it_back(tmp_path, capsys, observed):
    lines, log, _ = _fail_in_job(tmp_path, ValueError("tau must be > 0"), capsys)
    text = log.read_text()
    assert "Traceback" in text and text.rstrip("\n").splitlines()[-1] == lines[0], text
    job = SimpleNamespace(
        rule=SimpleNamespace(name="train"),
        wildcards={"experiment": "nie2023", "backbone": "tiny-bert", "method": "cl", "seed": "42"},
        log=[str(log)],
    )
    silent = SimpleNamespace(
        rule=SimpleNamespace(name="tables"), wildcards={}, log=[str(tmp_path / "none.log")]
    )
    found = failure_lines([job, silent])
    assert found[0] == lines[0], found
    assert found[1] == (
        f"contrastlab: rule tables failed without a contrastlab: line; see its output above (a job killed, "
        f"e.g. out of memory, resumes when the same command runs again) (log: {tmp_path / 'none.log'})"
    ), found
    observed(found[0][:100])


def test_a_job_stopped_by_ctrl_c_prints_one_line_and_keeps_its_traceback_in_its_log(tmp_path):
    """Ctrl-C reaches every running job: each says so in one line (its traceback in its log, not on the
    terminal among Snakemake's lines) and still ends killed by SIGINT, as an interrupted Python does."""
    log = tmp_path / "tables.log"
    script = (
        "import sys\nfrom contrastlab.workflow.job import logged_to\n"
        "with logged_to(sys.argv[1], 'rule tables'):\n    raise KeyboardInterrupt"
    )
    command = [sys.executable, "-c", script, str(log)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert done.returncode == -signal.SIGINT, done
    line = f"contrastlab: rule tables: interrupted; run the same command again to go on (log: {log})"
    assert done.stderr.splitlines() == [line], done.stderr
    text = log.read_text()
    assert "KeyboardInterrupt" in text and text.rstrip("\n").splitlines()[-1] == line, text
