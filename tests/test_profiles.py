"""The profiles as Snakemake itself reads them: a plain ``snakemake`` gets profiles/default (``make demo``'s
too), and a SLURM profile named with ``--workflow-profile`` replaces it. The runs: tests/e2e."""

from __future__ import annotations

import os
import re
import subprocess

import pytest
import yaml
from snakemake.cli import parse_args
from snakemake.settings.enums import RerunTrigger

from contrastlab.cost import packing as cl_packing
from contrastlab.paths import REPO_ROOT
from tests.make_command import make_command, make_env

PROFILES = REPO_ROOT / "profiles"
#: What make demo's runs rerun on: changed inputs, settings and environment, not an edit in scripts/.
TRIGGERS = {RerunTrigger.MTIME, RerunTrigger.PARAMS, RerunTrigger.INPUT, RerunTrigger.SOFTWARE_ENV}
#: What Snakemake says of the workflow profile it loads.
USING = "Using workflow specific profile profiles/{} for setting default command line arguments."


@pytest.fixture
def snakemake_args(monkeypatch, capsys):
    """``snakemake_args(*argv)``: the settings Snakemake takes from ``argv`` and the profiles it loads,
    in the repository root (where it looks for profiles/default), and the line naming those profiles."""
    monkeypatch.chdir(REPO_ROOT)

    def parsed(*argv: str):
        _, args = parse_args(list(argv))
        return args, capsys.readouterr().err.strip()

    return parsed


def test_local_is_the_default_profile_not_a_copy():
    """profiles/local (the name older commands use) holds a link to profiles/default's file: one source.
    A link to the file, not to the folder: copies made file by file (tests/e2e/test_dvc.py's git
    repository) keep it as a file, where a linked folder would be left out."""
    assert [p.name for p in (PROFILES / "local").iterdir()] == ["config.yaml"]
    assert os.readlink(PROFILES / "local" / "config.yaml") == "../default/config.yaml"


def test_a_plain_snakemake_runs_with_the_default_profile(snakemake_args):
    args, said = snakemake_args("--cores", "2", "--configfile", "config/demo.yaml")
    assert said == USING.format("default")
    assert args.rerun_triggers == TRIGGERS  # no RerunTrigger.CODE: an edited script retrains nothing
    assert args.keep_going and args.rerun_incomplete
    # every rule is a script: rule, whose "Shell command: None" a dry run would print per job
    # (tests/e2e/test_dryrun.py runs the demo's)
    assert args.printshellcmds is False
    assert args.cores == 2 and set(args.resources) == {"gpu"} and args.resources["gpu"].value == 1
    assert args.executor is None  # this machine


def test_make_runs_snakemake_as_a_user_types_it():
    """make demo (and every make target that starts Snakemake) names no profile: it is the plain run."""
    makefile = (REPO_ROOT / "Makefile").read_text()
    assert re.search(r"^SNAKEMAKE := \$\(BIN\)/snakemake$", makefile, re.M), "SNAKEMAKE names a profile"
    commands = [line for line in makefile.splitlines() if not line.lstrip().startswith("#")]
    assert not [line for line in commands if "profile" in line]


@pytest.mark.parametrize("profile", ["slurm", "slurm-gres"])
def test_a_slurm_workflow_profile_replaces_the_default(snakemake_args, profile):
    args, said = snakemake_args("-n", "--workflow-profile", f"profiles/{profile}")
    assert said == USING.format(profile)
    assert args.executor == "slurm" and args.jobs == 100
    assert {name: r.value for name, r in args.resources.items()} == {"probe_slots": 4, "pack_slots": 1}
    # the SentEval probes 20 to a SLURM job; training jobs that share a GPU as many as share it
    assert args.group_components == {"senteval_probes": 20, "gpu_pack2": 2, "gpu_pack4": 4}
    assert {f"gpu_pack{n}" for n in (2, 4)} == {cl_packing.pack_group(n) for n in (2, 4)}
    assert args.rerun_triggers == TRIGGERS and args.keep_going and args.rerun_incomplete
    assert args.cores is None  # not the default profile's `cores: all`


def test_a_slurm_profile_given_as_user_profile_loses_its_probe_slots(snakemake_args):
    """Why the docs name the SLURM profiles with --workflow-profile: as a --profile, profiles/default
    still loads and its keys win (Snakemake's rule), so its resources replace the SLURM profile's."""
    args, said = snakemake_args("-n", "--profile", "profiles/slurm")
    assert "profiles/slurm and workflow specific profile profiles/default" in said
    assert args.executor == "slurm" and set(args.resources) == {"gpu"}


def test_make_help_lists_every_target_with_its_description():
    """``make help`` prints each .PHONY target once with its ``## `` comment, in the Makefile's order."""
    makefile = (REPO_ROOT / "Makefile").read_text()
    phony = re.search(r"^\.PHONY: (.*)$", makefile, re.M).group(1).split()
    described = {}
    for name, text in re.findall(r"^([a-z][a-z-]*):.*?## (.*)$", makefile, re.M):
        described.setdefault(name, text)
    assert set(phony) == set(described), "a .PHONY target without its ## line, or one not .PHONY"
    done = subprocess.run(
        make_command("-C", str(REPO_ROOT), "help"),
        capture_output=True,
        text=True,
        env=make_env(),
        timeout=60,
        check=True,
    )
    lines = done.stdout.splitlines()
    assert lines[0] == "make <target> [NAME=value ...]:"
    assert [line.split(None, 1)[0] for line in lines[1:]] == list(described)
    assert [line.split(None, 1)[1] for line in lines[1:]] == list(described.values())
    assert (
        "  demo         offline toy reproduction on CPU: results/demo/tables/*.{csv,md,tex}, "
        "results/demo/report.html" in lines
    )
    assert len(lines) == 1 + len(phony)
    install = next(line for line in lines if line.startswith("  install "))  # both of its forms, README's
    assert "hash-checked" in install and "CUDA=12.6 (or cpu): (re)install with that torch build" in install


def test_slurm_gres_asks_every_gpu_rule_for_a_gres():
    """profiles/slurm-gres lists every rule holding ``gpu=GPU``: one left out would ask ``--gpus=1``."""
    text = "".join(path.read_text() for path in (REPO_ROOT / "rules").glob("*.smk"))
    found = re.findall(r"^(?:use rule \w+ as |rule )(\w+).*((?:\n[ #].*|\n)*)", text, re.M)
    gpus = {rule for rule, body in found if re.search(r"^\s+gpu=GPU,", body, re.M)}
    asked = yaml.safe_load((PROFILES / "slurm-gres" / "config.yaml").read_text())["set-resources"]
    assert "mteb" in gpus and {r: asked.get(r) for r in gpus} == dict.fromkeys(
        gpus, {"gpu": 0, "gres": "gpu:1"}
    )
