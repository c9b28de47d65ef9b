"""DVC versions what Snakemake produced: a reduced demo run, ``make freeze``, a fresh clone, ``dvc pull``,
``make restore``: the same tables byte for byte, and a dry run with no job (README "Full reproduction")."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from contrastlab.versioning import pending_jobs

CONFIG = "config/test-dvc.yaml"
RESULTS = "results/demo"  # a results folder that dvc.yaml's metrics and plots name


def _env() -> dict[str, str]:
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", DVC_NO_ANALYTICS="1")
    # Nothing may reach the network: an attempt fails fast instead of hanging.
    env.update(HTTP_PROXY="http://127.0.0.1:9", HTTPS_PROXY="http://127.0.0.1:9", NO_PROXY="")
    return env


def run(cwd: Path, *command: str, ok: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(command, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=600)
    if ok:
        assert done.returncode == 0, f"{' '.join(command)}:\n{(done.stdout + done.stderr)[-4000:]}"
    return done


def git(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return run(cwd, "git", "-c", "user.email=test@contrastlab", "-c", "user.name=test", *args)


def make(cwd: Path, target: str, config: str, ok: bool = True) -> subprocess.CompletedProcess:
    # .venv is a link to this interpreter's environment: -o keeps make from "installing" into it from the
    # copy (whose pyproject.toml is newer than the environment's install stamp after a clone).
    return run(cwd, "make", "-s", "-o", ".venv/bin/.installed", target, f"CONFIG={config}", ok=ok)


def link_venv(repo: Path) -> None:
    """``repo/.venv`` -> this interpreter's environment, so the README's ``.venv/bin/...`` commands run."""
    (repo / ".venv").symlink_to(sys.prefix, target_is_directory=True)
    with open(repo / ".git" / "info" / "exclude", "a") as handle:
        handle.write(
            ".venv\n"
        )  # a symlink: kept out of git even where .gitignore says ".venv/" (a folder only)


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
    """A new git repository at ``dest`` holding the working-tree content of the repository's files that
    git tracks or would (the workflow, Makefile, .dvc/config, dvc.yaml, .gitignore, .dvcignore)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=repo_root,
        capture_output=True,
        text=True,
    )
    if listed.returncode != 0:
        pytest.skip(f"{repo_root} is not a git checkout: {listed.stderr.strip()}")
    for name in filter(None, listed.stdout.split("\0")):
        source = repo_root / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    git(dest, "init", "-q")
    link_venv(dest)
    return dest


def reduced_demo(repo_root: Path) -> dict:
    """config/demo.yaml cut to two losses on the tiny BERT, four steps on the generated data (kept
    under resources/, so that it is versioned too), Nie's analytic figures on a small grid."""
    config = yaml.safe_load((repo_root / "config" / "demo.yaml").read_text())
    config.update(results_dir=RESULTS, resources_dir="resources", oar_synthetic=None)
    config["data"] = {"fixture": True, "fixture_corpus_sentences": 500}
    config["training"].update(max_steps=4, eval_every=2, state_every=2, log_every=2)
    config["analytic_figures"] = {"points": 10, "batches": 20}
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
    done = run(repo, ".venv/bin/snakemake", "--workflow-profile", "profiles/local", *args)
    return done.stdout + done.stderr


