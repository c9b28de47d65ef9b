"""Warm job starts (contrastlab.workflow.warm): a script handed over runs in a fork of the starter exactly as
it would have run in its own process (folder, argv, environment, umask, streams, exit status, signals,
the same bits computed), no job outlives its client, and nothing is handed over where it must not be."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from filelock import FileLock

from contrastlab.workflow import warm

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="warm starts are Linux-only")

# A stand-in for a Snakemake script: the preamble's `snakemake` global, then the hand-over, then the job.
SCRIPT = """
import sys
library_at_start = sorted(name for name in sys.modules if name.startswith("contrastlab"))
from snakemake.iocontainers import Snakemake
snakemake = Snakemake.__new__(Snakemake)  # the preamble's type: the hand-over asks for Snakemake's own
from contrastlab.workflow.warm import hand_over
hand_over(globals())
import json, os, sys, time
options = json.loads(sys.argv[2])
report = {"pid": os.getpid(), "ppid": os.getppid(), "cwd": os.getcwd(), "argv": sys.argv,
          "variable": os.environ.get("CONTRASTLAB_WORKFLOW_RUN"), "umask": os.umask(0o022),
          "stdin": sys.stdin.read() if options.get("stdin") else None, "library_at_start": library_at_start}
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
print("to stdout")
print("to stderr", file=sys.stderr)
time.sleep(options.get("sleep", 0))
sys.exit(options.get("exit", 0))
"""

# One optimisation step of a seeded model on torch's CPU kernels: the bits a job computes.
TORCH_SCRIPT = """
from snakemake.iocontainers import Snakemake
snakemake = Snakemake.__new__(Snakemake)  # the preamble's type: the hand-over asks for Snakemake's own
from contrastlab.workflow.warm import hand_over
hand_over(globals())
import hashlib, os, sys, torch
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
digest = hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in model.parameters())).hexdigest()
print(digest, os.getppid())
"""


@pytest.fixture(scope="module")
def place(tmp_path_factory):
    """A folder of this module's own for the starter's socket (TMPDIR), the scripts and their reports; a
    short idle time, and the starter stopped at the end."""
    root = tmp_path_factory.mktemp("warm")
    env = {**os.environ, "TMPDIR": str(root), warm.IDLE_VARIABLE: "60"}
    env.pop(warm.SWITCH, None)
    (root / "job.py").write_text(SCRIPT)
    (root / "torch_job.py").write_text(TORCH_SCRIPT)
    yield root, env
    for log in root.glob("contrastlab-warm-*/*.log"):
        print(log.read_text())
    subprocess.run(["pkill", "-TERM", "-f", f"contrastlab.workflow.warm {root}"], check=False)


def _command(place, report: Path, **options) -> list[str]:
    """The script's command: its report file and what it does are arguments, so that every run has the
    starter's environment (a variable more would be a starter of its own)."""
    return [sys.executable, str(place[0] / "job.py"), str(report), json.dumps(options)]


