"""Warm job starts (contrastlab.workflow.warm): a handed-over script runs in a fork exactly as in its own
process, no job outlives its client, and nothing is handed over where it must not be."""

from __future__ import annotations

import contextlib
import json
import mmap
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import types
from pathlib import Path

import pytest
from filelock import FileLock

from contrastlab.cost.measured import warm_usage_path
from contrastlab.workflow import warm, warm_key
from contrastlab.workflow.job_start import start_record
from contrastlab.workflow.warm_key import starter_key
from tests.workflow.helpers import alive, wait_for

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="warm starts are Linux-only")

# Snakemake's preamble (its `snakemake` global of Snakemake's own type, which the hand-over asks for), then
# the hand-over: how each script of this module begins.
HAND_OVER = """
from snakemake.iocontainers import Snakemake
snakemake = Snakemake.__new__(Snakemake)
from contrastlab.workflow.warm import hand_over
hand_over(globals())
"""

# A stand-in for a Snakemake script: the preamble and the hand-over, then the job.
SCRIPT = """
import sys
import tempfile
library_at_start = sorted(name for name in sys.modules if name.startswith("contrastlab"))
HAND_OVER
import json, os, sys, time
options = json.loads(sys.argv[2])
report = {"pid": os.getpid(), "ppid": os.getppid(), "cwd": os.getcwd(), "argv": sys.argv,
          "variable": os.environ.get("CONTRASTLAB_WORKFLOW_RUN"), "umask": os.umask(0o022),
          "stdin": sys.stdin.read() if options.get("stdin") else None, "library_at_start": library_at_start,
          "affinity": sorted(os.sched_getaffinity(0))}
if options.get("start_record"):  # how the job started, as the job's own frame reads it
    from contrastlab.workflow.job_start import start_record
    report["start"] = start_record()
open(sys.argv[1] + ".part", "w").write(json.dumps(report))
os.replace(sys.argv[1] + ".part", sys.argv[1])  # whole when the test sees it
if options.get("until_a_starter_serves"):  # a cold run that outlasts its starter's idle time
    from contrastlab.workflow.warm import socket_path
    for _ in range(900):
        if socket_path(os.environ).exists():
            break
        time.sleep(0.1)
if options.get("summary"):  # a training job's output, its summary closed by its frame; then slow exit work
    import atexit
    from contrastlab.workflow import job
    snakemake.output = {"model": options["summary"]}
    os.makedirs(options["summary"])
    phases = {"total_s": 0.0}
    open(os.path.join(options["summary"], "train_summary.json"), "w").write(
        json.dumps({"phases": phases, "start": {"process_started": time.time()}}))
    job.close_summaries(snakemake)
    atexit.register(time.sleep, options["exit_work_s"])
print("to stdout")
print("to stderr", file=sys.stderr)
time.sleep(options.get("sleep", 0))
sys.exit(options.get("exit", 0))
""".replace("HAND_OVER\n", HAND_OVER)

# One optimisation step of a seeded model on torch's CPU kernels: the bits a job computes (in PROBE).
TORCH_SCRIPT = """
import hashlib, torch
torch.manual_seed(0)
torch.set_num_threads(2)
model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 32))
optimiser = torch.optim.AdamW(model.parameters(), lr=1e-3)
for _ in range(3):
    x = torch.randn(512, 64)
    loss = torch.nn.functional.cross_entropy(model(x), torch.randint(0, 32, (512,)))
    optimiser.zero_grad()
    loss.backward()
    optimiser.step()
weights = b"".join(p.detach().numpy().tobytes() for p in model.parameters())
report["digest"] = hashlib.sha256(weights).hexdigest()
report["kernels"] = [torch.backends.cpu.get_cpu_capability(), torch.get_num_threads()]  # if the bits differ
"""


@pytest.fixture(scope="module")
def place(tmp_path_factory):
    """A folder of this module's own for the starter's socket (TMPDIR), the scripts and their reports; a
    short idle time, and the starter stopped at the end."""
    root = tmp_path_factory.mktemp("warm")
    env = {**os.environ, "TMPDIR": str(root), warm.IDLE_VARIABLE: "60"}
    env.pop(warm.SWITCH, None)
    (root / "job.py").write_text(SCRIPT)
    yield root, env
    for log in root.glob("contrastlab-warm-*/*.log"):
        print(log.read_text())
    subprocess.run(["pkill", "-TERM", "-f", f"contrastlab.workflow.warm {root}"], check=False)


def _python(place, script, *args, variables=None, cwd=None, **run) -> subprocess.CompletedProcess:
    """``script`` run with ``args`` to its end, in the starter's environment and ``variables``, from ``cwd``
    (the place's folder unless given); ``run``: more of subprocess.run's arguments."""
    root, env = place
    argv = [sys.executable, str(script), *map(str, args)]
    env = {**env, **(variables or {})}
    return subprocess.run(argv, cwd=cwd or root, env=env, capture_output=True, timeout=120, **run)


def _job(place, report: Path, options: dict) -> tuple[Path, Path, str]:
    """The script's command after the interpreter: the script, its report file and what it does, as
    :func:`_run` and :func:`_start` both give them."""
    return place[0] / "job.py", report, json.dumps(options)


