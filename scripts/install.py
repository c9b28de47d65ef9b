"""Install the project into the virtual environment this interpreter runs in, every package checked
against the sha256 of requirements.lock: uv when it can, else pip.

    .venv/bin/python scripts/install.py                (what `make install` runs)
    .venv/bin/python scripts/install.py --cuda 12.6    (`make install CUDA=12.6`: another torch build)
    .venv/bin/python scripts/install.py --lock         (`make lock-deps`: requirements*.lock anew)

requirements.lock is ``.[workflow,offline-models,dev]`` resolved under the exact pins of constraints.txt,
with every sha256 the registry lists for each pinned release (``uv pip compile --universal
--generate-hashes``); tests/test_install.py checks that it pins exactly what constraints.txt pins. Both
installers install it with ``--require-hashes``, then the project itself (editable, ``--no-deps``). The
few packages that come only as source (and the project) are built without build isolation, with the
lock's own setuptools, installed first: an isolated build would fetch an unchecked one. uv unpacks the
~200 wheels in parallel (torch with its CUDA libraries is 6 GB unpacked): about 30 s on the 2-core
machine where pip takes about 3 minutes. uv reads neither pip.conf nor the ``PIP_*`` variables, so pip's
package sources (index, extra indexes, find-links, CA bundle) are handed to it; a machine set
up for pip needs nothing else. uv itself is installed by pip under its hash in the lock. If uv cannot be
installed or fails, pip does the install, after one line saying why. cffconvert (the CITATION.cff check)
goes into an environment of its own inside this one, ``.venv/cffconvert``, from requirements-cffconvert.lock
(under constraints-cffconvert.txt): it requires jsonschema < 4, the project >= 4.20.

Another torch build (``--cuda``) comes from PyTorch's own index, whose files the registry's hashes do not
describe: torch, torchvision and their CUDA libraries are then pinned but not hash-checked (one line says
so), everything else is checked as above.

Both leave every installed module compiled (``.pyc``), and the project's ``src/`` too: pip compiles what
it installs, uv only with ``--compile-bytecode``. Where ``PYTHONDONTWRITEBYTECODE`` is set (as on the
2-core machines) Python never writes a ``.pyc`` itself, so without them every interpreter compiles each
module it imports from source: 10 of the 16 s a toy training job took, in every job of every run.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXTRAS = ("workflow", "offline-models", "dev")
EDITABLE = "-e", "."
CONSTRAINTS = ROOT / "constraints.txt"
LOCK = ROOT / "requirements.lock"

# The project's own modules (an editable install: not under site-packages, so neither installer compiles
# them); a stale .pyc after an edit is recompiled in memory, never used.
OWN_SOURCES = ROOT / "src"

# Where a torch build for another CUDA version comes from (``--cuda 12.6``: PyTorch's own index; uv knows
# it as ``--torch-backend cu126``), and the file in the environment that remembers the choice, so that a
# later ``make install`` (constraints changed) keeps the build the machine needs.
TORCH_INDEX = "https://download.pytorch.org/whl/{backend}"
CUDA_CHOICE = Path(sys.prefix) / ".contrastlab-cuda"
# The packages whose versions the torch build decides (its CUDA libraries, its triton): left unpinned for
# another build, whose own requirements pin them.
CUDA_STACK = re.compile(r"^(nvidia-|cuda-|triton\b)", re.IGNORECASE)
TORCH = ("torch", "torchvision")

# cffconvert (`cffconvert --validate` of CITATION.cff, tests/test_citation.py) requires jsonschema < 4, the
# project >= 4.20: it gets a small environment of its own inside this one, under its own exact pins.
CFFCONVERT_CONSTRAINTS = ROOT / "constraints-cffconvert.txt"
CFFCONVERT_LOCK = ROOT / "requirements-cffconvert.lock"
CFFCONVERT_ENV = Path(sys.prefix) / "cffconvert"

# pip setting -> the uv option taking the same values, one option per value.
PIP_TO_UV = {"index-url": "--default-index", "extra-index-url": "--index", "find-links": "--find-links"}

# A lock's requirement line: ``name==version`` (then markers, then `` \`` before its hashes).
ENTRY = re.compile(r"(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>[^\s;\\]+)")


def pip_settings() -> dict[str, str]:
    """pip's effective settings: :func:`parse_pip_config` of ``pip config list``."""
    listed = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True, check=False
    ).stdout
    return parse_pip_config(listed)