@pytest.mark.slow
def test_freeze_pull_restore_gives_the_same_tables_and_nothing_to_run(repo_root, tools, tmp_path):
    # The run, where it ran: a reduced demo in a repository with a local-folder DVC remote.
    origin = tracked_copy(repo_root, tmp_path / "origin")
    (origin / CONFIG).write_text(yaml.safe_dump(reduced_demo(repo_root), sort_keys=False))
    git(origin, "add", "-A")
    git(origin, "commit", "-qm", "the workflow and the test preset")
    run(origin, ".venv/bin/dvc", "remote", "add", "-d", "store", str(tmp_path / "remote"))
    snakemake(origin, "--configfile", CONFIG, "--cores", "2")
    tables = sorted((origin / RESULTS / "tables").iterdir())
    assert len(tables) >= 6  # Nie Table 1 and 2, each as CSV, Markdown and LaTeX

    frozen = make(origin, "freeze", CONFIG).stdout
    assert "git add" in frozen, frozen
    # Only DVC's pointers (and the remote's config) reach git: .gitignore keeps every result out of it.
    changed = git(origin, "status", "--porcelain", "-uall").stdout.splitlines()
    assert changed and all(line.endswith(".dvc") or line.endswith(".dvc/config") for line in changed), changed
    for name in ("checkpoints", "metrics", "state", "tables", "report.md", "benchmarks"):
        assert f"?? {RESULTS}/{name}.dvc" in changed, (name, changed)
    assert "?? resources/models.dvc" in changed and "?? resources/data.dvc" in changed, changed
    run(origin, "bash", "-c", f"git add .dvc/config {RESULTS}/*.dvc resources/*.dvc")
    git(origin, "commit", "-qm", "freeze")
    assert not git(origin, "status", "--porcelain").stdout, "the README's git add missed a pointer"

    # Elsewhere: a fresh clone (no results, resources, DVC cache or .snakemake), then the README's commands.
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(origin), str(clone))
    link_venv(clone)
    assert not (clone / RESULTS / "metrics").exists() and not (clone / ".dvc" / "cache").exists()
    assert not (clone / "resources" / "models").exists() and not (clone / ".snakemake").exists()
    run(clone, ".venv/bin/dvc", "pull")
    restored = make(clone, "restore", CONFIG).stdout
    assert "nothing left to run" in restored, restored

    for table in tables:
        assert (clone / RESULTS / "tables" / table.name).read_bytes() == table.read_bytes(), table.name
    for report in ("report.md", "report.html"):
        assert (clone / RESULTS / report).read_bytes() == (origin / RESULTS / report).read_bytes(), report
    assert "## Cost" in (clone / RESULTS / "report.md").read_text()

    output = snakemake(clone, "-n", "--configfile", CONFIG)
    assert "Nothing to be done" in output and not pending_jobs(output), output[-3000:]
    assert "missing provenance" not in output, output[-3000:]

    # Snakemake's provenance came back too: one changed hyperparameter retrains exactly its cell.
    changed_config = reduced_demo(repo_root)
    changed_config["experiments"]["nie2023"]["methods"]["mpt"]["hp"]["m"] = 0.30
    (clone / "config" / "changed.yaml").write_text(yaml.safe_dump(changed_config, sort_keys=False))
    output = snakemake(clone, "-n", "--configfile", "config/changed.yaml")
    counts = pending_jobs(output)
    assert counts["train"] == counts["encode"] == counts["evaluate"] == 1 and "method=mpt" in output, counts
    assert "method=cl," not in output

    # Restoring with a config other than the frozen one stops with one line naming what differs.
    done = make(clone, "restore", "config/changed.yaml", ok=False)
    assert (
        done.returncode != 0
        and "differs from the config the results were frozen with in: experiments" in (done.stderr)
    ), done.stderr

    # dvc.yaml's metrics read the pulled metrics files.
    shown = json.loads(run(clone, ".venv/bin/dvc", "metrics", "show", "--json").stdout)
    cell = f"{RESULTS}/metrics/nie2023/tiny-bert/cl/seed42/senteval.json"
    ours = json.loads((origin / cell).read_text())["sts_avg"]
    values = [data for revision in shown.values() for data in revision.get("data", {}).items()]
    assert any(path == cell and d["data"]["sts_avg"] == ours for path, d in values), values


def test_freeze_and_restore_refuse_bad_input_in_one_line(repo_root, tools, tmp_path):
    repo = tracked_copy(repo_root, tmp_path / "repo")
    config = "config/demo.yaml"

    def last_line(target: str) -> str:
        done = make(repo, target, config, ok=False)
        assert done.returncode != 0, done.stdout
        lines = [line for line in done.stderr.splitlines() if line.startswith("contrastlab:")]
        assert len(lines) == 1, done.stderr
        return lines[0]

    assert "no DVC remote configured" in last_line("freeze")
    assert "dvc remote add -d" in last_line("freeze")
    run(repo, ".venv/bin/dvc", "remote", "add", "-d", "store", str(tmp_path / "remote"))
    assert "has not run yet" in last_line("freeze")
    assert "run `.venv/bin/dvc pull` first" in last_line("restore")
