"""No config string reaches a shell (docs/reliability.md G12; issue 63 item 3): a string that a job's
command line carries and that holds a character the SLURM submission's shell interprets inside
``sbatch --wrap="..."`` is refused at validation, in one line naming the key; the characters that are
safe there (spaces, ``;``, ``'``, parentheses) still pass."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from snakemake.cli import parse_config
from snakemake.utils import update_config

from contrastlab import config as cl_config
from contrastlab.config.command_line import check_command_paths
from contrastlab.paths import REPO_ROOT

DEMO = REPO_ROOT / "config" / "demo.yaml"


def _config(*overrides: str) -> dict:
    """The demo config with ``--config`` overrides, parsed by Snakemake's own ``parse_config``."""
    with open(DEMO) as handle:
        config = yaml.safe_load(handle)
    update_config(config, parse_config(list(overrides)))
    return config


REFUSED = [
    ("results_dir=results/s$(touch PWN)", "results_dir", "'$'"),
    ("results_dir=results/s`touch PWN`", "results_dir", "'`'"),
    ('data={wiki_path: "my corpus\\\\x.txt"}', "data.wiki_path", "'\\\\'"),
    ('resources_dir=res"ources', "resources_dir", "'\"'"),
    ('experiments={nie2023: {title: "a\\nb"}}', "experiments.nie2023.title", "'\\n'"),
    ("experiments={nie2023: {seeds: [42], x$y: {}}}", "experiments.nie2023", "'$'"),
]


@pytest.mark.fault('`$(...)`, backticks, `\\`, `"` or a newline in a config string', "refused naming the key")
@pytest.mark.parametrize(
    ("override", "key", "char"), REFUSED, ids=["dollar", "backtick", "backslash", "quote", "newline", "key"]
)
def test_a_string_a_shell_would_interpret_is_refused_naming_the_key(override, key, char, observed):
    with pytest.raises(cl_config.ConfigError) as caught:
        cl_config.validate(_config(override))
    message = str(caught.value)
    observed(message)
    assert "\n" not in message
    assert message.startswith(f"config key {key}: "), message
    assert f"holds {char}" in message and 'sbatch --wrap="..."' in message, message


def test_spaces_semicolons_quotes_and_parentheses_stay_allowed(tmp_path):
    folder = tmp_path / "my results; it's (new)"
    config = cl_config.validate(_config(f"results_dir={folder}", "data={wiki_path: 'a b;c(d).txt'}"))
    assert config["results_dir"] == str(folder) and config["data"]["wiki_path"] == "a b;c(d).txt"


@pytest.mark.fault("`$` in a --configfile path or the working directory", "refused naming the path")
def test_a_configfile_or_working_directory_a_shell_would_interpret_is_refused(tmp_path, observed):
    safe = tmp_path / "my configs; it's" / "demo.yaml"
    check_command_paths([str(safe)], str(tmp_path))
    with pytest.raises(cl_config.ConfigError) as caught:
        check_command_paths([str(safe), "c$(touch PWN).yaml"], str(tmp_path))
    observed(str(caught.value))
    assert str(caught.value).startswith("--configfile 'c$(touch PWN).yaml': holds '$'"), caught.value
    with pytest.raises(cl_config.ConfigError) as caught:
        check_command_paths([], "/scratch/a`b`")
    assert str(caught.value).startswith("working directory '/scratch/a`b`': holds '`'"), caught.value


# --- S5: the Makefile's values reach the scripts as single arguments ---------------------------------------


def _make(*args: str) -> subprocess.CompletedProcess:
    """The real ``make`` target, with this interpreter's environment (``install`` taken as done)."""
    bin_dir = Path(sys.executable).parent
    command = ["make", "--no-print-directory", "-o", "install", f"BIN={bin_dir}", *args]
    return subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)


