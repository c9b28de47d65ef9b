"""The DVC commands a DVC user types first (repro, exp run -S, metrics and plots show; make freeze, a
clone, dvc pull and make restore), on a reduced demo in a repository of its own with a local-folder
remote. One Snakemake run serves every test; the tests that change the repository come last."""

from __future__ import annotations

import csv
import io
import json
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from contrastlab.versioning import FREEZE_RECORD, pending_jobs
from tests.make_command import make_command, make_env

from .conftest import OFFLINE, said

SCHEDULE_FIRST = 11  # a long module: tests/conftest.py starts the highest numbers first

CONFIG = "config/demo.yaml"  # the preset of stage reproduce@demo, cut down in the module's repository
RESULTS = "results/demo"
STAGE = "reproduce@demo"
SUMMARY = "summary/demo.json"


def _env() -> dict[str, str]:
    return dict(make_env(), **OFFLINE, DVC_NO_ANALYTICS="1")


def run(cwd: Path, *command: str, ok: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(command, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=600)
    if ok:
        assert done.returncode == 0, f"{' '.join(command)}:\n{(done.stdout + done.stderr)[-4000:]}"
    return done


def dvc(cwd: Path, *args: str, ok: bool = True) -> subprocess.CompletedProcess:
    return run(cwd, ".venv/bin/dvc", *args, ok=ok)


def git(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return run(cwd, "git", "-c", "user.email=test@contrastlab", "-c", "user.name=test", *args)


def make(cwd: Path, target: str, config: str, ok: bool = True) -> subprocess.CompletedProcess:
    return run(cwd, *make_command("-s", target, f"CONFIG={config}"), ok=ok)


def link_venv(repo: Path) -> None:
    """``repo/.venv`` -> this interpreter's environment, so the README's ``.venv/bin/...`` commands run."""
    (repo / ".venv").symlink_to(sys.prefix, target_is_directory=True)
    # a symlink: .gitignore's ".venv/" names a folder only
    with open(repo / ".git" / "info" / "exclude", "a") as handle:
        handle.write(".venv\n")


@pytest.fixture(scope="module")
def tools():
    """git, make and DVC (the venv's), or a skip saying which is missing."""
    for tool in ("git", "make"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed")
    done = subprocess.run(
        [sys.executable, "-m", "dvc", "version"], capture_output=True, text=True, env=_env()
    )
    if done.returncode != 0:
        pytest.skip(f"dvc cannot run in this environment: {(done.stdout + done.stderr).strip()[-200:]}")


def tracked_copy(repo_root: Path, dest: Path) -> Path:
    """A new git repository at ``dest`` holding the working-tree content of the files git tracks or
    would, but ``src``: a link to the repository's own, so the warm starter serving jobs by that path
    (links resolved) is shared with the suite. Listed where repo_root's links point (git sees a linked
    folder as one link)."""
    source_root = (repo_root / "Snakefile").resolve().parent
    command = ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"]
    listed = subprocess.run(command, cwd=source_root, capture_output=True, text=True)
    if listed.returncode != 0:
        pytest.skip(f"{source_root} is not a git checkout: {listed.stderr.strip()}")
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "src").symlink_to(source_root / "src", target_is_directory=True)
    for name in filter(None, listed.stdout.split("\0")):
        source = source_root / name
        if source.is_file() and not name.startswith("src/"):
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    git(dest, "init", "-q")
    link_venv(dest)
    return dest


def dvc_demo(repo_root: Path) -> dict:
    """config/demo.yaml cut to two losses on the tiny BERT, four steps on the generated data (under
    resources/: versioned too), Nie's analytic figures on a small grid."""
    config = yaml.safe_load((repo_root / "config" / "demo.yaml").read_text())
    config.update(results_dir=RESULTS, resources_dir="resources", oar_synthetic=None)
    config["data"] = {"fixture": True, "fixture_corpus_sentences": 500}
    config["training"].update(max_steps=4, eval_every=2, state_every=2, log_every=2)
    config["analytic_figures"] = {"points": 10, "batches": 20}
    config["mteb"]["enabled"] = False  # MTEB's evaluator is test_pipeline.py's: minutes per run here
    config["experiments"] = {
        "nie2023": {
            "backbones": ["tiny-bert"],
            "training": {"precision": "fp32"},
            "pretrained_pooling": "avg_embeddings_and_last",
            "methods": {
                "cl": {"loss": "infonce", "hp": {"tau": 0.05}, "note": "test"},
                "mpt": {"loss": "mpt", "hp": {"m": 0.23}, "note": "test"},
            },
        }
    }
    return config


def snakemake(repo: Path, *args: str) -> str:
    done = run(repo, ".venv/bin/snakemake", "--workflow-profile", "profiles/default", *args)
    return done.stdout + done.stderr


@pytest.fixture(scope="module")
def demo(repo_root, tools, tmp_path_factory):
    """The reduced demo as this repository's ``config/demo.yaml``, committed with a local-folder remote,
    then ``dvc repro reproduce@demo`` and the commit of its ``dvc.lock``."""
    tmp = tmp_path_factory.mktemp("dvc")
    origin = tracked_copy(repo_root, tmp / "origin")
    # Flow-style lists and a comment, as in the presets: what DVC's rewrite of a whole file changes.
    text = yaml.safe_dump(dvc_demo(repo_root), sort_keys=False, default_flow_style=None, width=100)
    (origin / CONFIG).write_text("# config/demo.yaml, reduced (tests/e2e/test_dvc.py)\n" + text)
    dvc(origin, "remote", "add", "-d", "store", str(tmp / "remote"))
    git(origin, "add", "-A")
    git(origin, "commit", "-qm", "the workflow, the test preset and its remote")
    done = dvc(origin, "repro", STAGE)
    git(origin, "add", "dvc.lock", SUMMARY)
    git(origin, "commit", "-qm", "dvc repro reproduce@demo")
    return SimpleNamespace(origin=origin, tmp=tmp, repro=done.stdout + done.stderr)


@pytest.mark.slow
def test_dvc_repro_runs_snakemake_and_versions_what_it_produced(demo):
    """``dvc repro`` runs Snakemake, versions its outputs and asks it again each time (alone, it runs the
    demo's stage); a preset without a stage is refused in one line."""
    origin = demo.origin
    assert "Job stats:" in demo.repro and "rule train:" in demo.repro, demo.repro[-3000:]
    assert f"contrastlab: {CONFIG} ran" in demo.repro
    assert "pipelines are up to date" not in demo.repro
    tables = sorted((origin / RESULTS / "tables").iterdir())
    assert len(tables) >= 6  # Nie Table 1 and 2, each as CSV, Markdown and LaTeX
    lock = yaml.safe_load((origin / "dvc.lock").read_text())["stages"][STAGE]
    outs = {out["path"] for out in lock["outs"]}
    assert {f"{RESULTS}/metrics", f"{RESULTS}/checkpoints", f"{RESULTS}/tables", SUMMARY} <= outs, outs
    assert json.loads((origin / RESULTS / FREEZE_RECORD).read_text())["overlay"] == {}

    # DVC cannot know what Snakemake has left to do: it always asks Snakemake, which says so.
    assert "always changed" in dvc(origin, "status", STAGE).stdout
    again = dvc(origin, "repro", STAGE)
    output = again.stdout + again.stderr
    assert "Nothing to be done" in output and "pipelines are up to date" not in output, output[-3000:]
    # Committing the outputs to DVC's cache left Snakemake's view of them intact.
    output = snakemake(origin, "-n", "--configfile", CONFIG)
    assert "Nothing to be done" in output and not pending_jobs(output), output[-3000:]
    done = dvc(demo.origin, "repro")
    output = done.stdout + done.stderr
    assert "Running stage 'reproduce@demo'" in output and "Nothing to be done" in output, output[-3000:]
    assert "pipelines are up to date" not in output and "didn't change" not in output
    done = dvc(demo.origin, "repro", "reproduce@full", ok=False)  # dvc.yaml's line for it is commented out
    assert done.returncode != 0 and "Stage 'reproduce@full' not found" in done.stderr, done.stderr
    assert len((done.stdout + done.stderr).strip().splitlines()) == 1, done.stderr


@pytest.mark.slow
def test_dvc_metrics_show_reads_one_summary_per_preset_that_ran_and_plots_show_draws_the_pngs(demo):
    done = dvc(demo.origin, "metrics", "show", "--json")
    assert "failed to load" not in done.stderr, done.stderr
    files = json.loads(done.stdout)[""]["data"]
    assert list(files) == [SUMMARY], list(files)
    summary = files[SUMMARY]["data"]
    methods = summary["nie2023"]["tiny-bert"]
    assert set(summary) == {"nie2023"} and set(methods) == {"cl", "mpt", "pretrained"}, summary
    assert all(set(scores) == {"sts_avg", "tr_avg", "tr_devacc_avg"} for scores in methods.values())
    cell = RESULTS + "/metrics/nie2023/tiny-bert/cl/seed42/senteval.json"
    assert methods["cl"]["sts_avg"] == round(json.loads((demo.origin / cell).read_text())["sts_avg"], 2)
    # The table a user reads: the path and nine numbers.
    header = dvc(demo.origin, "metrics", "show").stdout.splitlines()[0].split()
    assert header[0] == "Path" and len(header) == 1 + 9, header
    rendered = demo.tmp / "dvc_plots"  # not the repository's dvc_plots/, which git would list
    done = dvc(demo.origin, "plots", "show", "--json", "-o", str(rendered))
    assert "failed to load" not in done.stderr and "ERROR" not in done.stderr, done.stderr
    plots = json.loads(done.stdout)
    assert set(plots) == {"data"}, plots.get("errors")  # no "errors"
    assert all(entry["type"] == "image" for entries in plots["data"].values() for entry in entries)
    folder = demo.origin / RESULTS / "figures"
    figures = {png.relative_to(folder) for png in folder.rglob("*.png")}
    assert figures and {Path(path).relative_to("results/plots/demo") for path in plots["data"]} == figures


@pytest.mark.slow
def test_dvc_exp_run_set_param_on_a_config_file_or_of_no_cell_is_refused(demo):
    """-S on a config file is undone and refused; training.batch_size 16 is the preset's own: nothing to
    train, so nothing may claim it ran."""
    origin = demo.origin
    before = {name: (origin / name).read_bytes() for name in (CONFIG, "params.yaml")}
    done = dvc(origin, "exp", "run", STAGE, "-S", f"{CONFIG}:training.lr=1e-4", ok=False)
    output = done.stdout + done.stderr
    assert done.returncode != 0 and "Ran experiment" not in output, output[-3000:]
    lines = said(output)
    assert len(lines) == 1 and f"rewrote {CONFIG} whole; restored it" in lines[0], output[-3000:]
    assert "dvc exp run -S 'training.lr=0.0001'" in lines[0]
    assert {name: (origin / name).read_bytes() for name in before} == before
    assert not git(origin, "status", "--porcelain").stdout
    assert not dvc(origin, "exp", "list", "--name-only").stdout.strip()
    done = dvc(origin, "exp", "run", STAGE, "-S", "training.batch_size=16", ok=False)
    output = done.stdout + done.stderr
    lines = said(output)
    assert done.returncode != 0 and "Ran experiment" not in output, output[-3000:]
    assert len(lines) == 1 and "training.batch_size=16, which changes no cell" in lines[0], output[-3000:]
    git(origin, "checkout", "params.yaml")  # DVC leaves its -S applied in the workspace
    assert not git(origin, "status", "--porcelain").stdout


@pytest.mark.slow
def test_freeze_pull_restore_gives_the_same_tables_and_nothing_to_run(repo_root, demo):
    origin, tmp = demo.origin, demo.tmp
    tables = sorted((origin / RESULTS / "tables").iterdir())
    frozen = make(origin, "freeze", CONFIG).stdout
    assert f"git add dvc.lock {SUMMARY} resources/data.dvc resources/models.dvc" in frozen, frozen
    # Only DVC's pointers reach git: .gitignore keeps every result out of it; dvc.lock and the summary
    # were committed with the run, and the freeze changed neither.
    changed = git(origin, "status", "--porcelain", "-uall").stdout.splitlines()
    assert sorted(changed) == ["?? resources/data.dvc", "?? resources/models.dvc"], changed
    run(origin, "bash", "-c", f"git add dvc.lock {SUMMARY} resources/*.dvc")
    git(origin, "commit", "-qm", "freeze")

    # Elsewhere: a fresh clone (no results, resources, DVC cache or .snakemake), then the README's commands.
    clone = tmp / "clone"
    git(tmp, "clone", "-q", str(origin), str(clone))
    link_venv(clone)
    assert not (clone / RESULTS / "metrics").exists() and not (clone / ".dvc" / "cache").exists()
    assert not (clone / "resources" / "models").exists() and not (clone / ".snakemake").exists()
    dvc(clone, "pull")
    restored = make(clone, "restore", CONFIG).stdout
    assert "nothing left to run" in restored, restored

    for table in tables:
        assert (clone / RESULTS / "tables" / table.name).read_bytes() == table.read_bytes(), table.name
    for report in ("report.md", "report.html"):
        assert (clone / RESULTS / report).read_bytes() == (origin / RESULTS / report).read_bytes(), report
    assert "## Cost" in (clone / RESULTS / "report.md").read_text()
    assert (clone / SUMMARY).read_bytes() == (origin / SUMMARY).read_bytes()  # from git
    pngs = sorted(p.relative_to(origin) for p in (origin / "results/plots").rglob("*.png"))
    assert pngs and sorted(p.relative_to(clone) for p in (clone / "results/plots").rglob("*.png")) == pngs

    output = snakemake(clone, "-n", "--configfile", CONFIG)
    assert "Nothing to be done" in output and not pending_jobs(output), output[-3000:]
    assert "missing provenance" not in output, output[-3000:]

    # Snakemake's provenance came back too: one changed hyperparameter retrains exactly its cell.
    changed_config = dvc_demo(repo_root)
    changed_config["experiments"]["nie2023"]["methods"]["mpt"]["hp"]["m"] = 0.30
    (clone / "config" / "changed.yaml").write_text(yaml.safe_dump(changed_config, sort_keys=False))
    output = snakemake(clone, "-n", "--configfile", "config/changed.yaml")
    counts = pending_jobs(output)
    assert counts["train"] == counts["encode"] == counts["evaluate"] == 1 and "method=mpt" in output, counts
    assert "method=cl," not in output

    # Restoring with a config other than the frozen one stops with one line naming what differs.
    (clone / CONFIG).write_text((clone / "config" / "changed.yaml").read_text())
    done = make(clone, "restore", CONFIG, ok=False)
    assert done.returncode != 0, done.stdout
    assert "differs from the config the results were frozen with in: experiments" in done.stderr, done.stderr


@pytest.mark.slow
def test_dvc_exp_run_set_param_trains_the_changed_setting(demo):
    origin = demo.origin
    config = (origin / CONFIG).read_bytes()
    done = dvc(origin, "exp", "run", STAGE, "-S", "training.lr=1e-4")
    output = done.stdout + done.stderr
    assert "Ran experiment" in output and pending_jobs(output)["train"] == 2, output[-3000:]
    # DVC rewrote params.yaml: one line, the value; the preset's config is untouched; the run changed
    # dvc.lock and the summary.
    assert git(origin, "diff", "--numstat", "params.yaml").stdout.split() == ["1", "1", "params.yaml"]
    assert "+  lr: 0.0001" in git(origin, "diff", "params.yaml").stdout
    assert git(origin, "diff", "--name-only").stdout.split() == ["dvc.lock", "params.yaml", SUMMARY]
    assert (origin / CONFIG).read_bytes() == config
    record = json.loads((origin / RESULTS / FREEZE_RECORD).read_text())
    assert record["overlay"] == {"training": {"lr": 0.0001}} and record["config"]["training"]["lr"] == 0.0001

    # The experiment table: a handful of columns, not hundreds.
    table = list(csv.reader(io.StringIO(dvc(origin, "exp", "show", "--csv").stdout)))
    assert len(table) >= 3 and len(table[0]) < 40, table[0]
    assert any(column.endswith("training.lr") for column in table[0]), table[0]


def test_freeze_and_restore_refuse_bad_input_in_one_line(repo_root, tools, tmp_path):
    repo = tracked_copy(repo_root, tmp_path / "repo")

    def last_line(target: str, config: str = CONFIG) -> str:
        done = make(repo, target, config, ok=False)
        assert done.returncode != 0, done.stdout
        lines = said(done.stderr)
        assert len(lines) == 1, done.stderr
        return lines[0]

    assert "no DVC remote configured" in last_line("freeze")
    assert "dvc remote add -d" in last_line("freeze")
    dvc(repo, "remote", "add", "-d", "store", str(tmp_path / "remote"))
    assert "has not run yet" in last_line("freeze")
    assert "config.yaml has no stage in dvc.yaml" in last_line("freeze", "config.yaml")
    assert "dvc.lock has no stage reproduce@demo" in last_line("restore")
