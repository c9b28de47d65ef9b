"""No config string reaches a shell: one the SLURM submission's shell would interpret is refused in one
line naming the key (safe characters pass). And the command lines around the config: the Makefile's values
reach the scripts as single arguments, a bad ``--configfile`` is one line from make and from a plain
``snakemake``, and the suite's own make runs stay in this interpreter's environment."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from snakemake.cli import parse_config
from snakemake.settings.types import DeploymentMethod
from snakemake_interface_executor_plugins.utils import format_cli_arg

from contrastlab import config as cl_config
from contrastlab.config.command_line import check_command_paths, check_config_words
from contrastlab.config.invocation import (
    check_image,
    config_entry_problem,
    configfile_problem,
    profile_files,
    read_config,
)
from contrastlab.paths import REPO_ROOT
from tests.config.test_refused_at_validation import DEMO, _config, refused
from tests.e2e.conftest import folders
from tests.make_command import MAKE, make_command, make_env

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
    message = refused(cl_config.validate, _config(override))
    observed(message)
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
    message = refused(check_command_paths, [str(safe), "c$(touch PWN).yaml"], str(tmp_path))
    observed(message)
    assert message.startswith("--configfile 'c$(touch PWN).yaml': holds '$'"), message
    message = refused(check_command_paths, [], "/scratch/a`b`")
    assert message.startswith("working directory '/scratch/a`b`': holds '`'"), message


@pytest.mark.fault("a space in the path of the Python Snakemake runs in", "refused naming it, before any job")
def test_an_interpreter_path_the_job_command_would_split_is_refused(tmp_path, observed):
    check_command_paths([], str(tmp_path), interpreter="/scratch/my-clone-ü/.venv/bin/python")
    python = "/scratch/my clone/.venv/bin/python"  # Snakemake runs "<python> <script>" unquoted
    message = refused(check_command_paths, [], "/scratch/my clone", interpreter=python)
    observed(message)
    assert message.startswith(f"Python '{python}': holds ' '"), message


# --- S5: the Makefile's values reach the scripts as single arguments ---------------------------------------


def _make(*args: str) -> subprocess.CompletedProcess:
    """The real ``make`` target, with this interpreter's environment (``install`` taken as done)."""
    command = make_command(*args)
    return subprocess.run(command, cwd=REPO_ROOT, env=make_env(), capture_output=True, text=True, timeout=120)


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
    folder = _make(target, f"CONFIG={tmp_path}")  # said "does not exist" of a folder
    assert f"contrastlab: config file {tmp_path} is a folder; pass CONFIG=<an existing" in folder.stderr


@pytest.mark.parametrize(
    ("value", "said"),
    [
        (
            "GPU_MODEL=Bogus",
            "GPU_MODEL=Bogus (--gpu-model): unknown card; use one of H100 PCIe, H100 NVL, H100,",
        ),
        ("GPUS=0", "GPUS=0 (--gpus) must be a whole number, 1 or more\n"),
        ("GPUS=two", "GPUS=two (--gpus) must be a whole number, 1 or more\n"),
        ("PRECISION=fp64", "precision choice must be config or one of fp32, tf32, bf16, fp16, got 'fp64'\n"),
    ],
)
def test_make_plan_names_the_value_as_the_user_typed_it(value, said):
    """In one line, naming the value (not the config key it stands for, ``resources.gpu_model``)."""
    done = _make("plan", "CONFIG=config/demo.yaml", value)
    assert done.returncode != 0 and done.stderr.startswith(f"contrastlab: plan: {said}"), done.stderr


#: Every user command that imports the records, as the user types it: the Makefile's targets that run Python
#: (CONFIG=config/demo.yaml), the modules the docs run with ``python -m``, DVC's stage and Snakemake.
TARGETS = (
    "plan dry-run add-seeds compare publish cards mteb-submit freeze restore monitor gpu-check gpu-bench"
)
RECORD_COMMANDS = {
    **{t: make_command(t, "CONFIG=config/demo.yaml", "A=a", "B=b", "CELL=c") for t in TARGETS.split()},
    **{m: [sys.executable, "-m", f"contrastlab.{m}"] for m in ("papers", "tables.deviations", "cost.rows")},
    "reproduce.py": [sys.executable, "scripts/reproduce.py", "--configfile", "config/demo.yaml"],
    "snakemake": [str(Path(sys.executable).parent / "snakemake"), "-n"],
}