def _run(place, variables=None, cpus=None, **options) -> tuple[subprocess.CompletedProcess, dict]:
    """The script run to its end (on ``cpus`` only, where given), which must succeed: its outcome and its
    report. Its report file and what it does are arguments, so that every run has the starter's environment
    (a variable more would be a starter of its own)."""
    report = place[0] / f"report-{time.monotonic_ns()}.json"
    stdin = "from stdin" if options.get("stdin") else None
    affinity = None if cpus is None else lambda: os.sched_setaffinity(0, cpus)
    job = _job(place, report, options)
    done = _python(place, *job, variables=variables, input=stdin, text=True, preexec_fn=affinity)
    assert done.returncode == 0, done.stderr
    return done, json.loads(report.read_text()) if report.exists() else {}


def _start(place, report: Path, variables=None, streams=subprocess.PIPE, **options) -> subprocess.Popen:
    """The script started as :func:`_run` runs it, not waited for, its output to ``streams``."""
    root, env = place
    command = [sys.executable, *map(str, _job(place, report, options))]
    env = {**env, **(variables or {})}
    return subprocess.Popen(command, cwd=root, env=env, stdout=streams, stderr=streams, text=True)


def _start_sleeping_job(place, report_name: str) -> tuple[subprocess.Popen, dict]:
    """The script started to sleep for a minute, its output piped; once its report is written, the client
    and what the job reported (its pid and parent)."""
    report = place[0] / report_name
    client = _start(place, report, sleep=60)
    wait_for(report.exists)
    return client, json.loads(report.read_text())


def _starter_ready(place, run=_run) -> int:
    """Run the script (by ``run``) until a starter serves it (the first run, cold, starts one): the starter's
    pid."""

    def served() -> int | None:
        report = run(place)[1]
        return report["ppid"] if report["pid"] != _client_pid_of(report) else None

    return wait_for(served, timeout=90, what="a starter to serve the script")


def _client_pid_of(report: dict) -> int:
    """A cold run's report comes from the client itself (its parent: pytest's subprocess); a warm one's
    from a fork of the starter, whose command line names this module."""
    cmdline = Path(f"/proc/{report['ppid']}/cmdline").read_bytes()
    return report["ppid"] if b"contrastlab.workflow.warm" in cmdline else report["pid"]


def test_a_handed_over_job_runs_as_its_own_process_would(place):
    """The fork has the client's folder, argv, streams, variables and umask; its start record says warm, its
    process begun when its client's was (before the hand-over; a fork begins after it), no wait for a
    starter that serves already; a training job's exit functions (here a 0.4 s one) lie inside its phases:
    the fork extends them once those ran, and only its ``os._exit`` follows."""
    starter = _starter_ready(place)
    root, _ = place
    folder = root / f"model-{time.monotonic_ns()}"
    options = {"stdin": True, "start_record": True, "summary": str(folder), "exit_work_s": 0.4}
    before = time.time()
    # a per-run variable (not in the starter's key): the fork has the client's value, not the starter's
    done, report = _run(place, {"CONTRASTLAB_WORKFLOW_RUN": "a value; $(not run)"}, **options)
    after = time.time()
    assert report["ppid"] == starter  # run by a fork of the starter, not by the client
    assert (done.stdout, done.stderr) == ("to stdout\n", "to stderr\n")
    assert report["cwd"] == str(root)
    assert report["argv"][0] == str(root / "job.py") and json.loads(report["argv"][2]) == options
    assert report["variable"] == "a value; $(not run)"
    assert report["library_at_start"] == []  # as in a fresh process: the job imports its own contrastlab
    assert report["stdin"] == "from stdin"
    current = os.umask(0)
    os.umask(current)
    assert report["umask"] == current
    start = report["start"]
    assert start["warm"] is True and start["why_cold"] is None, start
    # the client's start (Python's own start-up and the script's imports before the hand-over), the
    # kernel's clock ticks (10 ms) aside
    assert before - 0.05 <= start["process_started"] < start["handed_over"] - 0.02 < after, (before, start)
    assert 0 <= start["waited_s"] < 1
    phases = json.loads((folder / "train_summary.json").read_text())["phases"]
    assert phases["after_s"] >= 0.4 and phases["total_s"] >= 0.4


def _run_outside(place, variables=None) -> tuple[subprocess.CompletedProcess, dict]:
    """The script from a folder of its own (``outside/``, beside a module it imports) started as
    ``python ../outside/job.py`` from another folder (``run/``): its outcome and its report."""
    outside, run = place[0] / "outside", place[0] / "run"
    if not outside.exists():
        outside.mkdir()
        run.mkdir()
        fields = '"file": __file__, "path0": sys.path[0], "beside": __import__("beside").WHERE, "affinity":'
        (outside / "job.py").write_text(SCRIPT.replace('"affinity":', fields))
        (outside / "beside.py").write_text("WHERE = 'beside the script'\n")
    name = f"report-{time.monotonic_ns()}.json"
    options = json.dumps({"start_record": True})
    done = _python(place, "../outside/job.py", name, options, variables=variables, cwd=run, text=True)
    assert done.returncode == 0, done.stderr
    return done, json.loads((run / name).read_text())


def test_a_job_whose_script_lies_outside_its_starting_folder_runs_as_its_own_process_would(place):
    """A script outside the folder it was started from, named by a relative path: the fork gets the client's
    folder and argv, Python's ``__file__`` and ``sys.path[0]``, as the same command started cold does, which
    learns why it started cold."""
    _, cold = _run_outside(place, {warm.SWITCH: "0"})
    assert (cold["start"]["warm"], cold["start"]["why_cold"]) == (False, "warm starts off")
    assert cold["pid"] == _client_pid_of(cold)
    starter = _starter_ready(place, _run_outside)
    warm_report = _run_outside(place)[1]
    assert warm_report["ppid"] == starter
    keys = ("cwd", "file", "path0", "beside")
    assert {k: warm_report[k] for k in keys} == {k: cold[k] for k in keys}
    assert warm_report["argv"][0] == cold["argv"][0] == "../outside/job.py"
    assert warm_report["cwd"] == str(place[0] / "run")
    assert warm_report["file"] == str(place[0] / "run" / ".." / "outside" / "job.py")  # as Python names it
    assert warm_report["beside"] == "beside the script"
    assert os.path.realpath(os.path.join(warm_report["cwd"], warm_report["path0"])) == str(
        place[0] / "outside"
    )