def parse_pip_config(listed: str) -> dict[str, str]:
    """``pip config list``'s lines (``global.find-links='/opt/wheels'``; files first, then the ``PIP_*``
    variables as ``:env:.``, the later winning as in pip) as {setting: value}, without the section."""
    settings: dict[str, str] = {}
    for line in listed.splitlines():
        key, _, value = line.partition("=")
        section, _, name = key.rpartition(".")
        if section in ("global", "install", ":env:") and value:
            settings[name] = " ".join(shlex.split(value))
    return settings


def uv_options(settings: dict[str, str]) -> list[str]:
    """The options of ``uv pip install`` that make it find packages where pip would. pip's constraint
    files are not handed over: the lock pins every package exactly (the torch build's step: torch,
    torchvision and the other pins), and under ``--require-hashes`` uv refuses a constraint that is not
    ``==`` (a machine's cap such as ``torch<=2.14.1``)."""
    options = []
    for name, option in PIP_TO_UV.items():
        for value in settings.get(name, "").split():
            options += [option, value]
    if settings.get("extra-index-url") or settings.get("find-links"):
        # pip takes the best version over all its sources; uv's default stops at the first index that
        # has the package.
        options += ["--index-strategy", "unsafe-best-match"]
    return options


def uv_command(settings: dict[str, str], python: str = sys.executable) -> list[str]:
    """``uv pip install`` into ``python``'s environment from pip's sources, compiling what it installs as
    pip does."""
    uv = [sys.executable, "-m", "uv", "pip", "install", "--python", python, "--compile-bytecode"]
    return [*uv, *uv_options(settings)]


def pip_command(python: str = sys.executable) -> list[str]:
    return [python, "-m", "pip", "install", "-q"]


