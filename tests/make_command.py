"""``make`` as the tests run it: on this interpreter's environment, named on the command line, with nothing
inherited from a ``make`` the suite itself runs under.

GNU make hands its command-line variables to every make below it through ``MAKEFLAGS``: under ``make test
VENV=<venv>`` a test's ``make -o .venv/bin/.installed restore`` read ``VENV=<venv>``, no longer matched
its ``-o``, and re-created and reinstalled ``<venv>`` (docs/reliability.md C5). Every test that starts
``make`` builds its command with :func:`make_command` and its environment with :func:`make_env`."""

from __future__ import annotations

import os
import sys
from pathlib import Path

#: The program, for the tests that hand make something else on purpose (the C5 fault test).
MAKE = "make"
#: What a running make puts in the environment of the makes below it.
INHERITED = ("MAKEFLAGS", "MFLAGS", "GNUMAKEFLAGS", "MAKELEVEL", "MAKEOVERRIDES")
#: This interpreter's environment and its programs: the suite tests the recipes in the environment it runs in.
VENV = Path(sys.prefix)
BIN = Path(sys.executable).parent


def make_env() -> dict[str, str]:
    """This process's environment without the variables an outer make passes down."""
    return {k: v for k, v in os.environ.items() if k not in INHERITED}


def make_command(*args: str) -> list[str]:
    """``make *args`` with ``VENV`` and ``BIN`` this interpreter's and its install taken as done (``-o
    install``: CI installs before the suite; a test never installs)."""
    return [MAKE, "--no-print-directory", f"VENV={VENV}", f"BIN={BIN}", "-o", "install", *args]