def _run(place, variables=None, **options) -> tuple[subprocess.CompletedProcess, dict]:
    root, env = place
    report = root / f"report-{time.monotonic_ns()}.json"
    done = subprocess.run(
        _command(place, report, **options),
        cwd=root,
        env={**env, **(variables or {})},
        input="from stdin" if options.get("stdin") else None,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done, json.loads(report.read_text()) if report.exists() else {}


def _start_sleeping_job(place, report_name: str, streams: int) -> tuple[subprocess.Popen, dict]:
    """The script started to sleep for a minute, its output to ``streams``; once its report is written,
    the client and what the job reported (its pid and parent)."""
    root, env = place
    report = root / report_name
    client = subprocess.Popen(
        _command(place, report, sleep=60), cwd=root, env=env, stdout=streams, stderr=streams, text=True
    )
    _wait_for(report.exists)
    return client, json.loads(report.read_text())


def _run_torch_job(place, variables=None) -> subprocess.CompletedProcess:
    root, env = place
    return subprocess.run(
        [sys.executable, str(root / "torch_job.py")],
        cwd=root,
        env={**env, **(variables or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )


def _starter_ready(place) -> int:
    """Run the script until a starter serves it (the first run, cold, starts one): the starter's pid."""
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        done, report = _run(place)
        assert done.returncode == 0, done.stderr
        if report["pid"] != _client_pid_of(report):
            return report["ppid"]
        time.sleep(0.5)
    raise AssertionError("no starter served within 90 s")


def _client_pid_of(report: dict) -> int:
    """A cold run's report comes from the client itself (its parent: pytest's subprocess); a warm one's
    from a fork of the starter, whose command line names this module."""
    cmdline = Path(f"/proc/{report['ppid']}/cmdline").read_bytes()
    return report["ppid"] if b"contrastlab.workflow.warm" in cmdline else report["pid"]


def test_a_handed_over_job_runs_as_its_own_process_would(place):
    starter = _starter_ready(place)
    root, _ = place
    # a per-run variable (not in the starter's key): the fork has the client's value, not the starter's
    done, report = _run(place, {"CONTRASTLAB_WORKFLOW_RUN": "a value; $(not run)"}, stdin=True, exit=3)
    assert report["ppid"] == starter  # run by a fork of the starter, not by the client
    assert done.returncode == 3
    assert (done.stdout, done.stderr) == ("to stdout\n", "to stderr\n")
    assert report["cwd"] == str(root)
    assert report["argv"][0] == str(root / "job.py") and json.loads(report["argv"][2]) == {
        "stdin": True,
        "exit": 3,
    }
    assert report["variable"] == "a value; $(not run)"
    assert report["library_at_start"] == []  # as in a fresh process: the job imports its own contrastlab
    assert report["stdin"] == "from stdin"
    current = os.umask(0)
    os.umask(current)
    assert report["umask"] == current


def test_a_job_learns_whether_it_started_warm_and_when_its_process_began(place):
    """A fork's start record: warm, its process begun when its client's was (before the hand-over; a fork
    begins after it), and no wait for a starter that serves already; a cold job's names why it is cold."""
    _starter_ready(place)
    before = time.time()
    done, report = _run(place, start_record=True)
    after = time.time()
    assert done.returncode == 0, done.stderr
    start = report["start"]
    assert start["warm"] is True and start["why_cold"] is None, start
    # the client's start (Python's own start-up and the script's imports before the hand-over), the
    # kernel's clock ticks (10 ms) aside
    assert before - 0.05 <= start["process_started"] < start["handed_over"] - 0.02 < after, (before, start)
    assert 0 <= start["waited_s"] < 1
    done, report = _run(place, {warm.SWITCH: "0"}, start_record=True)
    assert done.returncode == 0, done.stderr
    assert (report["start"]["warm"], report["start"]["why_cold"]) == (False, "warm starts off")
    assert report["pid"] == _client_pid_of(report)


def test_a_signal_to_the_client_ends_the_job_as_it_would_end_the_process(place):
    starter = _starter_ready(place)
    root, _ = place
    for signum, expected in ((signal.SIGTERM, -signal.SIGTERM), (signal.SIGINT, -signal.SIGINT)):
        client, job = _start_sleeping_job(place, f"signal-{signum}.json", subprocess.PIPE)
        assert job["ppid"] == starter
        client.send_signal(signum)
        _, stderr = client.communicate(timeout=30)
        assert client.returncode == expected
        if signum == signal.SIGINT:  # Python's traceback, from the script's own frame on
            lines = stderr.splitlines()
            assert lines[lines.index("Traceback (most recent call last):") + 1].startswith(
                f'  File "{root / "job.py"}"'
            ), stderr
            assert stderr.rstrip().endswith("KeyboardInterrupt"), stderr


# The main program with a stand-in (a test's, as tests/tables/test_tables.py runs scripts/tables.py), and
# Snakemake's own object in a script run in-process (runpy, not the process's __main__): either hands over
# nothing, since the hand-over ends the calling process; both print the pid that ran the script.
IN_PLACE = {
    "stand-in": """
from types import SimpleNamespace
snakemake = SimpleNamespace(rule="tables")
from contrastlab.workflow.warm import hand_over
hand_over(globals())
import os
print(os.getpid())
""",
    "in-process": """
import os, pathlib, runpy, sys
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
    root, env = place
    driver = root / f"{case}.py"
    driver.write_text(IN_PLACE[case])
    process = subprocess.Popen(
        [sys.executable, str(driver), str(root / f"{case}-script.py")],
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 0, stderr
    assert stdout.split() == [str(process.pid)]


def test_jobs_wait_for_a_starting_starter_which_stays_while_a_cold_job_runs(place):
    """No starter serves this key yet. A job that may not wait (``CONTRASTLAB_WARM_WAIT=0``) runs cold and
    starts one; the jobs started meanwhile wait for it and are run by its forks (none imports everything
    beside it); the starter stays while the cold job runs, although that outlasts its idle time, and the
    job after it is served warm."""
    own = {warm.IDLE_VARIABLE: "2", "LC_CONTRASTLAB_TEST": "cold"}  # a starter of its own key, idle after 2 s
    root, env = place
    cold_report = root / "cold.json"
    cold = subprocess.Popen(
        _command(place, cold_report, until_a_starter_serves=True, sleep=5, start_record=True),
        cwd=root,
        env={**env, **own, warm.WAIT_VARIABLE: "0"},
        stdout=subprocess.DEVNULL,
    )
    _wait_for(cold_report.exists, timeout=60)  # running cold, before any starter serves
    reports = [root / f"waited-{i}.json" for i in range(2)]
    waiting = [
        subprocess.Popen(_command(place, report), cwd=root, env={**env, **own}, stdout=subprocess.DEVNULL)
        for report in reports
    ]
    assert [client.wait(timeout=120) for client in waiting] == [0, 0]
    served = [json.loads(report.read_text()) for report in reports]
    assert all(report["pid"] != _client_pid_of(report) for report in served), served
    assert len({report["ppid"] for report in served}) == 1  # one starter served both
    assert cold.wait(timeout=120) == 0
    report = json.loads(cold_report.read_text())
    assert report["pid"] == _client_pid_of(report)  # cold: it started the starter
    assert report["start"]["why_cold"] == f"no starter yet ({warm.WAIT_VARIABLE}=0)", report["start"]
    after, report = _run(place, own)
    assert after.returncode == 0, after.stderr
    assert report["pid"] != _client_pid_of(report), "the starter left while the cold job ran"


def test_a_job_waits_only_while_a_starter_holds_the_lock(tmp_path, monkeypatch):
    """The wait ends with a connection once the starter listens, with None at once where no starter took
    the lock within the grace (it left: the CUDA driver loaded, an import failed), and after the time
    asked for where one holds it but never listens."""
    import socket
    import threading

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


def test_a_killed_client_takes_its_job_with_it(place):
    starter = _starter_ready(place)
    client, job = _start_sleeping_job(place, "killed.json", subprocess.DEVNULL)
    assert job["ppid"] == starter
    client.kill()
    client.wait()
    _wait_for(lambda: not _alive(job["pid"]), timeout=5)


def test_a_warm_job_computes_the_same_bits_as_a_cold_one(place):
    starter = _starter_ready(place)
    warm_run = _run_torch_job(place)
    cold_run = _run_torch_job(place, {warm.SWITCH: "0"})
    assert warm_run.returncode == cold_run.returncode == 0, warm_run.stderr + cold_run.stderr
    warm_digest, warm_parent = warm_run.stdout.split()
    cold_digest, cold_parent = cold_run.stdout.split()
    assert int(warm_parent) == starter and int(cold_parent) != starter
    assert warm_digest == cold_digest


def test_nothing_is_handed_over_where_it_must_not_be(tmp_path):
    """Each setting that keeps a job cold, named by the phrase its start record gives."""
    assert warm.cold_by_setting({}) is None
    assert warm.cold_by_setting({warm.SWITCH: "0"}) == "warm starts off"
    assert warm.cold_by_setting({warm.SWITCH: "off"}) == "warm starts off"
    assert warm.cold_by_setting({"SLURM_JOB_ID": "17"}) == "under SLURM"  # a job runs inside its allocation
    # and inside its container
    assert warm.cold_by_setting({"APPTAINER_CONTAINER": "/images/contrastlab.sif"}) == "in a container"
    assert warm.cold_by_setting({warm.FORK_MARK: "1"}) is not None  # the fork runs the script itself
    shared = tmp_path / "tmp"
    shared.mkdir()
    (shared / f"contrastlab-warm-{os.getuid()}").mkdir(mode=0o777)
    os.chmod(shared / f"contrastlab-warm-{os.getuid()}", 0o777)  # others could plant a socket there
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TMPDIR", str(shared))
        patch.setattr("tempfile.tempdir", None)
        assert warm.socket_path(os.environ) is None
        os.chmod(shared / f"contrastlab-warm-{os.getuid()}", 0o700)
        assert warm.socket_path(os.environ) == (
            shared / f"contrastlab-warm-{os.getuid()}" / f"{warm.starter_key(os.environ)}.sock"
        )


def test_the_starter_key_follows_what_a_fork_inherits_but_not_per_run_variables(tmp_path):
    base = {"HOME": "/home/a", "HF_HUB_OFFLINE": "1"}
    key = warm.starter_key(base)
    per_run = {"CONTRASTLAB_WORKFLOW_RUN": "host:1:2", "PYTEST_CURRENT_TEST": "t", "PWD": "/elsewhere"}
    unread = {"PATH": "/opt/slurm/bin:/usr/bin", "HTTPS_PROXY": "http://127.0.0.1:9", "MAKEFLAGS": "-s"}
    assert warm.starter_key({**base, **per_run, **unread}) == key  # a job reads these itself, from its own
    assert warm.starter_key({**base, "TMPDIR": "/scratch"}) != key  # tempfile keeps the first it finds
    assert warm.starter_key({**base, "HF_HUB_OFFLINE": "0"}) != key  # read when huggingface_hub is imported
    assert warm.starter_key({**base, "OPENBLAS_NUM_THREADS": "1"}) != key  # read when numpy is imported
    # a working copy of links to one source folder (each e2e module's repo_root) is that folder
    (tmp_path / "src").mkdir()
    (tmp_path / "copy").symlink_to(tmp_path / "src")
    linked = warm.starter_key({**base, "PYTHONPATH": f"{tmp_path / 'copy'}:/b"})
    assert linked == warm.starter_key({**base, "PYTHONPATH": f"{tmp_path / 'src'}:/b"}) != key
    soft, hard = resource.getrlimit(resource.RLIMIT_CORE)  # a fork keeps its starter's limits
    resource.setrlimit(resource.RLIMIT_CORE, (0 if soft else hard, hard))
    try:
        assert warm.starter_key(base) != key
    finally:
        resource.setrlimit(resource.RLIMIT_CORE, (soft, hard))
    assert warm.starter_key(base) == key


def test_a_second_starter_on_one_address_leaves_at_once(tmp_path):
    address = tmp_path / "key.sock"
    with FileLock(f"{address}.lock"):
        assert warm.serve(address, idle_seconds=1) == "another starter serves this address"
    assert not address.exists()


#: Why a job of a key whose starter's imports loaded the CUDA driver starts cold (its start record).
REFUSED = "starter refused: CUDA driver loaded by imports"

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
    import mmap

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
    assert refusal["reason"] == "CUDA driver loaded by imports", refusal
    assert not warm._starter_importing(address)
    assert not list(tmp_path.glob(".*partial"))  # written whole (atomically)


def test_a_refused_key_starts_its_jobs_cold_at_once_and_another_key_still_gets_a_starter(
    tmp_path, monkeypatch
):
    """A job whose key's starter refused runs cold at once: no starter started, no wait (it would wait 30 s
    here), its start record saying why. A job of another key starts a starter as before."""
    refused, other = tmp_path / "refused.sock", tmp_path / "other.sock"
    monkeypatch.setattr(warm, "PRELOAD", ())
    monkeypatch.setattr(warm, "_cuda_driver_loaded", lambda: True)
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
    from contrastlab.workflow.job_start import start_record

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
    first, first_report = _run(place, own, start_record=True)
    began = time.monotonic()
    second, second_report = _run(place, own, start_record=True)
    second_wall = time.monotonic() - began
    time.sleep(1)  # a starter writes its last line after it has let its jobs go
    folder, key = root / f"contrastlab-warm-{os.getuid()}", warm.starter_key({**env, **own})
    starters = (folder / f"{key}.log").read_text()
    assert starters.count("CUDA driver") == 1, starters  # one starter, not one per job
    assert json.loads((folder / f"{key}.refused").read_text())["reason"] == "CUDA driver loaded by imports"
    assert first.returncode == second.returncode == 0, first.stderr + second.stderr
    assert first_report["start"]["why_cold"] == second_report["start"]["why_cold"] == REFUSED
    assert first_report["start"]["waited_s"] > 0 and second_report["start"]["waited_s"] < 0.1
    assert second_wall < 10, second_wall


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _wait_for(condition, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out after {timeout} s"
        time.sleep(0.05)


def test_a_warm_job_records_its_own_usage_beside_its_benchmark_file(tmp_path, monkeypatch):
    """Snakemake's benchmark of a warm job measures the client; the fork writes its own peak memory (MB)
    and CPU seconds beside the file Snakemake will write, found from the Snakefile's patterns."""
    from types import SimpleNamespace

    class Rule(SimpleNamespace):
        pass

    rules = [Rule(name="train", benchmark=f"{tmp_path}/benchmarks/train/{{experiment,a|b}}/seed{{seed}}.tsv")]
    rules.append(Rule(name="tables", benchmark=None))
    monkeypatch.setenv(warm.BENCHMARKS_VARIABLE, warm.benchmark_patterns(rules))
    assert "a|b" not in os.environ[warm.BENCHMARKS_VARIABLE]  # constraints: the full config's pass 128 kB
    warm.record_usage(SimpleNamespace(rule="tables", wildcards={}))
    warm.record_usage(SimpleNamespace(rule="train", wildcards={"experiment": "nie2023", "seed": "42"}))
    written = list(tmp_path.rglob("*.json"))
    assert written == [tmp_path / "benchmarks/train/nie2023/seed42.warm.json"]
    usage = json.loads(written[0].read_text())
    assert usage["max_rss"] > 10 and usage["cpu_time"] > 0  # this test process's own: tens of MB at least
