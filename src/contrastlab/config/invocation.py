"""What the ``snakemake`` command line and its environment hand the workflow besides the config: the
``--configfile`` paths and ``CONTRASTLAB_IMAGE``, each checked where Snakemake would otherwise stop with a
traceback or a line naming neither.

The ``--configfile`` files are opened by Snakemake 9 itself, as it turns the command line into settings
(``ConfigSettings``, in ``snakemake.cli.args_to_api``), before it reads the Snakefile and outside its error
handling: a missing one ends in a 27-line ``FileNotFoundError`` traceback (docs/reliability.md G15). The
one code of the workflow's that runs earlier is its workflow profile: Snakemake reads profiles with YTE,
whose ``__definitions__`` run while the profile is parsed, after Snakemake has checked the command line
and before it opens any config file. So each of ``profiles/*/config.yaml`` calls
:func:`stop_on_missing_configfile`. Not covered: ``--workflow-profile none``, a profile of one's own
without that call, and a Snakemake that cannot import contrastlab (the profiles then say nothing).
The same hook names a profile file whose ``groups`` or ``group-components`` Snakemake would refuse with a
traceback once it applies the profile's values; the same values on the command line are refused by
Snakemake's parser before any profile is read, so they keep Snakemake's own answer.
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
import sys
from collections.abc import Collection, MutableMapping, Sequence
from pathlib import Path

import yaml

from contrastlab.config.schema import ConfigError
from contrastlab.paths import read_yaml, yaml_error_text

PRESETS = "(config.yaml, config/demo.yaml, config/cpu.yaml)"
#: What a config file's name ends with; a missing "config file" without one, after a first config file,
#: is a target written after --configfile.
CONFIG_SUFFIXES = (".yaml", ".yml", ".json")
#: The environment variable naming the image of `--sdm apptainer` runs (the Snakefile's `container:`).
IMAGE_VARIABLE = "CONTRASTLAB_IMAGE"


def _snakemake_arguments(argv: Sequence[str]):
    """Snakemake's reading of its command line ``argv`` (without the program), by its own parser; None when
    ``argv`` is not a command line Snakemake accepts (Snakemake then says so itself)."""
    from snakemake.cli import get_argument_parser

    try:  # quietly: argv may be another program's (Snakemake started from Python with its own argv)
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            return get_argument_parser().parse_known_args(list(argv))[0]
    except SystemExit:
        return None


def configfile_problem(argv: Sequence[str]) -> str | None:
    """The one line for the first ``--configfile`` of Snakemake's command line ``argv`` (without the
    program) that does not exist, is a folder or is not valid YAML (:func:`yaml_problem`); None when there
    is none, or when ``argv`` is not a command line Snakemake accepts."""
    args = _snakemake_arguments(argv)
    paths = [Path(p) for p in (args.configfile or [])] if args else []
    for k, path in enumerate(paths):
        if path.is_dir() or not path.exists():
            if k and not path.exists() and path.suffix not in CONFIG_SUFFIXES:
                # --configfile takes every word after it: a target written there reads as a config file;
                # the two fixes are commands to paste, each word quoted once
                target, before = str(path), str(paths[k - 1])
                first = shlex.join(["snakemake", target, "--configfile", before])
                ended = shlex.join(["--configfile", before, "--", target])
                return (
                    f"{target!r} after --configfile {before} is read as a config file; if it is a target, "
                    f"put it before --configfile ({first}) or end the config files with -- ({ended})"
                )
            what = "is a folder" if path.is_dir() else "does not exist"
            return f"config file {path} {what}; pass --configfile <an existing YAML file> {PRESETS}"
        if (problem := yaml_problem(path)) is not None:
            return problem
    return None


def read_config(path: str | Path) -> dict:
    """The config file ``path``'s keys; ConfigError (one line naming the file and the fix) for one that is
    not YAML or UTF-8 text (what the parser expected, at which line and column: Snakemake's answer names
    neither the file nor the line, and the scripts' was PyYAML's traceback) or holds no keys at its top
    level (Snakemake's answer to that names no file)."""
    try:  # one parse: the document's node answers the written-twice check, its objects the config
        with open(path, encoding="utf-8") as handle:
            loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)(handle)
            try:
                node = loader.get_single_node()
                # asked before the objects are built: building flattens `<<:` merges into the node
                twice = None if node is None else _key_written_twice(node, "")
                config = None if node is None else loader.construct_document(node)
            finally:
                loader.dispose()
    except (yaml.YAMLError, UnicodeDecodeError) as error:
        raise ConfigError(
            f"config file {path} is not valid YAML: {yaml_error_text(error)}; fix it there, or pass another "
            f"--configfile {PRESETS}"
        ) from None
    if not isinstance(config, dict):
        raise ConfigError(
            f"config file {path} holds no key: value lines at its top level; write the config's keys there "
            f"(as config.yaml does), or pass another --configfile {PRESETS}"
        )
    if twice:
        key, first, second = twice
        raise ConfigError(
            f"config file {path}: key {key} is written twice (lines {first} and {second}); YAML would keep "
            "only the last: keep one of them"
        )
    return config