@pytest.mark.parametrize("command", RECORD_COMMANDS.values(), ids=RECORD_COMMANDS)
def test_a_record_naming_another_papers_experiment_stops_every_command_in_one_line(tmp_path, command):
    """Each stops as it imports the records, with the record's one line (they printed a traceback; Snakemake
    its usage), besides make's own ``make: ***`` line and Snakemake's naming its profile."""
    shutil.copytree(REPO_ROOT / "src/contrastlab", tmp_path / "contrastlab")  # the library
    record = tmp_path / "contrastlab/report/claims/macl.yaml"
    text = record.read_text(encoding="utf-8")
    record.write_text(text.replace("experiment: macl,", "experiment: nie2023,", 1), encoding="utf-8")
    line = f"{record}: table 'macl_table3': its experiment 'nie2023' must be named macl or macl_<study>"
    env = {**make_env(), "PYTHONPATH": str(tmp_path)}
    done = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120)
    own = [said for said in done.stderr.splitlines() if not said.startswith(("make: *** ", "Using workflow"))]
    status = 2 if command[0] == make_command()[0] else 1  # make's own status for a failed recipe
    assert done.returncode == status and own == [f"contrastlab: {line}"], done.stderr[-3000:]


PROFILE_LINE = "Using workflow specific profile {} for setting default command line arguments."
FIX = "pass --configfile <an existing YAML file> (config.yaml, config/demo.yaml, config/cpu.yaml)"


