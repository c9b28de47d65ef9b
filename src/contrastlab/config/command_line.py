"""Config strings a shell would interpret on the way to a job: refused in one line, naming the key.

Through ``profiles/slurm`` every job is submitted by the SLURM executor plugin as
``sbatch ... --wrap="<job command>"``, run with ``shell=True``, after escaping only ``"``. The job command
holds every ``--config`` override (Snakemake formats each with ``repr()``), the ``--configfile`` paths
(``shlex.quote``), the job's input paths (``--wait-for-files``, under ``results_dir``, ``resources_dir``,
the data paths, named after the experiments, backbones and methods) and the Snakefile's path, i.e. the
working directory. Inside those double quotes the submitting shell still reads:

- ``$`` (parameter and command substitution: ``$(touch x)`` runs on the submit host) and the backtick;
- ``\\`` (an escape there; before the plugin's ``\\"`` it closes the double quotes);
- ``"`` (escaped by the plugin, but after a ``\\`` it ends the quoting; and ``repr()`` of a string holding
  both ``'`` and ``"`` writes ``\\'`` inside single quotes, which the job's own shell reads as the end of
  the quoting);
- every character ``repr()`` escapes (``str.isprintable()`` is false: newline, tab, other control and
  non-printing characters): the job would receive a backslash sequence, not the string written, and a
  newline ends a line of the batch script.

Everything else is safe there: a value's spaces, ``;``, ``'``, ``&``, ``|``, ``(``, ``)``, ``*`` are literal
inside the double quotes and inside the single quotes ``repr()``/``shlex.quote`` put around each word (a
``'`` makes ``repr()`` use double quotes, where only the characters refused above are special). A key is
also refused with a ``'``: Snakemake passes a ``--config`` word that starts with a quote unquoted
(``is_quoted``), and ``make add-seeds``/the report print names inside single quotes.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from contrastlab.config.schema import ConfigError, key_path

#: Characters a shell reads inside ``sbatch --wrap="..."`` (and, for keys, ``'``); see the module's doc.
SHELL_SPECIAL = frozenset('$`\\"')
#: Characters a shell reads in an unquoted word (besides whitespace): the interpreter's path.
UNQUOTED_SPECIAL = frozenset("$`\\\"';&|<>()*?[")
FIX = (
    'which the SLURM submission\'s shell would interpret (sbatch --wrap="..." quotes the job command '
    'in double quotes); remove $, `, \\, " and control characters from it'
)


def unsafe_character(text: str, *, key: bool = False) -> str | None:
    """The first character of ``text`` a shell would interpret in a job's command line, or None."""
    special = SHELL_SPECIAL | {"'"} if key else SHELL_SPECIAL
    return next((ch for ch in text if ch in special or not ch.isprintable()), None)


def _strings(value: Any, path: tuple) -> Iterable[tuple[tuple, str, bool]]:
    """(path, string, whether it is a key) for every string key and value below ``value``."""
    if isinstance(value, Mapping):
        for name, item in value.items():
            if isinstance(name, str):
                yield path, name, True
            yield from _strings(item, (*path, name))
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from _strings(item, (*path, index))
    elif isinstance(value, str):
        yield path, value, False


def check_command_strings(config: Mapping[str, Any]) -> None:
    """Every string value and key of ``config`` is free of :func:`unsafe_character`: each can be given as
    a ``--config`` override, which lands in every job's command line, and the paths and names land there
    anyway. Raises :class:`ConfigError` (one line naming the dotted key) otherwise."""
    for path, text, is_key in _strings(config, ()):
        if (ch := unsafe_character(text, key=is_key)) is not None:
            what = f"the key {text!r}" if is_key else repr(text)
            raise ConfigError(f"config key {key_path(path)}: {what} holds {ch!r}, {FIX}")


def check_command_paths(configfiles: Iterable[str], workdir: str, interpreter: str = sys.executable) -> None:
    """The ``--configfile`` paths and the working directory (in the job command as the Snakefile's and
    Snakemake's own paths) pass :func:`unsafe_character`, and the ``interpreter``, which Snakemake writes
    unquoted (``<python> <script>``, ``<python> -m snakemake``), holds no whitespace or shell character
    either; :class:`ConfigError` naming the path if not."""
    for what, path in [*(("--configfile", str(p)) for p in configfiles), ("working directory", workdir)]:
        if (ch := unsafe_character(path)) is not None:
            raise ConfigError(f"{what} {path!r}: holds {ch!r}, {FIX.replace('from it', 'from the path')}")
    if (ch := next((c for c in interpreter if c.isspace() or c in UNQUOTED_SPECIAL), None)) is not None:
        raise ConfigError(
            f"Python {interpreter!r}: holds {ch!r}, and Snakemake starts every job's script with this path "
            "unquoted (snakemake/snakemake#2645): every job would fail; clone the repository and run make "
            "install at a path without spaces or shell characters (a .venv cannot be moved)"
        )


def check_config_words(words: Iterable[str] | None) -> None:
    """The ``--config`` words as given (each in every job's command, written with ``repr()``) pass
    :func:`unsafe_character` but for ``"`` (a YAML string's quote), and none holds both ``'`` and ``"``
    (see the module's doc); :class:`ConfigError` naming the word if not."""
    for word in words or ():
        if "'" in word and '"' in word:
            raise ConfigError(
                f"--config word {word!r}: holds both ' and \", which the job command's quoting cannot "
                "carry (Snakemake writes the word with repr(): a job's shell would run the rest as code); "
                "write its YAML strings with one kind of quote (inside '...' a ' is written '')"
            )
        if (ch := unsafe_character(word.replace('"', ""))) is not None:
            fix = FIX.replace("from it", "from the word")
            raise ConfigError(f"--config word {word!r}: holds {ch!r}, {fix}")


#: Set by the workflow for its jobs (rules/common.smk): the config files it read, as the shell words of
#: ``--configfile`` (:func:`configfile_words`), which the report's add-seeds lines name
#: (contrastlab.report.answer). An environment variable, not a rule's param: naming the same preset by
#: another path re-renders nothing.
CONFIGFILES_VARIABLE = "CONTRASTLAB_CONFIGFILES"
#: Set beside it: the run's ``--config`` words as given, shell-quoted, which the printed commands carry (a
#: run given ``results_dir=...`` is resumed and seeded there, not in its preset's folder).
CONFIG_WORDS_VARIABLE = "CONTRASTLAB_CONFIG_WORDS"


def configfile_words(configfiles: Iterable[str | os.PathLike], workdir: str | os.PathLike) -> str:
    """``configfiles`` as the shell-quoted words of ``--configfile``, each relative to ``workdir`` (where
    the printed commands run) when it lies inside it, else absolute.

    >>> print(configfile_words(["/w/config/demo.yaml", "/w/my it's.yaml", "/elsewhere/c.yaml"], "/w"))
    config/demo.yaml 'my it'"'"'s.yaml' /elsewhere/c.yaml
    """
    words = []
    for path in configfiles:
        path = Path(workdir, path)  # an absolute path stays itself
        inside = os.path.normpath(path).startswith(os.path.normpath(workdir) + os.sep)
        words.append(Path(os.path.relpath(path, workdir)).as_posix() if inside else os.path.normpath(path))
    return " ".join(shlex.quote(word) for word in words)
