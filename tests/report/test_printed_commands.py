"""A printed command is data: every add-seeds command the report and ``make add-seeds`` print, pasted
into bash, passes exactly the arguments meant, its ``--config`` values read back as meant, type
included; nothing else runs."""

from __future__ import annotations

import random
import shlex
import subprocess

import pytest
import yaml
from snakemake.cli import parse_config

from contrastlab.report.answer import add_seeds_script
from contrastlab.report.claims import add_seeds_commands, flow_value

#: Names YAML or a shell would read as something else: numbers and booleans, flow and mapping
#: indicators, quotes, command substitution, newlines, non-ASCII, and a generated rest.
NAMES = [
    "tiny-bert", "001", "0.5", "1e3", "yes", "off", "null", "~", ".inf", "x: y", "x, y;touch PWNED;z",
    "it's", 'say "hi"', "a;b", "$(touch PWNED)", "`touch PWNED`", "line\nbreak", "tab\there", "@x", "#x",
    "-x", "[x]", "{x: 1}", "ünï 東京", "back\\slash", "*", "&a", "!b", "%c", " spaced ", "'; touch PWNED; '",
]  # fmt: skip
_ALPHABET = "ab01 :,;'\"$`\\{}[]#&*!|<>()\n\t-.~é"
NAMES += ["".join(random.Random(seed).choices(_ALPHABET, k=1 + seed % 9)) for seed in range(40)]

#: A Snakemake that writes its arguments (NUL-separated, one command per sentinel) and nothing else.
STUB = '#!/bin/sh\n{ printf "%s\\0" "$@"; printf "END\\0"; } >> "$ARGV_LOG"\n'


def plan_for(name: str) -> list[dict]:
    """Two steps: ``name`` as a backbone and method of nie2023, and as an experiment."""
    return [
        dict(experiment="nie2023", backbone=name, methods=["cl", name], seeds=[42, 43, 44], new=[43, 44]),
        dict(experiment=name, backbone="tiny-bert", methods=["cl"], seeds=[42, 43], new=[43]),
    ]


def meant(name: str, config: str) -> list[tuple[list[str], dict]]:
    """What each command must pass: its words before ``--config`` and its overrides, typed."""
    seeds = {"experiments": {"nie2023": {"seeds": [42, 43, 44]}, name: {"seeds": [42, 43]}}}
    head = [".venv/bin/snakemake", "--configfile", config]
    select = [
        {"experiments": ["nie2023"], "backbones": [name], "methods": ["cl", name], "seeds": [43, 44]},
        {"experiments": [name], "backbones": ["tiny-bert"], "methods": ["cl"], "seeds": [43]},
    ]
    return [(head, {**seeds, "select": s}) for s in select] + [(head, {**seeds, "tables": {"partial": True}})]


def run_pasted(script: str, tmp_path, config: str) -> list[list[str]]:
    """``script`` run by bash in an empty folder whose ``.venv/bin/snakemake`` is :data:`STUB`: the
    argument lists it received. Asserts nothing else was created."""
    stub = tmp_path / ".venv" / "bin" / "snakemake"
    stub.parent.mkdir(parents=True, exist_ok=True)
    stub.write_text(STUB)
    stub.chmod(0o755)
    log = tmp_path / "argv.log"
    log.unlink(missing_ok=True)
    env = {"PATH": "/usr/bin:/bin", "ARGV_LOG": str(log), "CONFIG": config}
    subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, check=True, capture_output=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".venv", "argv.log"]  # no PWNED, nothing else
    words = log.read_bytes().decode().split("\0")[:-1]
    ends = [i for i, word in enumerate(words) if word == "END"]
    return [words[start + 1 : end] for start, end in zip([-1, *ends], ends, strict=False)]


def overrides(argv: list[str]) -> tuple[list[str], dict]:
    """The words before ``--config`` and the ``--config`` words read back by YAML (typed) and checked
    against Snakemake's own reading of them (which keeps every scalar a string)."""
    at = argv.index("--config")
    words = [w for w in argv[at + 1 :] if "=" in w]
    assert argv[at + 1 + len(words) :] in ([], ["--forcerun", "tables"])
    typed = {w.split("=", 1)[0]: yaml.safe_load(w.split("=", 1)[1]) for w in words}
    as_snakemake = parse_config(words)  # BaseLoader: the same structure, every leaf a string
    assert as_snakemake == _strings(typed)
    return [".venv/bin/snakemake", *argv[:at]], typed


def _strings(value):
    if isinstance(value, dict):
        return {str(k): _strings(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_strings(v) for v in value]
    return str(value).lower() if isinstance(value, bool) else str(value)


@pytest.mark.fault(
    "names YAML or a shell would read as something else, through the printed add-seeds commands (H5)",
    "each pasted command passes exactly the arguments and values meant; nothing else runs",
)
def test_pasted_add_seeds_commands_pass_exactly_the_names_meant(tmp_path):
    config = "my presets/it's demo.yaml"
    for name in NAMES:
        plan = plan_for(name)
        written = "\n".join(add_seeds_commands(plan, shlex.quote(config)))  # make add-seeds
        script = "\n".join(add_seeds_script(plan))  # the report's block, CONFIG set
        for text in (written, script):
            got = [overrides(argv) for argv in run_pasted(text, tmp_path, config)]
            assert got == meant(name, config), f"{name!r} through {text!r}"


def test_a_config_value_reads_back_as_the_value_meant_type_included():
    values = [["001", 1, "1", True, "true", None, "null", 0.5, "0.5", 1e-05, "x: y", "a\nb", '"q"']]
    assert yaml.safe_load(flow_value(values)) == values
    assert flow_value(["tiny-bert", "001", "yes", 43]) == '[tiny-bert, "001", "yes", 43]'
    with pytest.raises(TypeError, match="no --config value"):
        flow_value(float("inf"))


def test_add_seeds_seed_lists_of_steps_that_differ_are_decided_by_value():
    """Two steps' differing seed lists are merged by value, so every new seed is configured."""
    plan = [
        dict(experiment="nie2023", backbone="a", methods=["cl"], seeds=[42, 43, 44], new=[44]),
        dict(experiment="nie2023", backbone="b", methods=["cl"], seeds=[42, 43, 45], new=[45]),
    ]
    (command, *_) = add_seeds_commands(plan, "config.yaml")
    _, typed = overrides(shlex.split(command)[1:])
    assert typed["experiments"] == {"nie2023": {"seeds": [42, 43, 44, 45]}}


def test_a_config_key_holding_a_quote_stays_one_value():
    """A ``select`` name holding a quote stays one word and reads back as the name."""
    plan = [dict(experiment="nie2023", backbone='o\'brien "x"', methods=["cl"], seeds=[42, 43], new=[43])]
    (command, _) = add_seeds_commands(plan, "config.yaml")
    words = shlex.split(command)
    assert len(words) == 6 and overrides(words[1:])[1]["select"]["backbones"] == ['o\'brien "x"']