def normalised(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def lock_entries(text: str) -> list[tuple[str, str, str]]:
    """A lock's entries in order, as (normalised name, version, the entry's lines: the requirement with
    its markers, its hashes and uv's annotations)."""
    entries: list[list[str]] = []
    for line in text.splitlines(keepends=True):
        match = ENTRY.match(line)
        if match:
            entries.append([normalised(match["name"]), match["version"], line])
        elif entries:
            entries[-1][2] += line
    return [(name, version, lines) for name, version, lines in entries]


def write_entries(lock: Path, keep: Callable[[str], bool], path: Path) -> Path:
    """The entries of ``lock`` whose name ``keep`` accepts, hashes included, written to ``path``."""
    kept = [lines for name, _, lines in lock_entries(lock.read_text()) if keep(name)]
    path.write_text("".join(kept))
    return path


def torch_build_package(name: str) -> bool:
    """Whether a (normalised) package comes with the torch build: torch, torchvision, the CUDA stack."""
    return name in TORCH or CUDA_STACK.match(name) is not None


def lock_steps(installer: list[str], lock: Path, folder: Path, backend: str | None = None) -> list[list[str]]:
    """The hash-checked installs of ``lock`` under ``installer`` (uv's or pip's ``install``): its
    setuptools first, then the whole lock built without isolation, so that the packages that come only as
    source are built with that checked setuptools. With a torch ``backend``, the lock without the
    packages of the torch build and without resolving (torch comes next, from elsewhere)."""
    stem = folder / lock.stem
    setuptools = write_entries(lock, lambda name: name == "setuptools", Path(f"{stem}-setuptools.txt"))
    checked = [*installer, "--require-hashes", "--no-build-isolation"]
    if backend is None:
        whole = [*checked, "-r", str(lock)]
    else:
        rest = write_entries(lock, lambda name: not torch_build_package(name), Path(f"{stem}-{backend}.txt"))
        whole = [*checked, "--no-deps", "-r", str(rest)]
    return [[*installer, "--require-hashes", "-r", str(setuptools)], whole]


def install_steps(
    installer: list[str], torch_index: list[str], backend: str | None, folder: Path
) -> list[list[str]]:
    """Every install of ``make install`` in order: requirements.lock (:func:`lock_steps`); for another
    torch build, torch and torchvision at the lock's versions from ``torch_index`` (uv's
    ``--torch-backend``, pip's ``--extra-index-url``) under the other pins; the project, editable."""
    steps = lock_steps(installer, LOCK, folder, backend)
    if backend is not None:
        versions = {name: version for name, version, _ in lock_entries(LOCK.read_text())}
        pins = [f"{name}=={versions[name]}" for name in TORCH]
        steps.append([*installer, "-c", str(constraints_for(backend, folder)), *torch_index, *pins])
    return [*steps, [*installer, "--no-deps", "--no-build-isolation", *EDITABLE]]


def install_note(backend: str | None) -> str:
    """The line that says what the install checks."""
    if backend is None:
        return "contrastlab: installing requirements.lock: every package checked against its sha256"
    return (
        f"contrastlab: installing torch's {backend} build (make install CUDA=...): torch, torchvision and "
        "their CUDA libraries from PyTorch's index, pinned but not hash-checked; every other package "
        "checked against requirements.lock's sha256"
    )


def uv_environment(settings: dict[str, str]) -> dict[str, str]:
    env = dict(os.environ)
    if settings.get("cert"):
        env.setdefault("SSL_CERT_FILE", settings["cert"])  # pip's CA bundle (a proxy's certificate)
    return env


def torch_backend(cuda: str | None) -> str | None:
    """``"12.6"`` -> ``"cu126"``, ``"cpu"`` -> ``"cpu"``, None -> None (the registry's default build);
    anything else stops with one line."""
    if cuda is None or cuda == "":
        return None
    if cuda == "cpu":
        return "cpu"
    match = re.fullmatch(r"(\d+)\.(\d)", cuda)
    if match is None:
        sys.exit(
            f"contrastlab: CUDA={cuda!r} is not a CUDA version; use e.g. CUDA=12.6, CUDA=13.0 or CUDA=cpu"
        )
    return f"cu{match[1]}{match[2]}"


def constraints_for(backend: str | None, folder: Path | None = None) -> Path:
    """constraints.txt, or for another torch build a copy without the CUDA stack's pins (torch==2.14.1
    itself stays: it admits 2.14.1+cu126)."""
    if backend is None:
        return CONSTRAINTS
    kept = [line for line in CONSTRAINTS.read_text().splitlines() if not CUDA_STACK.match(line.strip())]
    path = Path(folder or sys.prefix) / f"constraints-{backend}.txt"
    path.write_text("\n".join(kept) + "\n")
    return path


def lock_commands(settings: dict[str, str]) -> list[tuple[list[str], str | None]]:
    """``uv pip compile`` of requirements.lock and requirements-cffconvert.lock, each with the text it
    reads on its standard input. From pip's default index alone, which lists every file of a release: an
    extra index or find-links may hold one wheel of it (this machine's do), and a lock from them would
    fit that machine only. The copies those sources hold are the same files, so they pass the check."""
    index = ["--default-index", settings["index-url"]] if settings.get("index-url") else []
    uv = [sys.executable, "-m", "uv", "pip", "compile", "--python", sys.executable, *index]
    options = ["--universal", "--generate-hashes", "--custom-compile-command", "make lock-deps"]
    extras = [option for extra in EXTRAS for option in ("--extra", extra)]
    project = [*uv, "pyproject.toml", *extras, "-c", CONSTRAINTS.name, *options, "-o", LOCK.name]
    cffconvert = [*uv, "-", "-c", CFFCONVERT_CONSTRAINTS.name, *options, "-o", CFFCONVERT_LOCK.name]
    return [(project, None), (cffconvert, "cffconvert\n")]


def run(command: list[str], env: dict[str, str] | None = None, stdin: str | None = None) -> bool:
    print("+", shlex.join(command), flush=True)
    return subprocess.run(command, cwd=ROOT, env=env, input=stdin, text=True, check=False).returncode == 0


def run_all(commands: list[list[str]], env: dict[str, str] | None = None) -> bool:
    """Each command in turn, up to the first that fails; True when all succeeded."""
    return all(run(command, env) for command in commands)


def options(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Install contrastlab into this environment.")
    parser.add_argument(
        "--cuda",
        default=None,
        help="a torch build for this CUDA version (12.6: drivers >= 525 and P100/V100 GPUs) or cpu; "
        "default: the package registry's build, or the one chosen before in this environment",
    )
    parser.add_argument(
        "--lock", action="store_true", help="write requirements.lock and requirements-cffconvert.lock anew"
    )
    return parser.parse_args(argv)


def chosen_cuda(cuda: str | None) -> str | None:
    """``--cuda`` (``make install CUDA=12.6``), remembered in the environment; else the earlier choice."""
    if cuda is None:
        return CUDA_CHOICE.read_text().strip() or None if CUDA_CHOICE.is_file() else None
    CUDA_CHOICE.write_text(cuda + "\n")
    return cuda


def install_uv() -> bool:
    """uv into this environment by pip, under its hash in requirements.lock."""
    entry = write_entries(LOCK, lambda name: name == "uv", Path(sys.prefix) / "requirements-uv.txt")
    return run([*pip_command(), "--require-hashes", "-r", str(entry)])


def main(argv: list[str] | None = None) -> int:
    chosen = options(argv)
    settings = pip_settings()
    if chosen.lock:
        # the first lock has no uv to install under its hash: uv at its pin then
        if not (install_uv() if LOCK.is_file() else run([*pip_command(), "-c", str(CONSTRAINTS), "uv"])):
            return 1
        env = uv_environment(settings)
        return 0 if all(run(command, env, stdin) for command, stdin in lock_commands(settings)) else 1
    backend = torch_backend(chosen_cuda(chosen.cuda))
    print(install_note(backend), flush=True)
    folder = Path(sys.prefix)
    if install_uv():
        torch_index = ["--torch-backend", backend] if backend else []
        steps = install_steps(uv_command(settings), torch_index, backend, folder)
        if run_all(steps, uv_environment(settings)):
            return finish(settings, uv=True)
        print("contrastlab: uv could not install the project; installing with pip instead", flush=True)
    else:
        print("contrastlab: uv is not installable here; installing with pip instead", flush=True)
    torch_index = ["--extra-index-url", TORCH_INDEX.format(backend=backend)] if backend else []
    if not run_all(install_steps(pip_command(), torch_index, backend, folder)):
        return 1
    return finish(settings, uv=False)


def finish(settings: dict[str, str], uv: bool) -> int:
    """After the project's install: its sources compiled, and cffconvert's environment."""
    if compile_own_sources() != 0:
        return 1
    return 0 if install_cffconvert(settings, uv) else 1


def compile_own_sources() -> int:
    return 0 if run([sys.executable, "-m", "compileall", "-q", "-j", "0", str(OWN_SOURCES)]) else 1


def install_cffconvert(settings: dict[str, str], uv: bool) -> bool:
    """requirements-cffconvert.lock, hash-checked, into :data:`CFFCONVERT_ENV` (made where absent): with
    uv where it installed the project, else (or where uv fails) with that environment's pip. True when it
    is installed."""
    python = CFFCONVERT_ENV / "bin" / "python"
    if not python.exists() and not run([sys.executable, "-m", "venv", str(CFFCONVERT_ENV)]):
        return False
    folder = Path(sys.prefix)
    steps = lock_steps(uv_command(settings, str(python)), CFFCONVERT_LOCK, folder)
    if uv and run_all(steps, uv_environment(settings)):
        return True
    return run_all(lock_steps(pip_command(str(python)), CFFCONVERT_LOCK, folder))


if __name__ == "__main__":
    sys.exit(main())