def _key_written_twice(node: yaml.Node, at: str) -> tuple[str, int, int] | None:
    """(key path, line, line) of the first mapping key written twice under ``node``: YAML keeps the last
    one unsaid (an appended ``training:`` block replaces the first whole)."""
    if isinstance(node, yaml.SequenceNode):
        items = [(f"{at}[{k}]", item) for k, item in enumerate(node.value)]
    elif isinstance(node, yaml.MappingNode):
        items, lines = [], {}
        for key, value in node.value:
            name = f"{at}.{key.value}" if at else str(key.value)
            if isinstance(key, yaml.ScalarNode) and key.value != "<<":
                if key.value in lines:
                    return name, lines[key.value], key.start_mark.line + 1
                lines[key.value] = key.start_mark.line + 1
            items.append((name, value))
    else:
        return None
    return next(filter(None, (_key_written_twice(item, where) for where, item in items)), None)


def yaml_problem(path: str | Path) -> str | None:
    """The one line naming the config file ``path``'s problem (:func:`read_config`); None when it reads (or
    cannot be opened: its reader says why)."""
    try:
        read_config(path)
    except ConfigError as error:
        return str(error)
    except OSError:
        return None
    return None


def command_targets(argv: Sequence[str]) -> list[str]:
    """The targets Snakemake's command line ``argv`` (without the program) names; empty when it names none
    or is not a command line Snakemake accepts."""
    args = _snakemake_arguments(argv)
    return [str(t) for t in (getattr(args, "targets", None) or [])] if args else []


#: Snakemake's test of a ``--config`` name (``snakemake.cli.parse_config``): an identifier, ``-`` allowed.
_CONFIG_NAME = re.compile(r"[a-zA-Z_][\w-]*\w$")


def config_entry_problem(argv: Sequence[str]) -> str | None:
    """The one line for the first ``--config`` entry of ``argv`` that Snakemake would refuse with "Config
    entry must start with a valid identifier" (its traceback): a dotted name such as ``training.lr=1e-4``
    gets the nested form Snakemake takes, ``training={lr: 1e-4}``; None when every entry is a name=value."""
    args = _snakemake_arguments(argv)
    for entry in (args.config or []) if args else []:
        name, sep, value = entry.partition("=")
        if sep and _CONFIG_NAME.match(name):
            continue
        if sep and "." in name and all(re.match(r"[A-Za-z_][\w-]*$", part) for part in name.split(".")):
            head, *rest = name.split(".")
            nested = value
            for part in reversed(rest):
                nested = f"{{{part}: {nested}}}"
            # the fix is a command to paste: its word quoted once, whatever the value holds
            fix = shlex.join(["--config", f"{head}={nested}"])
            return (
                f"--config {entry}: Snakemake's --config takes top-level names only; write a nested key as "
                f"{fix} (merged into the config file's {head})"
            )
        return f"--config {entry}: not a name=value pair; write --config <name>=<value> (a YAML value)"
    return None


def profile_files(argv: Sequence[str]) -> list[Path]:
    """The profile files Snakemake reads for its command line ``argv`` (without the program): each
    ``--profile``, then the workflow profile, found as Snakemake finds them (``--workflow-profile`` as
    given, under ``profiles/``, or under the Snakefile's ``profiles/``; ``profiles/default`` when none is
    named); empty when ``argv`` is not a command line Snakemake accepts."""
    from snakemake.cli import get_profile_dir, resolve_snakefile

    args = _snakemake_arguments(argv)
    if args is None:
        return []
    named = [p for p in (args.profile or []) if p not in ("", "none")]
    if args.workflow_profile != "none":
        workflow = given = Path(args.workflow_profile) if args.workflow_profile else None
        snakefile = resolve_snakefile(args.snakefile, allow_missing=True)
        if snakefile is not None and (given is None or not given.is_file()):
            name = given or Path("default")
            candidates = [name, Path("profiles") / name]
            if isinstance(snakefile, Path):
                candidates.append(snakefile.parent / "profiles" / name)
            workflow = next((found for found in candidates if found.exists()), None)
        if workflow is not None:
            named.append(str(workflow))
    files = [entry[1] for entry in map(get_profile_dir, named) if entry is not None]
    return list(dict.fromkeys(files))


