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

What is checked, and what is not: an installer checks a package's sha256 when it downloads it. uv keeps
what it downloaded unpacked in its cache and installs from there without checking again (a file changed
there is installed), and neither installer checks a package already installed (a lock line whose
hashes alone were edited installs). So after the install every installed file is checked against its
package's RECORD (the files changed since the last check: a first install hashes all 6.8 GB, 45 to
168 s on a loaded 2-core machine; later ones stat them, 3.5 s), and a package whose hashes in the lock
changed at the same version since the last checked install is reinstalled, which checks them
(``.venv/.contrastlab-installed.json`` keeps what that install checked). A RECORD rewritten with its
files, in the cache, is beyond this check; a download whose sha256 is not the lock's stops the install
in one line, without pip's fallback.

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
import base64
import concurrent.futures
import hashlib
import importlib.metadata
import json
import os
import re
import shlex
import subprocess
import sys
import sysconfig
import time
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

# What the last install that passed its checks left (:func:`write_installed`): when it was checked and the
# lock's hashes it installed. A later install re-checks only files changed since (their ctime) and
# reinstalls the packages whose hashes in the lock changed at the same version (:func:`changed_entries`).
INSTALLED_STAMP = Path(sys.prefix) / ".contrastlab-installed.json"
# uv's words for a download whose sha256 is not the lock's (its pip fallback cannot help there).
HASH_MISMATCH = re.compile(r"Hash mismatch for [`']?(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==")

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


def lock_hashes(text: str) -> dict[str, list[str]]:
    """A lock's (normalised) packages -> [version, its sha256s sorted]."""
    return {
        name: [version, *sorted(re.findall(r"--hash=sha256:([0-9a-f]{64})", lines))]
        for name, version, lines in lock_entries(text)
    }


def changed_entries(lock: Path, stamp: Path = INSTALLED_STAMP) -> list[str]:
    """The packages of ``lock`` at the version the last checked install (``stamp``) installed but with
    other hashes: an installer keeps an installed release and checks nothing, so these are reinstalled,
    which checks the lock's hashes against the files (an edited lock line fails there). No stamp: none."""
    try:
        before = json.loads(stamp.read_text())["lock"]
    except (OSError, ValueError, KeyError, TypeError):
        return []
    now = lock_hashes(lock.read_text())
    return [
        name
        for name, entry in now.items()
        if name in before and before[name][0] == entry[0] != "" and before[name] != entry
    ]


def _sha256(path: Path) -> str | None:
    """A file's sha256 as RECORD writes it (urlsafe base64, no padding); None for a file that is gone."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
    except FileNotFoundError:
        return None
    return base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode()


def record_mismatches(paths: list[str], since: float = 0.0) -> tuple[list[str], int]:
    """The installed files of the distributions on ``paths`` whose sha256 is not the one their RECORD
    lists, as ``"<package> <version>: <file>"``, and how many files were hashed. Only files present and
    changed (ctime) after ``since`` are hashed: the whole environment once (6.8 GB, 39,562 files: 45 to
    168 s on a 2-core machine under load), then what an install touched (3.5 s to stat them all): a file
    linked from uv's cache is new to the environment, and a file changed in place, through a link or
    not, has a new ctime."""
    todo = []
    for dist in importlib.metadata.distributions(path=paths):
        for file in dist.files or ():
            if file.hash is None or file.hash.mode != "sha256":
                continue
            path = Path(file.locate())
            try:
                if path.stat().st_ctime < since:
                    continue
            except FileNotFoundError:
                continue
            todo.append((f"{dist.metadata['Name']} {dist.version}: {file}", path, file.hash.value))
    with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 2) as pool:  # hashlib frees the GIL
        digests = list(pool.map(_sha256, [path for _, path, _ in todo]))
    bad = [label for (label, _, want), got in zip(todo, digests, strict=True) if got not in (None, want)]
    return bad, len(todo)


def check_installed(lock: Path = LOCK, stamp: Path = INSTALLED_STAMP, paths: list[str] | None = None) -> bool:
    """After an install: every file installed or changed since the last check matches its package's
    RECORD (uv installs from its cache, trusting bytes it checked only when it downloaded them); True
    and the stamp written (:data:`INSTALLED_STAMP`) when they do, else one line naming the first file.
    ``paths``: where the distributions are (default: this interpreter's site-packages)."""
    started = time.time()
    try:
        since = float(json.loads(stamp.read_text())["checked_at"])
    except (OSError, ValueError, KeyError, TypeError):
        since = 0.0
    paths = paths or list(dict.fromkeys([sysconfig.get_path("purelib"), sysconfig.get_path("platlib")]))
    bad, hashed = record_mismatches(paths, since)
    if bad:
        package = bad[0].split(" ", 1)[0]
        print(
            f"contrastlab: {len(bad)} installed file(s) differ from their package's RECORD (first: "
            f"{bad[0]}): a damaged or changed uv cache; run "
            f"{shlex.join([sys.executable, '-m', 'uv', 'cache', 'clean', package])}, then make install again",
            flush=True,
        )
        return False
    stamp.write_text(json.dumps({"checked_at": started, "lock": lock_hashes(lock.read_text())}) + "\n")
    print(f"contrastlab: {hashed} installed file(s) match their package's RECORD", flush=True)
    return True


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
    installer: list[str],
    torch_index: list[str],
    backend: str | None,
    folder: Path,
    changed: list[str] = (),
) -> list[list[str]]:
    """Every install of ``make install`` in order: requirements.lock (:func:`lock_steps`); the ``changed``
    packages (:func:`changed_entries`) reinstalled under the lock's hashes; for another torch build,
    torch and torchvision at the lock's versions from ``torch_index`` (uv's ``--torch-backend``, pip's
    ``--extra-index-url``) under the other pins; the project, editable."""
    steps = lock_steps(installer, LOCK, folder, backend)
    if changed:
        steps.append(reinstall_step(installer, LOCK, changed, folder))
    if backend is not None:
        versions = {name: version for name, version, _ in lock_entries(LOCK.read_text())}
        pins = [f"{name}=={versions[name]}" for name in TORCH]
        steps.append([*installer, "-c", str(constraints_for(backend, folder)), *torch_index, *pins])
    return [*steps, [*installer, "--no-deps", "--no-build-isolation", *EDITABLE]]