def _snakemake(*argv: str) -> tuple[int, list[str]]:
    """The real ``snakemake`` program of this environment in the repository root: its exit status and
    its output's lines."""
    program = str(Path(sys.executable).parent / "snakemake")
    done = subprocess.run([program, *argv], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    return done.returncode, (done.stdout + done.stderr).splitlines()


def _refused(profile: object, *argv: str) -> str:
    """The one line a plain ``snakemake`` with ``argv`` stops with (exit status 1), after Snakemake's
    line naming the workflow profile ``profile``."""
    status, lines = _snakemake(*argv)
    assert status == 1 and lines[:1] == [PROFILE_LINE.format(profile)] and len(lines) == 2, lines
    return lines[1]


@pytest.mark.fault(
    "plain `snakemake --configfile <a file that does not exist> -n` (G15)",
    "one contrastlab: line naming the file, before Snakemake opens it (its answer is a 27-line traceback)",
)
@pytest.mark.parametrize("profile", ["default", "slurm", "slurm-gres"])  # profiles/local links to default
def test_plain_snakemake_given_a_missing_config_file_says_so_in_one_line(tmp_path, profile, observed):
    """The workflow profiles, read before Snakemake opens the --configfile files, check them."""
    missing = tmp_path / "no such.yaml"
    named = [] if profile == "default" else ["--workflow-profile", f"profiles/{profile}"]
    argv = (*named, "-n", "--configfile", "config/demo.yaml", str(missing), "--cores", "1")
    line = _refused(f"profiles/{profile}", *argv)
    observed(line)
    assert line == f"contrastlab: config file {missing} does not exist; {FIX}"


#: An ``oar_synthetic`` block whose fields the schema passes one by one but its job refuses together.
BAD_STUDIES = {
    "{batch_size: 700}": "batch_size must be <= 600 (all points), got 700",
    "{points_per_cluster: 20, batch_size: 64}": "batch_size must be <= 60 (all points), got 64",
    "{sweep: [{seeds: 3}]}": "sweep overrides fields of the study's setup, not ['seeds']",
    "{sweep: [{lr: 0.1}], sweep_loss: dcl}": "sweep_loss 'dcl' is not in losses (ntxent, dcl_vision, ",
    "{sweep: [{batch_size: 700}]}": "sweep entry {'batch_size': 700}: batch_size must be <= 600 (all points)",
}


@pytest.mark.fault(
    "an oar_synthetic block whose fields each pass but not together (a batch above all points, a sweep "
    "of the setup's keys or out of bounds, a sweep_loss not trained)",
    "one contrastlab: line naming the key and the bound, before any job (the study's job refused it)",
)
@pytest.mark.parametrize("block", BAD_STUDIES)
def test_an_oar_synthetic_block_its_job_would_refuse_is_refused_before_any_job(block, observed):
    argv = ("-n", "--configfile", "config/demo.yaml", "--config", f"oar_synthetic={block}", "--cores", "1")
    line = _refused("profiles/default", *argv)
    observed(line)
    assert line.startswith(f"contrastlab: config key oar_synthetic: {BAD_STUDIES[block]}"), line


def test_docs_reproduction_quotes_the_one_line_a_missing_config_file_gets():
    """docs/reproduction.md once said Snakemake answers it with a traceback no check of ours could precede."""
    text = " ".join((REPO_ROOT / "docs" / "reproduction.md").read_text(encoding="utf-8").split())
    line = configfile_problem(["--configfile", "<file>"])
    assert f"contrastlab: {line.split(';')[0]};" in text and "FileNotFoundError" not in text


@pytest.mark.fault(
    "a SLURM profile whose config.yaml holds `group-components: {senteval_probes: 0}` (or `abc`) (J1)",
    "one contrastlab: line naming the profile file, the entry and the fix (Snakemake: a traceback)",
)
@pytest.mark.parametrize("size", ["0", "abc"])
def test_a_profile_with_a_bad_group_size_is_named_in_one_line(tmp_path, size, observed):
    """A copy of profiles/slurm with a group size Snakemake refuses is named by the profile's hook."""
    profile = tmp_path / "my slurm" / "config.yaml"
    profile.parent.mkdir()
    text = (REPO_ROOT / "profiles" / "slurm" / "config.yaml").read_text()
    assert "\n  senteval_probes: 20\n" in text
    profile.write_text(text.replace("\n  senteval_probes: 20\n", f"\n  senteval_probes: {size}\n"))
    line = _refused(profile.parent, "-n", "--workflow-profile", str(profile.parent), "--cores", "1")
    observed(line)
    assert line == (
        f"contrastlab: profile {profile}: group-components entry 'senteval_probes: {size}' is invalid; "
        "write GROUP: N, N a whole number of 1 or more there"
    )


def test_a_bad_group_size_on_the_command_line_is_snakemakes_own_traceback():
    """As docs/cluster.md says: Snakemake refuses it before any profile is read; its traceback answers."""
    status, lines = _snakemake(
        "-n", "--workflow-profile", "profiles/slurm", "--group-components", "senteval_probes=0"
    )
    assert [line for line in lines if line][-1] == (
        "ValueError: Invalid group components definition: entries have to be defined as GROUP=COMPONENTS "
        "pairs (with COMPONENTS being a positive integer)"
    )
    assert status == 1 and not any(line.startswith("contrastlab:") for line in lines)


def test_the_profile_files_are_found_as_snakemake_finds_them(monkeypatch):
    """profiles/default unless a workflow profile is named; a --profile first; none with ``none``."""
    monkeypatch.chdir(REPO_ROOT)
    slurm = Path("profiles/slurm/config.yaml")
    assert profile_files(["-n"]) == [Path("profiles/default/config.yaml")]
    assert profile_files(["-n", "--workflow-profile", "profiles/slurm"]) == [slurm]
    assert profile_files(["-n", "--workflow-profile", "slurm-gres"]) == [
        Path("profiles/slurm-gres/config.yaml")
    ]
    assert profile_files(["--profile", "profiles/slurm", "--workflow-profile", "none"]) == [slurm]
    assert profile_files(["--workflow-profile", "none"]) == []


def test_plain_snakemake_given_a_folder_for_its_config_file_says_so_in_one_line(tmp_path):
    """A folder for a config file: Snakemake's own answer is an IsADirectoryError traceback."""
    line = _refused("profiles/default", f"--configfile={tmp_path}", "-n")
    assert line == f"contrastlab: config file {tmp_path} is a folder; {FIX}"


@pytest.mark.fault(
    "a config file that is not YAML (`a: [1,`): plain `snakemake -n`, `make plan`, `make add-seeds` (G15)",
    "one contrastlab: line naming the file, its line and column and the fix (no traceback)",
)
@pytest.mark.parametrize("command", ["snakemake", "plan", "add-seeds"])
def test_a_config_file_that_is_not_yaml_is_named_with_its_line_and_column(tmp_path, command, observed):
    """Snakemake's own answer names neither file nor line; the scripts' was PyYAML's traceback."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [1,\n")
    if command == "snakemake":
        status, lines = _snakemake("-n", "--configfile", str(bad), "--cores", "1")
        output = "\n".join(lines)
    else:
        done = _make(command, f"CONFIG={bad}")
        status, output = done.returncode, done.stdout + done.stderr
    said = [line for line in output.splitlines() if line.startswith("contrastlab:")]
    observed(said[0] if said else output[-300:])
    assert status != 0 and len(said) == 1, output
    prefix = "contrastlab: " + ("" if command == "snakemake" else f"{command}: ")
    assert said[0].startswith(f"{prefix}config file {bad} is not valid YAML: "), said
    assert said[0].endswith(
        " at line 2, column 1; fix it there, or pass another --configfile "
        "(config.yaml, config/demo.yaml, config/cpu.yaml)"
    ), said
    assert "Traceback" not in output and "not valid JSON or YAML" not in output


@pytest.mark.parametrize(
    ("text", "key", "lines"),
    [
        ("training:\n  lr: 1.0e-4\n  lr: 3.0e-5\n", "training.lr", "2 and 3"),
        ("seeds: [42]\ntraining: {lr: 1.0e-4}\nseeds: [1, 2]\n", "seeds", "1 and 3"),
        ("x:\n  a:\n    m: {cl: {hp: {tau: 0.05, tau: 0.5}}}\n", "x.a.m.cl.hp.tau", "3 and 3"),
    ],
)
def test_a_key_written_twice_is_named_in_one_line(tmp_path, text, key, lines):
    """YAML keeps the last of two equal keys: an appended ``seeds:`` or ``training:`` block replaced the
    first one unsaid (the whole block, not its keys), changing what ran."""
    bad = tmp_path / "twice.yaml"
    bad.write_text(text)
    line = (
        f"config file {bad}: key {key} is written twice (lines {lines}); YAML would keep only the last: "
        "keep one of them"
    )
    assert configfile_problem(["--configfile", str(bad)]) == line
    assert refused(cl_config.load, bad) == line


def test_a_merge_key_override_is_no_key_written_twice(tmp_path):
    """``<<: *anchor`` then a key of the anchor's: YAML's override, not a repeat (the check reads the
    document before its merges are flattened)."""
    merged = tmp_path / "merged.yaml"
    merged.write_text("base: &b {x: 1}\nother:\n  <<: *b\n  x: 2\n")
    assert read_config(merged) == {"base": {"x": 1}, "other": {"x": 2}}


@pytest.mark.parametrize("command", ["snakemake", "plan"])
def test_a_config_file_holding_no_keys_is_named_in_one_line(tmp_path, command):
    """A YAML list at its top: Snakemake's answer named no file, and make plan's was dict()'s own error."""
    bad = tmp_path / "list.yaml"
    bad.write_text("- seeds: [42]\n")
    if command == "snakemake":
        status, lines = _snakemake("-n", "--configfile", str(bad), "--cores", "1")
    else:
        done = _make(command, f"CONFIG={bad}")
        status, lines = done.returncode, done.stderr.splitlines()[:1]
    prefix = "contrastlab: " + ("" if command == "snakemake" else f"{command}: ")
    assert status != 0 and lines[-1] == (
        f"{prefix}config file {bad} holds no key: value lines at its top level; write the config's keys "
        "there (as config.yaml does), or pass another --configfile (config.yaml, config/demo.yaml, "
        "config/cpu.yaml)"
    ), lines


@pytest.mark.parametrize("text", [None, "sedes: [1]\n"])  # no file; a key the schema does not know
def test_make_add_seeds_refuses_a_config_that_does_not_load_in_one_line(tmp_path, text):
    bad = tmp_path / "bad.yaml"
    if text:
        bad.write_text(text)
    done = _make("add-seeds", f"CONFIG={bad}")
    said = [line for line in done.stderr.splitlines() if not line.startswith("make: ")]
    assert (
        done.returncode == 2 and len(said) == 1 and said[0].startswith("contrastlab: add-seeds: config ")
    ), said


def test_make_monitor_refuses_a_config_the_schema_does_not_know_in_one_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("sedes: [1]\n")
    done = _make("monitor", f"CONFIG={bad}", "PORT=1")
    said = [line for line in done.stderr.splitlines() if not line.startswith("make: ")]
    start = "contrastlab: monitor: config key sedes: unknown key (typo?); allowed here: analytic_figures,"
    assert done.returncode != 0 and len(said) == 1 and said[0].startswith(start), said
    assert "TensorBoard" not in done.stdout


@pytest.mark.fault(
    "a target written after --configfile: `snakemake --configfile config/demo.yaml all` (G15)",
    "one contrastlab: line saying the word is read as a config file, and where a target goes",
)
def test_a_target_after_the_config_file_is_named_as_one_in_one_line(observed):
    """--configfile takes every word after it: Snakemake read ``all`` as a second config file."""
    line = _refused("profiles/default", "-n", "--configfile", "config/demo.yaml", "all")
    observed(line)
    assert line == (
        "contrastlab: 'all' after --configfile config/demo.yaml is read as a config file; if it is a target, "
        "put it before --configfile (snakemake all --configfile config/demo.yaml) or end the config files "
        "with -- (--configfile config/demo.yaml -- all)"
    )


@pytest.mark.fault(
    "a dotted --config name: `snakemake --config training.lr=1e-4`",
    "one contrastlab: line with the nested form Snakemake takes (its answer is a traceback)",
)
def test_a_dotted_config_name_gets_the_nested_form_in_one_line(observed):
    line = _refused(
        "profiles/default", "-n", "--configfile", "config/demo.yaml", "--config", "training.lr=1e-4"
    )
    observed(line)
    assert line == (
        "contrastlab: --config training.lr=1e-4: Snakemake's --config takes top-level names only; write a "
        "nested key as --config 'training={lr: 1e-4}' (merged into the config file's training)"
    )
    assert config_entry_problem(["--config", "a.b.c=1", "x=2"]).endswith(
        "--config 'a={b: {c: 1}}' (merged into the config file's a)"
    )
    # a target holding a space and ';' stays one word of both printed fixes (reliability 9, H5)
    said = configfile_problem(["--configfile", "config/demo.yaml", "a b;touch PWNED"])
    first, ended = (part.partition(")")[0] for part in said.split(" (")[1:3])
    assert shlex.split(first) == ["snakemake", "a b;touch PWNED", "--configfile", "config/demo.yaml"]
    assert shlex.split(ended) == ["--configfile", "config/demo.yaml", "--", "a b;touch PWNED"]
    # a value holding a quote and a command stays one word of the printed fix (reliability 9, H5)
    said = config_entry_problem(["--config", "training.lr=1';touch PWNED;'"])
    fix = said.partition("write a nested key as ")[2].partition(" (merged")[0]
    assert shlex.split(fix) == ["--config", "training={lr: 1';touch PWNED;'}"]
    assert config_entry_problem(["--config", "seeds=[1]", "select={experiments: [nie2023]}"]) is None
    assert config_entry_problem(["--config", "lr"]) == (
        "--config lr: not a name=value pair; write --config <name>=<value> (a YAML value)"
    )


def test_the_configfile_check_reads_the_command_line_as_snakemake_does(tmp_path, capsys):
    present, missing = tmp_path / "c.yaml", tmp_path / "m.yaml"
    present.write_text("{}\n")
    argv = ["-n", "--configfiles", str(present), str(missing), "--cores", "1"]
    assert configfile_problem(argv) == f"config file {missing} does not exist; {FIX}"
    assert configfile_problem([f"--configfile={present}", "-n", "all"]) is None
    assert configfile_problem(["--config", f"x={missing}"]) is None  # a --config value names no config file
    assert configfile_problem(["-q", "tests/config", "--no-such-option"]) is None  # not Snakemake's argv
    bad = tmp_path / "tab.yaml"
    bad.write_text("a:\n  b: 1\n\tc: 2\n")  # a tab in the indentation (Snakemake's own guess of a cause)
    assert configfile_problem([f"--configfile={present}", "--configfile", str(bad)]).startswith(
        f"config file {bad} is not valid YAML: "
    )
    assert ", column 1; fix it there" in configfile_problem(["--configfile", str(bad)])
    assert capsys.readouterr() == ("", "")  # and nothing printed for it


def test_the_image_variable_is_dropped_without_apptainer_and_checked_with_it():
    environ = {"CONTRASTLAB_IMAGE": "a b", "HOME": "/h"}
    check_image(environ, {DeploymentMethod.CONDA})
    assert environ == {"HOME": "/h"}
    environ = {"CONTRASTLAB_IMAGE": "container/contrastlab.sif"}
    check_image(environ, {DeploymentMethod.APPTAINER})
    assert environ == {"CONTRASTLAB_IMAGE": "container/contrastlab.sif"}
    for value, flaw in [("", "it is empty"), ("docker://x/y:1\t", "it holds whitespace")]:
        message = refused(check_image, {"CONTRASTLAB_IMAGE": value}, {DeploymentMethod.APPTAINER})
        assert message.startswith(f"CONTRASTLAB_IMAGE={value!r} is not an image address ({flaw}); ")


@pytest.mark.fault(
    "scripts/add_seeds.py --configfile '<dir>/my configs/it's demo.yaml'", "printed and run as one word"
)
def test_add_seeds_prints_and_runs_the_configfile_as_one_word(tmp_path, monkeypatch, capsys, observed):
    import runpy

    from contrastlab.report import claims

    step = dict(experiment="nie2023", backbone="tiny-bert", methods=["cl"], seeds=[42, 43], new=[43])
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


# --- C5: the suite's own make runs never reach the user's environment -------------------------------------


@pytest.mark.fault(
    "`make test VENV=<venv>`: a test's `make -o .venv/bin/.installed restore` inherits VENV (C5)",
    "no venv re-created, nothing installed: one contrastlab: line, and the tests' make drops MAKEFLAGS",
)
def test_a_make_under_another_venv_never_reinstalls_it(tmp_path, monkeypatch, observed):
    venv = tmp_path / "venv"  # as `make test VENV=<venv>` hands it down
    inherited = dict(make_env(), MAKEFLAGS=f" -- VENV={venv}", MAKELEVEL="1")
    inherited.update(HTTP_PROXY="http://127.0.0.1:9", HTTPS_PROXY="http://127.0.0.1:9", NO_PROXY="")
    argv = [MAKE, "-s", "-o", ".venv/bin/.installed", "restore", "CONFIG=config/demo.yaml"]
    planned = subprocess.run(
        [argv[0], "-n", *argv[1:]], cwd=REPO_ROOT, env=inherited, capture_output=True, text=True
    )
    said = planned.stdout.splitlines()
    assert not [line for line in said if " -m venv " in line or "scripts/install.py" in line], said
    refusal = (
        f"contrastlab: VENV={venv} is not this checkout's .venv and its install is missing or out of date; "
        f"run make install VENV={venv} to install into it (make installs elsewhere only when asked)"
    )
    assert [line for line in said if "contrastlab:" in line] == [f'echo "{refusal}" >&2; exit 2'], said
    done = subprocess.run(argv, cwd=REPO_ROOT, env=inherited, capture_output=True, text=True, timeout=60)
    observed(done.stderr.strip())
    assert (done.returncode, done.stderr.splitlines()[0]) == (2, refusal), done.stderr
    assert not venv.exists()
    # the tests' own make calls: none of it reaches them
    monkeypatch.setenv("MAKEFLAGS", f" -- VENV={venv}")
    monkeypatch.setenv("MAKELEVEL", "1")
    assert not {"MAKEFLAGS", "MAKELEVEL"} & set(make_env())
    dry = subprocess.run(
        [*make_command("-n", "-s", "restore")], cwd=REPO_ROOT, env=make_env(), capture_output=True, text=True
    )
    assert dry.returncode == 0 and dry.stdout.splitlines() == [
        f'{Path(sys.executable).parent}/python scripts/restore.py --configfile "$CONFIG"'
    ], dry.stdout + dry.stderr


def test_every_test_that_starts_make_builds_its_command_with_the_shared_helper():
    """A ``make`` argv written out elsewhere in the suite would inherit MAKEFLAGS again (C5)."""
    pattern = re.compile(r"""[\[(]\s*["']make["']""")
    tests = Path(__file__).resolve().parents[1]
    written = [
        f"{path.relative_to(tests)}:{n}"
        for path in tests.rglob("*.py")
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert written == [], written


# --- the SLURM submission: a config value holding a quote reaches the job unchanged ----------------------


@pytest.mark.parametrize(
    "override",
    [
        "results_dir=/scratch/my results; it's (new)",
        "data={wiki_path: 'a b;c(d).txt'}",
        "experiments={nie2023: {title: 'Nie''s ''own'' run'}}",  # YAML's doubled quote: one kind only
    ],
    ids=["quote-space-semicolon", "yaml-single-quotes", "doubled-quotes"],
)
def test_a_config_value_holding_a_quote_reaches_the_slurm_job_unchanged(tmp_path, override):
    """Through ``sbatch --wrap="..."`` and two shells, the words reach the job and parse back unchanged."""
    configfile = tmp_path / "my configs" / "it's demo.yaml"
    recorder = tmp_path / "record"  # stands for sbatch, then for the job's python: prints its arguments
    recorder.write_text("#!/bin/sh\nprintf '%s\\0' \"$@\"\n")
    recorder.chmod(0o755)
    job = " ".join(
        [str(recorder), format_cli_arg("--config", [override]), format_cli_arg("--configfiles", [configfile])]
    )
    escaped = job.replace('"', '\\"')  # the plugin's escaping (run_job), word for word
    call = f'{recorder} --parsable --wrap="{escaped}"'
    submitted = subprocess.run(call, shell=True, capture_output=True, text=True, check=True).stdout
    (wrap,) = [arg.removeprefix("--wrap=") for arg in submitted.split("\0") if arg.startswith("--wrap=")]
    received = subprocess.run(["sh", "-c", wrap], capture_output=True, text=True, check=True).stdout
    assert received.split("\0")[:-1] == ["--config", override, "--configfiles", str(configfile)]
    key, _, value = override.partition("=")
    assert parse_config([received.split("\0")[1]]) == {key: yaml.safe_load(value) if "{" in value else value}
    cl_config.validate(_config(override))  # nothing here is refused
    check_command_paths([str(configfile)], str(tmp_path))
    check_config_words([override])


#: A ``--config`` word whose value holds only ``'`` (accepted) but whose YAML quotes it with ``"``: the word
#: holds both quotes, and ``repr()`` writes each ``'`` as ``\'`` inside single quotes, where a shell reads
#: the end of the quoting (the ``#`` makes the rest of the job command a comment).
MIXED = 'experiments={nie2023: {title: "x\' ; touch %s #"}}'


@pytest.mark.fault(
    "a --config word holding both ' and \" (its value only ') through the job command (G12)",
    "refused in one line naming the word, before any job (a SLURM job's shell would run the rest as code)",
)
def test_a_config_word_holding_both_quotes_is_refused_before_any_job(tmp_path, observed):
    """The value passes, but the word would run code through ``--wrap``: refused in one line."""
    marker = tmp_path / "PWN"
    word = MIXED % marker
    cl_config.validate(_config(word))  # the value alone is safe
    escaped = format_cli_arg("--config", [word]).replace('"', '\\"')
    wrap = subprocess.run(f'printf %s "{escaped}"', shell=True, capture_output=True, text=True).stdout
    subprocess.run(["sh", "-c", f"true {wrap}"], capture_output=True, cwd=tmp_path)
    assert marker.exists()  # what a SLURM job would have done
    marker.unlink()
    status, lines = _snakemake("-n", "--configfile", "config/demo.yaml", "--config", *folders(tmp_path), word)
    said = [line for line in lines if line.startswith("contrastlab:")]
    observed(said[0] if said else f"exit {status}: {lines[-1]}")
    assert status == 1 and said == [
        f"contrastlab: --config word {word!r}: holds both ' and \", which the job command's quoting cannot "
        "carry (Snakemake writes the word with repr(): a job's shell would run the rest as code); write "
        "its YAML strings with one kind of quote (inside '...' a ' is written '')"
    ], lines[-5:]
    assert not marker.exists()


def test_only_snakemake_running_another_checkouts_workflow_forgets_the_imported_library(tmp_path):
    """The imported library is forgotten for another checkout's Snakefile, and only there."""
    from contrastlab.config.invocation import library_of_another_checkout

    (tmp_path / "copy" / "src").mkdir(parents=True)
    elsewhere = ["-s", str(tmp_path / "copy" / "Snakefile"), "-n"]
    here = ["-s", str(REPO_ROOT / "Snakefile"), "-n"]
    assert library_of_another_checkout(elsewhere, "/venv/bin/snakemake")
    assert library_of_another_checkout(elsewhere, "/venv/lib/snakemake/__main__.py")
    assert not library_of_another_checkout(here, "/venv/bin/snakemake")
    assert not library_of_another_checkout(elsewhere, "/venv/bin/pytest")


@pytest.mark.fault(
    "a cell outside the config asked for by path: `snakemake results/demo/.../seed7/train_log.jsonl`",
    "one contrastlab: line naming the cell, why, and the key to set (was a raw KeyError or no rule)",
)
@pytest.mark.parametrize("seed", [7])
def test_a_cell_outside_the_config_asked_for_by_path_is_one_line(tmp_path, seed, observed):
    target = f"{tmp_path}/results/checkpoints/nie2023/tiny-bert/cl/seed{seed}/train_log.jsonl"
    demo = ("--configfile", "config/demo.yaml", "--config", *folders(tmp_path))
    status, lines = _snakemake("-n", *demo, "--", target)
    observed(lines[-1])
    assert lines[-1] == (
        f"contrastlab: nie2023/tiny-bert/cl/seed{seed} is not a cell of this config: seed {seed} is not one "
        f"of its seeds (42); set seeds: [42, {seed}]"
    )
    assert status == 1 and not (tmp_path / "results").exists()


def test_why_a_path_is_not_a_cell_names_the_key_to_change():
    config = cl_config.load(REPO_ROOT / "config" / "demo.yaml")
    config["select"] = {"backbones": ["minilm"]}
    grid = cl_config.Grid(config)

    def why(experiment: str, backbone: str, method: str, seed: int) -> str:
        said = grid.experiment(experiment).not_a_cell(backbone, method, seed)
        path, _, reason = said.partition(" is not a cell of this config: ")
        assert path == f"{experiment}/{backbone}/{method}/seed{seed}", said
        return reason

    assert why("nie", "tiny-bert", "cl", 42).startswith("no experiment 'nie'; choose from nie2023, li2024")
    assert why("li2024", "minilm", "mmhe", 42) == (
        "'minilm' is not one of its backbones (tiny-bert); add it to experiments.li2024.backbones"
    )
    assert why("li2024", "tiny-bert", "mhe", 42) == "li2024 has no method 'mhe'; choose from mmhe"
    assert why("macl_cifar10", "resnet18-w8", "ntxent-bs64", 1) == (
        "seed 1 is not one of its seeds (42, 43); set experiments.macl_cifar10.seeds: [42, 43, 1]"
    )
    assert why("nie2023", "tiny-bert", "cl", 42) == (
        "the config's select leaves it out ({'backbones': ['minilm']}); widen select"
    )