def test_a_signal_to_the_client_ends_the_job_as_it_would_end_the_process(place):
    """SIGTERM and SIGINT are forwarded to the job; a killed client (SIGKILL) takes its job with it."""
    starter = _starter_ready(place)
    root, _ = place
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGKILL):
        client, job = _start_sleeping_job(place, f"signal-{signum}.json")
        assert job["ppid"] == starter
        client.send_signal(signum)
        _, stderr = client.communicate(timeout=30)
        assert client.returncode == -signum
        wait_for(lambda pid=job["pid"]: not alive(pid), timeout=5)
        if signum == signal.SIGINT:  # Python's traceback, from the script's own frame on
            lines = stderr.splitlines()
            assert lines[lines.index("Traceback (most recent call last):") + 1].startswith(
                f'  File "{root / "job.py"}"'
            ), stderr
            assert stderr.rstrip().endswith("KeyboardInterrupt"), stderr


# The main program with a stand-in (a test's, as tests/tables/test_tables.py runs scripts/tables.py), and
# Snakemake's own object in a script run in-process (runpy, not the process's __main__): either hands over
# nothing, since the hand-over ends the calling process; both print their pid before and after it.
IN_PLACE = {
    "stand-in": """
import os
print(os.getpid(), flush=True)
from types import SimpleNamespace
snakemake = SimpleNamespace(rule="tables")
from contrastlab.workflow.warm import hand_over
hand_over(globals())
print(os.getpid())
""",
    "in-process": """
import os, pathlib, runpy, sys
print(os.getpid(), flush=True)
from snakemake.iocontainers import Snakemake
script = pathlib.Path(sys.argv[1])
script.write_text("from contrastlab.workflow.warm import hand_over\\nhand_over(globals())\\n")
runpy.run_path(str(script), init_globals={"snakemake": Snakemake.__new__(Snakemake)})
print(os.getpid())
""",
}


@pytest.mark.parametrize("case", IN_PLACE)
def test_a_script_that_is_not_its_process_runs_in_place_and_the_process_goes_on(place, case):
    _starter_ready(place)
    root, _ = place
    driver = root / f"{case}.py"
    driver.write_text(IN_PLACE[case])
    done = _python(place, driver, root / f"{case}-script.py", text=True)
    assert done.returncode == 0, done.stderr
    before, after = done.stdout.split()
    assert before == after  # the process that began the script went on with it


def test_jobs_wait_for_a_starting_starter_which_stays_while_a_cold_job_runs(place):
    """A job that may not wait runs cold and starts a starter; the jobs started meanwhile wait and run in its
    forks; the starter stays while the cold job runs, past its idle time, and serves the job after it."""
    own = {warm.IDLE_VARIABLE: "2", "LC_CONTRASTLAB_TEST": "cold"}  # a starter of its own key, idle after 2 s
    root, _ = place
    cold_report = root / "cold.json"
    may_not_wait = {**own, warm.WAIT_VARIABLE: "0"}
    options = {"until_a_starter_serves": True, "sleep": 5, "start_record": True}
    cold = _start(place, cold_report, may_not_wait, subprocess.DEVNULL, **options)
    wait_for(cold_report.exists, timeout=60)  # running cold, before any starter serves
    reports = [root / f"waited-{i}.json" for i in range(2)]
    waiting = [_start(place, report, own, subprocess.DEVNULL) for report in reports]
    assert [client.wait(timeout=120) for client in waiting] == [0, 0]
    served = [json.loads(report.read_text()) for report in reports]
    assert all(report["pid"] != _client_pid_of(report) for report in served), served
    assert len({report["ppid"] for report in served}) == 1  # one starter served both
    assert cold.wait(timeout=120) == 0
    report = json.loads(cold_report.read_text())
    assert report["pid"] == _client_pid_of(report)  # cold: it started the starter
    assert report["start"]["why_cold"] == f"no starter yet ({warm.WAIT_VARIABLE}=0)", report["start"]
    _, report = _run(place, own)
    assert report["pid"] != _client_pid_of(report), "the starter left while the cold job ran"


def test_a_job_waits_only_while_a_starter_holds_the_lock(tmp_path, monkeypatch):
    """The wait ends with a connection once the starter listens, with None at once where no starter took the
    lock within the grace, and after the time asked for where one holds it but never listens. A second
    starter on the address leaves at once."""
    monkeypatch.setattr(warm, "STARTING_GRACE_SECONDS", 0.3)
    address = tmp_path / "key.sock"
    started = time.monotonic()
    assert warm._wait_for_starter(address, seconds=30) is None
    assert time.monotonic() - started < 5  # the grace, not the 30 s

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)

    def listen_later():
        time.sleep(1.0)
        listener.bind(str(address))
        listener.listen()

    with FileLock(f"{address}.lock"):
        assert warm._starter_importing(address)
        assert warm.serve(address, idle_seconds=1) == "another starter serves this address"
        assert not address.exists()
        started = time.monotonic()
        assert warm._wait_for_starter(address, seconds=0.8) is None  # held, never listening: the time asked
        assert 0.8 <= time.monotonic() - started < 5
        thread = threading.Thread(target=listen_later)
        thread.start()
        connection = warm._wait_for_starter(address, seconds=30)
        thread.join()
        assert connection is not None
        connection.close()
    listener.close()
    assert not warm._starter_importing(address)
    assert warm._wait_for_starter(address, seconds=0) is None  # CONTRASTLAB_WARM_WAIT=0: never waits