@pytest.mark.fault(
    "`make publish CELL=\"x'; touch PWN; echo '\"`", "one argument: the cell named verbatim, nothing run"
)
def test_make_publish_passes_a_hostile_cell_as_one_argument(tmp_path, observed):
    cell = f"x'; touch {tmp_path}/PWN; echo '"
    done = _make("publish", "CONFIG=config/demo.yaml", f"CELL={cell}", "REPO=me/x", "CODE=a b")
    observed(done.stderr.strip().splitlines()[0])
    assert not (tmp_path / "PWN").exists()
    assert done.returncode != 0
    assert f'contrastlab: publish: unknown cell "{cell}" in config/demo.yaml;' in done.stderr, done.stderr


@pytest.mark.fault(
    "`make add-seeds CONFIG='<dir>/my configs/it's demo.yaml'`", "one argument: the preset is read"
)
def test_make_add_seeds_passes_a_config_path_with_spaces_and_a_quote_as_one_argument(tmp_path, observed):
    folder = tmp_path / "my configs"
    folder.mkdir()
    config = yaml.safe_load(DEMO.read_text())
    config["results_dir"] = str(tmp_path / "my results")  # nothing run: no claim is undecided
    preset = folder / "it's demo.yaml"
    preset.write_text(yaml.safe_dump(config))
    done = _make("add-seeds", f"CONFIG={preset}")
    observed(done.stdout.strip().splitlines()[-1])
    assert done.returncode == 0, done.stderr
    assert "contrastlab: add-seeds: 0 undecided claims with run cells; nothing to add" in done.stdout


@pytest.mark.fault(
    "`make <lock|dry-run|search|monitor> CONFIG=<a file that does not exist>`",
    "one contrastlab: line naming the file, before Snakemake (whose answer is a traceback)",
)
@pytest.mark.parametrize("target", ["lock", "dry-run", "search", "monitor"])
def test_a_make_target_given_a_missing_config_file_says_so_in_one_line(tmp_path, target, observed):
    """docs/reliability.md G15: Snakemake 9 opens a missing --configfile outside its error handling."""
    missing = tmp_path / "no such.yaml"
    done = _make(target, f"CONFIG={missing}")
    # without make's own lines ("make:", or "make[1]:" under make test)
    said = [line for line in done.stderr.splitlines() if not re.match(r"make(\[\d+\])?: ", line)]
    observed(said[0] if said else done.stderr)
    assert done.returncode != 0
    assert said == [
        f"contrastlab: config file {missing} does not exist; pass CONFIG=<an existing YAML file> "
        "(config.yaml, config/demo.yaml, config/cpu.yaml)"
    ], done.stderr
    assert "Traceback" not in done.stdout + done.stderr


@pytest.mark.fault(
    "scripts/add_seeds.py --configfile '<dir>/my configs/it's demo.yaml'", "printed and run as one word"
)
def test_add_seeds_prints_and_runs_the_configfile_as_one_word(tmp_path, monkeypatch, capsys, observed):
    import runpy

    from contrastlab.report import claims

    step = {
        "experiment": "nie2023",
        "backbone": "tiny-bert",
        "methods": ["cl"],
        "seeds": [42, 43],
        "new": [43],
    }
    monkeypatch.setattr(claims, "plan_for_configfile", lambda configfile, max_seeds: ([], [step]))
    ran = []
    monkeypatch.setattr(subprocess, "run", lambda argv, check: ran.append(argv))
    preset = str(tmp_path / "my configs" / "it's demo.yaml")
    monkeypatch.setattr(sys, "argv", ["add_seeds.py", "--configfile", preset, "--run"])
    runpy.run_path(str(REPO_ROOT / "scripts" / "add_seeds.py"), run_name="__main__")
    printed = [line for line in capsys.readouterr().out.splitlines() if not line.startswith("#")]
    observed(printed[0])
    assert len(printed) == len(ran) == 2
    for line, argv in zip(printed, ran, strict=True):
        assert shlex.split(line) == argv  # what is printed is what runs
        assert argv[argv.index("--configfile") + 1] == preset