def reinstall_step(installer: list[str], lock: Path, changed: list[str], folder: Path) -> list[str]:
    """The install of the ``changed`` packages of ``lock`` again (uv: ``--reinstall``, pip:
    ``--force-reinstall``), under the lock's hashes: what checks an edited lock line."""
    entries = write_entries(lock, lambda name: name in changed, folder / "requirements-changed.txt")
    again = "--reinstall" if "uv" in installer else "--force-reinstall"
    return [*installer, "--require-hashes", "--no-deps", again, "-r", str(entries)]


def install_note(backend: str | None) -> str:
    """The line that says what the install checks."""
    if backend is None:
        return (
            "contrastlab: installing requirements.lock: every package downloaded checked against its sha256, "
            "a package whose lock hashes changed reinstalled, every installed file against its RECORD"
        )
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


#: What the installers wrote on their standard error, by :func:`run` with ``keep`` (a hash mismatch is
#: read from it).
ERRORS: list[str] = []


def run(
    command: list[str], env: dict[str, str] | None = None, stdin: str | None = None, keep: bool = False
) -> bool:
    """``command`` run in the checkout, echoed first; ``keep``: its standard error kept in :data:`ERRORS`
    (and shown once it ends)."""
    print("+", shlex.join(command), flush=True)
    stderr = subprocess.PIPE if keep else None
    done = subprocess.run(command, cwd=ROOT, env=env, input=stdin, text=True, check=False, stderr=stderr)
    if keep:
        sys.stderr.write(done.stderr)
        ERRORS.append(done.stderr)
    return done.returncode == 0


def run_all(commands: list[list[str]], env: dict[str, str] | None = None, keep: bool = False) -> bool:
    """Each command in turn, up to the first that fails; True when all succeeded."""
    return all(run(command, env, keep=keep) for command in commands)


def hash_mismatch() -> str | None:
    """The one line for a download whose sha256 is not the lock's (read from uv's errors), or None."""
    found = sorted({m["name"] for text in ERRORS for m in HASH_MISMATCH.finditer(text)})
    if not found:
        return None
    return (
        f"contrastlab: requirements.lock's sha256 for {', '.join(found)} does not match the file "
        "downloaded: restore the lock (git checkout requirements.lock) or write it anew (make lock-deps); "
        "nothing was installed from it"
    )


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
    changed = changed_entries(LOCK)
    if install_uv():
        torch_index = ["--torch-backend", backend] if backend else []
        steps = install_steps(uv_command(settings), torch_index, backend, folder, changed)
        if run_all(steps, uv_environment(settings), keep=True):
            return finish(settings, uv=True)
        mismatch = hash_mismatch()
        if mismatch:  # pip would download the same file and refuse it too
            print(mismatch, flush=True)
            return 1
        print("contrastlab: uv could not install the project; installing with pip instead", flush=True)
    else:
        print("contrastlab: uv is not installable here; installing with pip instead", flush=True)
    torch_index = ["--extra-index-url", TORCH_INDEX.format(backend=backend)] if backend else []
    if not run_all(install_steps(pip_command(), torch_index, backend, folder, changed)):
        return 1
    return finish(settings, uv=False)


def finish(settings: dict[str, str], uv: bool) -> int:
    """After the project's install: the installed files checked against their RECORD
    (:func:`check_installed`), its sources compiled, and cffconvert's environment."""
    if not check_installed() or compile_own_sources() != 0:
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