def test_nothing_is_handed_over_where_it_must_not_be(tmp_path):
    """Each setting that keeps a job cold, named by the phrase its start record gives."""
    assert warm.cold_by_setting({}) is None
    assert warm.cold_by_setting({warm.SWITCH: "0"}) == "warm starts off"
    assert warm.cold_by_setting({warm.SWITCH: "off"}) == "warm starts off"
    assert warm.cold_by_setting({"SLURM_JOB_ID": "17"}) == "under SLURM"  # a job runs inside its allocation
    # and inside its container
    assert warm.cold_by_setting({"APPTAINER_CONTAINER": "/images/contrastlab.sif"}) == "in a container"
    assert warm.cold_by_setting({warm.FORK_MARK: "1"}) is not None  # the fork runs the script itself
    with pytest.MonkeyPatch.context() as patch, tempfile.TemporaryDirectory(dir="/tmp") as short:
        shared = Path(short)  # short: a socket's address holds at most 107 bytes
        (shared / f"contrastlab-warm-{os.getuid()}").mkdir(mode=0o777)
        os.chmod(shared / f"contrastlab-warm-{os.getuid()}", 0o777)  # others could plant a socket there
        patch.setenv("TMPDIR", str(shared))
        patch.setattr("tempfile.tempdir", None)
        assert warm.socket_path(os.environ) is None
        os.chmod(shared / f"contrastlab-warm-{os.getuid()}", 0o700)
        assert warm.socket_path(os.environ) == (
            shared / f"contrastlab-warm-{os.getuid()}" / f"{starter_key(os.environ)}.sock"
        )
        deep = tmp_path / ("scratch-" * 12)  # a cluster's TMPDIR too deep for an AF_UNIX address
        deep.mkdir()
        patch.setenv("TMPDIR", str(deep))
        patch.setattr("tempfile.tempdir", None)
        address = warm.socket_path(os.environ)  # the starter binds <address>.<pid>: /tmp's folder instead
        assert address == Path("/tmp", f"contrastlab-warm-{os.getuid()}", f"{starter_key(os.environ)}.sock")


def test_the_starter_key_follows_what_a_fork_inherits_but_not_per_run_variables(tmp_path):
    base = {"HOME": "/home/a", "HF_HUB_OFFLINE": "1"}
    key = starter_key(base)
    per_run = {"CONTRASTLAB_WORKFLOW_RUN": "host:1:2", "PYTEST_CURRENT_TEST": "t", "PWD": "/elsewhere"}
    unread = {"PATH": "/opt/slurm/bin:/usr/bin", "HTTPS_PROXY": "http://127.0.0.1:9", "MAKEFLAGS": "-s"}
    assert starter_key({**base, **per_run, **unread}) == key  # a job reads these itself, from its own
    assert starter_key({**base, "TMPDIR": "/scratch"}) != key  # tempfile keeps the first it finds
    assert starter_key({**base, "HF_HUB_OFFLINE": "0"}) != key  # read when huggingface_hub is imported
    assert starter_key({**base, "OPENBLAS_NUM_THREADS": "1"}) != key  # read when numpy is imported
    # a working copy of links to one source folder (each e2e module's repo_root) is that folder
    (tmp_path / "src").mkdir()
    (tmp_path / "copy").symlink_to(tmp_path / "src")
    linked = starter_key({**base, "PYTHONPATH": f"{tmp_path / 'copy'}:/b"})
    assert linked == starter_key({**base, "PYTHONPATH": f"{tmp_path / 'src'}:/b"}) != key
    soft, hard = resource.getrlimit(resource.RLIMIT_CORE)  # a fork keeps its starter's limits
    resource.setrlimit(resource.RLIMIT_CORE, (0 if soft else hard, hard))
    try:
        assert starter_key(base) != key
    finally:
        resource.setrlimit(resource.RLIMIT_CORE, (soft, hard))
    assert starter_key(base) == key
    with pytest.MonkeyPatch.context() as patch:  # another venv: another sys.prefix, the same interpreter
        patch.setattr(sys, "prefix", str(tmp_path / "venv"))
        assert starter_key(base) != key


#: Why a job of a key whose starter's imports loaded a CUDA driver that cannot say whether it was
#: initialised (here: a file named as the driver, not a library) starts cold (its start record).
LOADED = "CUDA driver loaded by imports, its initialisation unknown"
REFUSED = f"starter refused: {LOADED}"

# In every process of its key (``PYTHONPATH``): a file named as the CUDA driver mapped from start-up on, so
# that /proc/self/maps names libcuda.so after a starter's imports, as where torch's import loads the driver.
SITECUSTOMIZE = """
import mmap, os
with open(os.path.join(os.path.dirname(__file__), "libcuda.so.1"), "rb") as _file:
    _driver = mmap.mmap(_file.fileno(), 0, prot=mmap.PROT_READ)
"""


