"""A rule's script run by hand (``python scripts/train.py``) says in one line what it is and what to run
instead; it ended in ``KeyError: 'snakemake'`` (ecosystem survey, row 90)."""

import re
import subprocess
import sys

import pytest

from contrastlab.paths import REPO_ROOT

RULE_SCRIPTS = sorted(
    {
        name
        for rules in (REPO_ROOT / "rules").glob("*.smk")
        for name in re.findall(r'scripts/(\w+\.py)"', rules.read_text())
    }
)


#: rule scripts that are also a command line of their own (a cell trained by hand, for debugging)
WITH_A_CLI = ["train.py"]


def test_every_rule_script_is_found():
    assert len(RULE_SCRIPTS) == 20 and set(WITH_A_CLI) <= set(RULE_SCRIPTS)


def test_a_rule_script_with_a_command_line_answers_help():
    done = subprocess.run(
        [sys.executable, str(REPO_ROOT / "scripts" / "train.py"), "--help"], capture_output=True, text=True
    )
    assert done.returncode == 0 and "--set KEY=VALUE" in done.stdout


@pytest.mark.parametrize("script", sorted(set(RULE_SCRIPTS) - set(WITH_A_CLI)))
def test_a_rule_script_run_by_hand_says_so_in_one_line(script):
    command = [sys.executable, str(REPO_ROOT / "scripts" / script), "--help"]
    done = subprocess.run(command, capture_output=True, text=True, cwd=REPO_ROOT)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.splitlines() == [
        f"contrastlab: {script} is a rule's script: Snakemake runs it with the job's inputs, params and "
        "outputs; run the workflow instead, e.g. .venv/bin/snakemake --configfile config/demo.yaml --cores 2 "
        "(`make help` lists the commands)"
    ]
