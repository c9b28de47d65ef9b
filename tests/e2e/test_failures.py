"""A failing job says one line naming the job (rule and cell), the error and the log; the traceback stays
in the job's log file."""

from __future__ import annotations

import functools
import json
import shutil
import subprocess
import sys
import textwrap

import pytest
import yaml

from contrastlab.paths import REPO_ROOT

from .conftest import demo_process, folders, one_line_failure, write
from .workflow_start import start_error

SCHEDULE_FIRST = 2  # a long module: tests/conftest.py starts the highest numbers first


def test_training_script_failure_is_one_line_naming_the_cell(tmp_path):
    log = tmp_path / "train.log"
    driver = textwrap.dedent(
        f"""
        import runpy
        from types import SimpleNamespace
        import yaml
        config = yaml.safe_load(open({str(REPO_ROOT / "config" / "demo.yaml")!r}))
        config["resources_dir"] = {str(tmp_path)!r}
        config["results_dir"] = {str(tmp_path / "results")!r}  # the failure record's home: never results/demo
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
                point=None,  # a configured cell, not a search point
            ),
            input=SimpleNamespace(backbone={str(tmp_path / "no-such-backbone")!r}),
            output=SimpleNamespace(
                model={str(tmp_path / "model")!r}, log_jsonl={str(tmp_path / "l.jsonl")!r}
            ),
        )
        runpy.run_path({str(REPO_ROOT / "scripts" / "train.py")!r}, init_globals={{"snakemake": sm}})
        """
    )
    # cwd: a relative path the driver missed would land in tmp_path, not in the checkout
    done = subprocess.run(
        [sys.executable, "-c", driver], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    line = one_line_failure(done)  # exit 1, one contrastlab: line, no traceback
    assert line.startswith("contrastlab: rule train nie2023/tiny-bert/cl/seed42: ")
    assert "no-such-backbone" in line and f"(log: {log})" in line
    assert "Traceback" in log.read_text()
    # the cell's failure record, under the config's results_dir (the test's own)
    record = tmp_path / "results" / "metrics" / "nie2023" / "tiny-bert" / "cl" / "seed42" / "failed.json"
    assert "no-such-backbone" in json.loads(record.read_text())["error"]


def test_bad_senteval_file_stops_the_workflow_with_one_line(repo_root, tmp_path, shared):
    """Through Snakemake, a user copy whose sts-dev.csv lost its last rows is named in one line before any
    job (the kinds of damage: test_damaged_senteval_copy_is_named_in_one_line, in process)."""
    data = tmp_path / "senteval"
    shutil.copytree(shared / "data" / "senteval", data)
    dev = data / "downstream" / "STS" / "STSBenchmark" / "sts-dev.csv"
    dev.write_text("".join(dev.read_text().splitlines(keepends=True)[:-5]))
    marker = f"{tmp_path}/results/state/data/senteval.ready.json"
    data_dir = f"data={{senteval_dir: {data}, fixture: false}}"
    done = demo_process(repo_root, tmp_path, data_dir, "--", marker, args=("--cores", "1"))
    out = done.stdout + done.stderr
    line = one_line_failure(done)  # exit 1, one contrastlab: line, no traceback
    assert line.startswith("contrastlab: data: SentEvalDataError: ") and "sts-dev.csv" in line, line
    assert "Select jobs to execute" not in out  # stopped while the workflow was read


@pytest.mark.fault(
    "corpus (data.wiki_path) with a latin-1 byte on line 100 (D1)", "one line naming file and line, no job"
)
def test_a_corpus_that_is_not_utf8_stops_the_workflow_before_any_job(repo_root, tmp_path, observed):
    """The corpus is checked while the main process hashes it, so a bad byte stops a dry run already, in
    the output's last line."""
    corpus = tmp_path / "wiki.txt"
    corpus.write_bytes(
        b"".join(b"caf\xe9 .\n" if i == 100 else b"sentence %d .\n" % i for i in range(1, 300))
    )
    done = demo_process(repo_root, tmp_path, f"data={{wiki_path: {corpus}}}", args=("-n",))
    line = one_line_failure(done)
    assert line.startswith(
        f"contrastlab: data: CorpusError: data.wiki_path {corpus} is not UTF-8: line 100 "
    ), line
    assert [x for x in done.stderr.splitlines() if x.strip()][-1] == line
    observed(line[line.index("is not") :][:90])


def _drop_last_sentence_characters(path):
    text = path.read_bytes()
    path.write_bytes(text[: text.rstrip(b"\n").rfind(b" ")] + b"\n")


SENTEVAL_FAULTS = {
    # name: (file under downstream/, how it is damaged)
    "missing": ("MR/rt-polarity.pos", lambda p: p.unlink()),
    "empty": ("SUBJ/subj.objective", lambda p: p.write_bytes(b"")),
    "short": ("STS/STSBenchmark/sts-test.csv", _drop_last_sentence_characters),
    "one byte": ("SICK/SICK_test_annotated.txt", lambda p: p.write_bytes(p.read_bytes()[:-2] + b"#\n")),
    "non-UTF-8": ("CR/custrev.pos", lambda p: p.write_bytes(p.read_bytes().replace(b"e", b"\xe9", 1))),
}


@pytest.mark.fault(
    "SentEval file damaged in the user's copy", "one line naming the file, exit 1, no job runs"
)
@pytest.mark.parametrize("damage", list(SENTEVAL_FAULTS))
def test_damaged_senteval_copy_is_named_in_one_line(tmp_path, shared, damage, observed):
    """Each kind of damage to a user's SentEval copy stops the reading of the Snakefile with one line
    naming the damaged file (checked in this process, as rules/common.smk checks it)."""
    relative, harm = SENTEVAL_FAULTS[damage]
    data = tmp_path / "senteval"
    shutil.copytree(shared / "data" / "senteval", data)
    harm(data / "downstream" / relative)
    data_dir = f"data={{senteval_dir: {data}, fixture: false}}"
    line = start_error(REPO_ROOT / "config" / "demo.yaml", *folders(tmp_path), data_dir)
    assert line is not None and line.startswith("contrastlab: data: "), line
    assert "\n" not in line and relative.rsplit("/", 1)[-1] in line, line
    observed(line[line.index("downstream/") :][:110])


CONFIG_FAULTS = {
    # name: (--config override or a change to the demo file, text the one line must contain)
    "seed as text": (["seeds=[forty-two]"], "seeds[0]"),
    "unknown top-level key": (["sedes=[1]"], "unknown key (typo?)"),
    "negative batch size": (["training={batch_size: -4}"], "training.batch_size"),
    "lr as a word": (["training={lr: fast}"], "training.lr"),
    "unknown precision": (["precision_override=fp8"], "precision_override"),
    "unknown evaluation mode": (["evaluation={mode: quick}"], "evaluation.mode"),
    "unknown experiment in select": (["select={experiments: [nie]}"], "nie2023"),
    "unknown method in select": (["select={methods: [mptt]}"], "select.methods: unknown method 'mptt'"),
    "file: unknown loss": ({"experiments.nie2023.methods.cl.loss": "infonse"}, "infonse"),
    "file: unknown backbone": ({"experiments.li2024.backbones": ["bert-tiny"]}, "bert-tiny"),
    "file: hp of another loss": ({"experiments.nie2023.methods.cl.hp": {"m": 0.2}}, "cl"),
    "file: threads as text": ({"resources.threads": "two"}, "resources.threads"),
}


@pytest.mark.fault("config error", "one contrastlab: line naming the key, exit 1, no traceback")
@pytest.mark.parametrize("fault", list(CONFIG_FAULTS))
def test_config_errors_are_one_line(tmp_path, fault, observed):
    """Each config error, in the file or on the command line, stops the reading of the Snakefile with one
    line naming the key (checked in this process on the config Snakemake builds)."""
    change, expected = CONFIG_FAULTS[fault]
    config = yaml.safe_load((REPO_ROOT / "config" / "demo.yaml").read_text())
    config["results_dir"] = str(tmp_path / "results")
    overrides = []
    if isinstance(change, dict):
        for dotted, value in change.items():
            *parents, last = dotted.split(".")
            functools.reduce(dict.__getitem__, parents, config)[last] = value
    else:
        overrides = change
    line = start_error(write(config, tmp_path / "config.yaml"), *overrides)
    assert line is not None and line.startswith("contrastlab: config key "), line
    assert "\n" not in line and expected in line, line
    observed(line[:140])


def test_a_local_run_asking_cuda_graph_on_the_cpu_stops_before_any_job(repo_root, tmp_path):
    """In the train job the error came after Snakemake had removed the cell's finished checkpoint."""
    asked = ("experiments={macl: {training: {cuda_graph: true}}}", "select={experiments: [macl]}")
    assert demo_process(repo_root, tmp_path, *asked, args=("-n", "--cores", "1")).returncode == 0  # plans
    line = one_line_failure(demo_process(repo_root, tmp_path, *asked, args=("--cores", "1")))
    assert "rule train macl/tiny-bert/macl/seed42 asks for cuda_graph: true" in line, line
    assert not (tmp_path / "results" / "logs").exists()  # no job ran