@contextlib.contextmanager
def _cuda_driver_mapped(folder: Path):
    """A file named as the CUDA driver mapped into this process while the block runs."""
    (folder / "libcuda.so.1").write_bytes(b"\0" * mmap.PAGESIZE)
    with open(folder / "libcuda.so.1", "rb") as file, mmap.mmap(file.fileno(), 0, prot=mmap.PROT_READ):
        yield


def test_a_starter_whose_imports_load_the_cuda_driver_records_its_refusal_and_leaves(tmp_path, monkeypatch):
    """Where /proc/self/maps names libcuda.so once its imports are done, the starter serves nothing, writes
    why beside its socket (for its key's later jobs) and leaves its lock free (jobs waiting stop)."""
    monkeypatch.setattr(warm, "PRELOAD", ("json",))  # the mapping stands for what torch's import would load
    address = tmp_path / "key.sock"
    with _cuda_driver_mapped(tmp_path):
        assert warm._cuda_driver_loaded()
        why = warm.serve(address, idle_seconds=1)
    assert "CUDA driver" in why and not address.exists()
    refusal = json.loads((tmp_path / "key.refused").read_text())
    assert refusal["reason"] == LOADED, refusal
    assert not warm._starter_importing(address)
    assert not list(tmp_path.glob(".*partial"))  # written whole (atomically)


#: A stand-in for the CUDA driver (libcuda.so.1): the entry points a process asks before and at cuInit;
#: cuDeviceGetCount answers CUDA_ERROR_NOT_INITIALIZED (3) until cuInit, as the driver does.
STAND_IN_LIBCUDA = r"""
static int initialised = 0;
int cuInit(unsigned int flags) { (void)flags; initialised = 1; return 0; }
int cuDriverGetVersion(int *version) { *version = 13000; return 0; }
int cuDeviceGetCount(int *count) { if (!initialised) return 3; *count = 0; return 0; }
"""

# A starter in a process of its own (the stand-in never enters the test's process): it loads the driver as
# torch's import does (cuBLASLt's constructor), calls cuInit where asked, and serves for a second.
STARTER = """
import ctypes, sys
from pathlib import Path
from contrastlab.workflow import warm
driver = ctypes.CDLL("libcuda.so.1")
if sys.argv[2] == "cuInit":
    driver.cuInit(0)
warm.PRELOAD = ()
print(warm.serve(Path(sys.argv[1]), idle_seconds=1))
"""


def _stand_in_driver(folder: Path) -> Path:
    """``folder`` holding a stand-in ``libcuda.so.1`` built by the C compiler (skips without one)."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler to build the stand-in CUDA driver")
    (folder / "libcuda.c").write_text(STAND_IN_LIBCUDA)
    build = [compiler, "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", str(folder / "libcuda.so.1")]
    subprocess.run([*build, str(folder / "libcuda.c")], check=True, capture_output=True)
    return folder


@pytest.mark.parametrize("driver", ["loaded", "cuInit"])
def test_a_starter_refuses_only_where_the_cuda_driver_was_initialised(tmp_path, driver):
    """A starter whose CUDA driver is only loaded serves; one whose process called cuInit refuses and records
    driver_initialised "yes"."""
    libraries = _stand_in_driver(tmp_path)
    address = tmp_path / "key.sock"
    env = {**os.environ, "LD_LIBRARY_PATH": str(libraries)}
    command = [sys.executable, "-c", STARTER, str(address), driver]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    refused = tmp_path / "key.refused"
    if driver == "loaded":
        assert "without initialising it: forks may use CUDA" in done.stdout, done.stdout
        assert not refused.exists()
        assert done.stdout.splitlines()[-1] == "0 jobs, then no job for 1 s", done.stdout
    else:
        record = json.loads(refused.read_text())
        assert record["reason"] == "CUDA driver initialised by imports", record
        assert (record["driver_initialised"], record["torch_initialised"]) == ("yes", "no")


def test_a_starter_whose_torch_initialised_cuda_refuses(tmp_path, monkeypatch):
    """torch's own lazy-init flag is enough: a starter whose imports ran torch.cuda's initialisation
    refuses, whether or not the driver's library is visible in its maps."""
    fake = types.SimpleNamespace(cuda=types.SimpleNamespace(is_initialized=lambda: True))
    monkeypatch.setitem(sys.modules, "torch", fake)
    monkeypatch.setattr(warm, "PRELOAD", ())
    monkeypatch.setattr(warm, "_cuda_driver_loaded", lambda: False)
    address = tmp_path / "key.sock"
    why = warm.serve(address, idle_seconds=1)
    assert why.startswith("CUDA driver initialised by imports") and not address.exists(), why
    record = json.loads((tmp_path / "key.refused").read_text())
    assert (record["reason"], record["torch_initialised"]) == ("CUDA driver initialised by imports", "yes")
    assert record["driver_initialised"] == "not loaded"