def _profile_entries(value: object) -> list[str]:
    """A profile's ``groups`` or ``group-components`` value as Snakemake hands it to its parser: a mapping
    as ``key=value`` words, a list word by word (``ProfileConfigFileParser``)."""
    if isinstance(value, dict):
        return [f"{key}={item}" for key, item in value.items()]
    return [str(item) for item in value] if isinstance(value, list) else [str(value)]


def profile_group_problem(argv: Sequence[str]) -> str | None:
    """The one line for the first ``groups`` or ``group-components`` entry of a profile file Snakemake reads
    for ``argv`` (:func:`profile_files`) that Snakemake's own parser refuses with a traceback
    ("Invalid group components definition"): the file, the key, the entry and the fix; None when all pass.
    The same value on the command line (``--group-components senteval_probes=0``) is refused by Snakemake
    as it parses its command line, before any profile is read, so no code of the workflow's sees it."""
    from snakemake.cli import parse_group_components, parse_groups

    fixes = {
        "group-components": (parse_group_components, "GROUP: N, N a whole number of 1 or more"),
        "groups": (parse_groups, "RULE: GROUP"),
    }
    for path in profile_files(argv):
        try:
            profile = read_yaml(path)
        except (OSError, ValueError, yaml.YAMLError):  # Snakemake's own profile parser says why
            continue
        for key, (parse, form) in fixes.items():
            if not isinstance(profile, dict) or profile.get(key) is None:
                continue
            for entry in _profile_entries(profile[key]):
                try:
                    parse([entry])
                except ValueError:
                    shown = entry.replace("=", ": ", 1)
                    return f"profile {path}: {key} entry {shown!r} is invalid; write {form} there"
    return None


def dry_run(argv: Sequence[str]) -> bool:
    """Whether Snakemake's command line ``argv`` (without the program) asks for a dry run (``-n``)."""
    args = _snakemake_arguments(argv)
    return bool(args and getattr(args, "dryrun", False))


def library_of_another_checkout(argv: Sequence[str], program: str) -> bool:
    """Whether this process is Snakemake's command line (``program``: its ``sys.argv[0]``, the
    ``snakemake`` script or ``snakemake/__main__.py``) running a workflow whose own ``src/`` is not where
    the imported ``contrastlab`` lies: a checkout copied elsewhere that still uses the first one's
    environment."""
    path = Path(program)
    if "snakemake" not in (path.name, path.parent.name) or "contrastlab" not in sys.modules:
        return False
    args = _snakemake_arguments(argv)
    own_src = (Path(getattr(args, "snakefile", None) or "Snakefile").parent / "src").resolve()
    library = Path(sys.modules["contrastlab"].__file__).resolve().parent.parent
    return own_src.is_dir() and library != own_src


def stop_on_missing_configfile(argv: Sequence[str] | None = None) -> None:
    """Exit with status 1 and one line (``contrastlab: ...``) for the first problem of the command line
    ``argv`` (default: this process's): :func:`configfile_problem`, :func:`config_entry_problem`,
    :func:`profile_group_problem`. Where the library imported here is another checkout's
    (:func:`library_of_another_checkout`), every ``contrastlab`` module leaves ``sys.modules``: the
    Snakefile imports its own ``src/``, whose loss modules' code is the rules' input."""
    argv = sys.argv[1:] if argv is None else argv
    problem = configfile_problem(argv) or config_entry_problem(argv) or profile_group_problem(argv)
    if library_of_another_checkout(argv, sys.argv[0]):
        for name in [name for name in sys.modules if name.split(".")[0] == "contrastlab"]:
            del sys.modules[name]
    if problem is not None:
        print(f"contrastlab: {problem}", file=sys.stderr)
        raise SystemExit(1)


def check_image(environ: MutableMapping[str, str], deployment: Collection[object]) -> None:
    """``CONTRASTLAB_IMAGE`` as the run needs it. Snakemake checks the image address of every rule on
    every run, a local one too (an address holding a space stops it with "Invalid singularity image URL
    containing whitespace."): without ``--sdm apptainer`` (``deployment`` holds no ``apptainer``) no job
    uses an image and the variable is dropped from ``environ``; with it, an empty address or one holding
    whitespace raises ConfigError, one line naming the variable."""
    value = environ.get(IMAGE_VARIABLE)
    if value is None:
        return
    if "apptainer" not in {str(method) for method in deployment}:
        del environ[IMAGE_VARIABLE]
    elif not value or any(ch.isspace() for ch in value):
        flaw = "it holds whitespace" if value else "it is empty"
        raise ConfigError(
            f"{IMAGE_VARIABLE}={value!r} is not an image address ({flaw}); set it to a docker:// address "
            "or an image file (docs/cluster.md), or unset it for contrastlab's own image"
        )