def test_a_refused_key_starts_its_jobs_cold_at_once_and_another_key_still_gets_a_starter(
    tmp_path, monkeypatch
):
    """A job whose key's starter refused runs cold at once: no starter started, no wait (it would wait 30 s
    here), its start record saying why. A job of another key starts a starter as before."""
    refused, other = tmp_path / "refused.sock", tmp_path / "other.sock"
    monkeypatch.setattr(warm, "PRELOAD", ())
    monkeypatch.setattr(warm, "_cuda_refusal", lambda: (LOADED, {"driver_initialised": "unknown"}))
    warm.serve(refused, idle_seconds=1)
    started: list[Path] = []
    monkeypatch.setattr(warm, "_start_starter", started.append)
    monkeypatch.setattr(warm, "_is_script_process", lambda script_globals: True)
    for name in (warm.SWITCH, warm.FORK_MARK, "SLURM_JOB_ID", "APPTAINER_CONTAINER", "SINGULARITY_CONTAINER"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CONTRASTLAB_WARM_STATE", "")  # hand_over notes the job's start there: put back after
    monkeypatch.setenv(warm.WAIT_VARIABLE, "30")
    monkeypatch.setattr(warm, "socket_path", lambda env: refused)
    began = time.monotonic()
    warm.hand_over({})
    assert started == [] and time.monotonic() - began < 1
    assert start_record()["why_cold"] == REFUSED and start_record()["waited_s"] < 1
    monkeypatch.setattr(warm, "socket_path", lambda env: other)
    monkeypatch.setenv(warm.WAIT_VARIABLE, "0")
    warm.hand_over({})
    assert started == [other]
    assert start_record()["why_cold"] == f"no starter yet ({warm.WAIT_VARIABLE}=0)"


def test_a_refusal_is_remembered_and_the_next_job_of_its_key_starts_no_starter(place):
    """Through real processes: the starter whose imports map the CUDA driver refuses once; the job that
    waited for it runs cold, and the next job of its key runs cold at once, starting no starter."""
    root, env = place
    driver = root / "cuda-driver"
    driver.mkdir()
    (driver / "libcuda.so.1").write_bytes(b"\0" * 4096)
    (driver / "sitecustomize.py").write_text(SITECUSTOMIZE)
    own = {
        "PYTHONPATH": os.pathsep.join(filter(None, [str(driver), env.get("PYTHONPATH")])),
        warm.WAIT_VARIABLE: "120",
    }
    _, first_report = _run(place, own, start_record=True)
    began = time.monotonic()
    _, second_report = _run(place, own, start_record=True)
    second_wall = time.monotonic() - began
    time.sleep(1)  # a starter writes its last line after it has let its jobs go
    folder, key = root / f"contrastlab-warm-{os.getuid()}", starter_key({**env, **own})
    starters = (folder / f"{key}.log").read_text()
    assert starters.count("CUDA driver") == 1, starters  # one starter, not one per job
    assert json.loads((folder / f"{key}.refused").read_text())["reason"] == LOADED
    assert first_report["start"]["why_cold"] == second_report["start"]["why_cold"] == REFUSED
    assert first_report["start"]["waited_s"] > 0 and second_report["start"]["waited_s"] < 0.1
    assert second_wall < 10, second_wall


# --- issue 76 item 3: a warm job sees what a cold one sees; each way a starter can fail ends clearly ------

#: Why a job's client ends when its starter died under its fork (reliability W2).
STARTER_GONE = "contrastlab: the warm starter ended before this job did; rerun the job"
#: The one line of a client that starts a starter under a bad ``CONTRASTLAB_WARM_IDLE`` (reliability W3).
IDLE_NOTE = (
    f"contrastlab note: {warm.IDLE_VARIABLE}='abc' is not a number of seconds; the warm starter waits 120 s "
    f"for a next job (set a number, e.g. {warm.IDLE_VARIABLE}=120, or unset it)"
)


@pytest.mark.fault(
    f"{warm.IDLE_VARIABLE}=abc (W3)", "one line naming it; the starter serves, idle after 120 s"
)
def test_a_bad_idle_time_is_named_in_one_line_and_its_starter_serves_all_the_same(place, observed):
    root, env = place
    own = {warm.IDLE_VARIABLE: "abc", "LC_CONTRASTLAB_TEST": "idle"}  # a key of its own: a starter to start
    first, report = _run(place, own)
    assert report["pid"] != _client_pid_of(report), "ran cold: the starter did not serve"
    assert first.stderr.splitlines() == [IDLE_NOTE, "to stderr"]
    again, report = _run(place, own)
    assert report["pid"] != _client_pid_of(report)
    assert again.stderr == "to stderr\n"  # said by the job that started the starter, not by every job
    log = root / f"contrastlab-warm-{os.getuid()}" / f"{starter_key({**env, **own})}.log"
    assert "Traceback" not in log.read_text()
    observed(first.stderr.splitlines()[0])


@pytest.mark.fault(
    "a job under taskset -c <one CPU> while a starter on all CPUs serves its key (W6)",
    "run on that one CPU, by a starter of its own key",
)
def test_a_job_on_other_cpus_is_run_by_a_starter_of_its_own_on_its_own_cpus(place, observed):
    starter = _starter_ready(place)
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("one CPU: no other affinity to run a job under")
    _, report = _run(place, cpus=cpus[:1])
    assert report["affinity"] == cpus[:1], (
        f"the job ran on CPUs {report['affinity']}, its client on {cpus[:1]}"
    )
    assert report["ppid"] != starter and report["pid"] != _client_pid_of(report)  # warm, by another starter
    assert sorted(os.sched_getaffinity(report["ppid"])) == cpus[:1]
    observed(f"CPUs {report['affinity']}, starter {report['ppid']} (the full-affinity one: {starter})")


def test_a_starter_whose_cpus_were_changed_runs_no_job_it_would_put_elsewhere(place):
    """The key names the CPUs a starter began with; one moved since (``taskset -p``) takes nothing over,
    and the job runs cold on its own CPUs."""
    starter = _starter_ready(place)
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("one CPU: no other affinity to give the starter")
    os.sched_setaffinity(starter, cpus[:1])
    try:
        _, report = _run(place, start_record=True)
    finally:
        os.sched_setaffinity(starter, cpus)
    assert report["pid"] == _client_pid_of(report) and report["affinity"] == cpus
    assert report["start"]["why_cold"] == "starter took nothing over"
    _, report = _run(place)
    assert report["ppid"] == starter  # its CPUs back: it serves again


@pytest.mark.fault(
    "warm starter SIGKILLed while its fork runs a job, its socket left behind (W2)",
    "the job ends with one line; the next job starts a new starter, which serves",
)
def test_a_starter_killed_mid_job_ends_the_job_in_one_line_and_the_next_job_gets_a_new_starter(
    place, observed
):
    starter = _starter_ready(place)
    client, job = _start_sleeping_job(place, "starter-killed.json")
    assert job["ppid"] == starter
    os.kill(starter, signal.SIGKILL)
    _, stderr = client.communicate(timeout=30)
    assert client.returncode == 1
    assert stderr.splitlines()[-1] == STARTER_GONE, stderr
    wait_for(lambda: not alive(job["pid"]), timeout=5)  # the fork died with its starter
    root, env = place
    address = root / f"contrastlab-warm-{os.getuid()}" / f"{starter_key(env)}.sock"
    assert address.is_socket() and warm._connect(address) is None  # stale (W1): nothing listens there
    _, report = _run(place)
    assert report["ppid"] != starter
    assert report["pid"] != _client_pid_of(report)  # warm again: a new starter replaced the stale socket
    observed(STARTER_GONE)


def test_a_setting_in_seconds_that_is_not_a_number_is_named_and_its_default_used():
    for value, seconds in {"soon": 60.0, "nan": 60.0, " 2.5 ": 2.5, "-1": 0.0}.items():  # -1: never waits
        assert warm_key.seconds({warm.WAIT_VARIABLE: value}, warm.WAIT_VARIABLE) == seconds, value
    assert warm_key.seconds({}, warm.IDLE_VARIABLE) == 120.0
    assert warm_key.setting_notes({warm.WAIT_VARIABLE: "soon", warm.IDLE_VARIABLE: "30"}) == [
        f"contrastlab note: {warm.WAIT_VARIABLE}='soon' is not a number of seconds; a job waits 60 s for a "
        f"starting starter (set a number, e.g. {warm.WAIT_VARIABLE}=60, or unset it)"
    ]
    assert warm_key.setting_notes({warm.WAIT_VARIABLE: "0", warm.IDLE_VARIABLE: "1e3"}) == []


def test_the_starter_key_follows_the_cpus_the_cgroup_and_the_io_and_cpu_priority(tmp_path):
    """The key of a process started under another ``taskset``, cgroup, ``ionice`` or ``nice`` differs from
    this one's: a fork inherits those of its starter."""
    probe = "from contrastlab.workflow.warm_key import starter_key; print(starter_key({}))"

    def key_of(setup=None, command=()) -> str:
        argv = [*command, sys.executable, "-c", probe]
        done = subprocess.run(argv, capture_output=True, text=True, check=True, preexec_fn=setup)
        return done.stdout.strip()

    same = key_of()
    assert same == starter_key({})
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) > 1:
        assert key_of(lambda: os.sched_setaffinity(0, cpus[:1])) != same
    assert key_of(lambda: os.nice(1)) != same
    if shutil.which("ionice"):
        assert key_of(command=("ionice", "-c", "3")) != same  # the idle I/O class
    with pytest.MonkeyPatch.context() as patch:  # a cgroup of its own needs rights a test has not
        cgroup = Path("/proc/self/cgroup").read_text()
        patch.setattr(warm_key, "_cgroup", lambda: cgroup + "4:memory:/limited\n")
        assert starter_key({}) != same
    assert starter_key({}) == same


# After HAND_OVER, a job that reports all of its process a script can read: warm and cold, the reports agree.
PROBE = """
import json, os, resource, signal, sys, tempfile
import psutil
mask = os.umask(0)
os.umask(mask)
catchable = [s for s in signal.Signals if s not in (signal.SIGKILL, signal.SIGSTOP)]
limits = [name for name in dir(resource) if name.startswith("RLIMIT_")]
streams = (sys.stdin, sys.stdout, sys.stderr)
report = {
    "pid": os.getpid(), "ppid": os.getppid(), "cwd": os.getcwd(), "env": dict(os.environ), "argv": sys.argv,
    "orig_argv": sys.orig_argv, "executable": sys.executable, "path": sys.path, "flags": list(sys.flags),
    "umask": mask, "affinity": sorted(os.sched_getaffinity(0)), "nice": os.getpriority(os.PRIO_PROCESS, 0),
    "scheduler": os.sched_getscheduler(0), "io_priority": list(psutil.Process().ionice()),
    "limits": {name: resource.getrlimit(getattr(resource, name)) for name in limits},
    "cgroup": open("/proc/self/cgroup").read(), "oom_score_adj": open("/proc/self/oom_score_adj").read(),
    "signals": {s.name: str(signal.getsignal(s)) for s in catchable}, "tempdir": tempfile.gettempdir(),
    "streams": [[s.name, type(s.buffer).__name__, s.encoding, s.errors, s.line_buffering, s.write_through]
                for s in streams],
    "stdin": sys.stdin.read(),
    "main": {name: type(value).__name__ for name, value in globals().items() if name.startswith("__")},
}
TORCH_SCRIPT
with open(sys.argv[1], "w") as out:
    json.dump(report, out)
""".replace("TORCH_SCRIPT\n", TORCH_SCRIPT)


def _warm_and_cold(place, name: str, job: str, *args, variables=None, **run) -> tuple[dict, dict]:
    """The reports of ``job`` (a script after HAND_OVER, written as ``<name>.py``) run warm, then cold, with
    ``args`` after the report's path (``<name>.json``: the same argument in both runs)."""
    root, _ = place
    (root / f"{name}.py").write_text(HAND_OVER + job)
    report = root / f"{name}.json"
    reports = []
    for switch in ("1", "0"):
        switched = {**(variables or {}), warm.SWITCH: switch}
        _python(place, root / f"{name}.py", report, *args, variables=switched, check=True, **run)
        reports.append(json.loads(report.read_text()))
        report.unlink()
    return reports[0], reports[1]


#: The variables a warm and a cold run of one job may disagree on, each with why.
DIFFER = {
    warm.SWITCH: "how the test asks for the cold run (CONTRASTLAB_WARM_START=0)",
    warm.FORK_MARK: "set in the fork only: the script it runs must not hand itself over again",
    "CONTRASTLAB_WARM_STATE": "the job's start record: warm or cold, why, when, how long it waited",
}


@pytest.mark.parametrize("ignoring", [(), (signal.SIGHUP, signal.SIGINT)], ids=["plain", "nohup-background"])
def test_a_warm_job_sees_what_a_cold_job_sees(place, ignoring):
    """Field by field, a probe job reads the same of its process warm and cold (but :data:`DIFFER`), and
    computes the same bits with torch; only its pid and parent differ. Started ignoring signals (nohup, a
    background job), both ignore them."""
    starter = _starter_ready(place)
    hot, cold = _warm_and_cold(
        place,
        "probe",
        PROBE,
        "a b",
        "$(no)",
        input=b"line one\r\nline two\n",  # read as given: no newline translated
        preexec_fn=lambda: [signal.signal(n, signal.SIG_IGN) for n in ignoring],
    )
    assert hot["ppid"] == starter and cold["pid"] == _client_pid_of(cold)
    assert cold["stdin"] == "line one\r\nline two\n" and cold["argv"][2:] == ["a b", "$(no)"]
    assert set(hot) == set(cold)
    differing = sorted(f for f in set(cold) - {"pid", "ppid", "env"} if hot[f] != cold[f])
    assert {f: hot[f] for f in differing} == {f: cold[f] for f in differing}
    assert set(hot["env"]) ^ set(cold["env"]) <= set(DIFFER)
    assert {k: v for k, v in hot["env"].items() if k not in DIFFER} == {
        k: v for k, v in cold["env"].items() if k not in DIFFER
    }


# After HAND_OVER, a job of rule "probe" that grows its memory by 256 MiB and spins the CPU for 0.5 s, then
# reports its own peak (VmHWM, kB) and CPU seconds as the kernel counts them.
USAGE_PROBE = """
snakemake.rule, snakemake.wildcards = "probe", {}  # the fork runs the whole script: its record reads them
import json, os, resource, sys, time
def status(field):
    line = next(l for l in open("/proc/self/status") if l.startswith(field + ":"))
    return int(line.split()[1])
start_kb = status("VmRSS")
block = bytearray(b"\\1") * (256 << 20)
began = time.process_time()
while time.process_time() - began < 0.5:
    pass
own = resource.getrusage(resource.RUSAGE_SELF)
with open(sys.argv[1], "w") as out:
    json.dump({"ppid": os.getppid(), "start_kb": start_kb, "peak_kb": status("VmHWM"),
               "cpu_s": own.ru_utime + own.ru_stime}, out)
"""


def test_a_warm_job_records_its_own_peak_and_cpu_seconds_in_the_units_the_cost_tables_read(place):
    """The fork's usage file: peak RSS in MiB (Snakemake's ``max_rss``), the job's allocation in it, as in a
    cold job's own peak; CPU seconds of the job's own work from the hand-over on."""
    starter = _starter_ready(place)
    benchmark = place[0] / "usage" / "probe.tsv"
    where = {warm.BENCHMARKS_VARIABLE: json.dumps({"probe": str(benchmark)})}
    hot, cold = _warm_and_cold(place, "usage_probe", USAGE_PROBE, variables=where)
    assert hot["ppid"] == starter
    usage = json.loads(warm_usage_path(benchmark).read_text())  # the warm run's only: the cold wrote none
    assert 0 <= usage["max_rss"] - hot["peak_kb"] / 1024 < 4, (usage, hot)  # a little more, at the fork's end
    assert usage["max_rss"] >= hot["start_kb"] / 1024 + 256
    assert cold["peak_kb"] / 1024 >= cold["start_kb"] / 1024 + 256
    assert 0.5 <= usage["cpu_time"] and abs(usage["cpu_time"] - hot["cpu_s"]) < 0.3, (usage, hot)


def test_two_clients_at_once_are_each_run_by_a_fork_of_their_own(place):
    starter = _starter_ready(place)
    root, _ = place
    reports = [root / f"together-{i}.json" for i in range(2)]
    clients = [_start(place, report, sleep=3, exit=4 + i) for i, report in enumerate(reports)]
    wait_for(lambda: all(report.exists() for report in reports))
    jobs = [json.loads(report.read_text()) for report in reports]
    assert all(alive(job["pid"]) for job in jobs)  # both running at once
    outputs = [client.communicate(timeout=60) for client in clients]
    assert [client.returncode for client in clients] == [4, 5]
    assert outputs == [("to stdout\n", "to stderr\n")] * 2
    assert [job["ppid"] for job in jobs] == [starter, starter] and jobs[0]["pid"] != jobs[1]["pid"]
    assert [json.loads(job["argv"][2])["exit"] for job in jobs] == [4, 5]
