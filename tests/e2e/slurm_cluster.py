"""A throwaway single-node SLURM cluster on 127.0.0.1 for the tests (Debian's slurm-wlm and munge).

:func:`start_cluster` writes a ``slurm.conf`` (one node ``localhost`` with this machine's CPUs and memory and
one fake GPU as gres, ``select/cons_tres``, no accounting), a ``gres.conf`` and a munge key into a fresh
folder, starts ``munged``, ``slurmctld`` and ``slurmd`` as root until ``sinfo`` shows the node idle, and
stops them again. Nothing under ``/etc`` is read or written, and a second cluster does not collide with it.
The client commands find the configuration through ``SLURM_CONF`` and through wrappers in ``<root>/bin``
that set it (the plugin's job step drops every ``SLURM_*`` variable before its ``srun``). Where no cluster
can be had, :class:`ClusterUnavailable` says why in one line, for ``pytest.skip``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "srun", "squeue", "scancel", "scontrol", "sinfo", "sacct", "sacctmgr", "sshare")
PARTITION = "debug"
NODE = "localhost"
#: Memory left to the system (and to the Snakemake process on the same machine) below MemTotal.
MEMORY_MARGIN_MB = 2048


class ClusterUnavailable(RuntimeError):
    """The local SLURM cluster could not be started; the message is the one-line reason."""


@dataclass
class SlurmCluster:
    """A running cluster: its folder, configuration and the environment its commands need."""

    root: Path
    conf: Path
    partition: str = PARTITION
    env: dict[str, str] = field(default_factory=dict)
    processes: list[subprocess.Popen] = field(default_factory=list)

    def run(self, *command: str, timeout: float = 30) -> subprocess.CompletedProcess:
        """A client command (``squeue``, ``scancel`` ...) against this cluster, output captured."""
        return subprocess.run(command, env=self.env, capture_output=True, text=True, timeout=timeout)

    def jobs(self) -> list[dict[str, str]]:
        """Every job slurmctld still knows (finished ones for ``MinJobAge``), as ``scontrol show job
        -o`` fields: ``JobId``, ``JobState``, ``Comment`` (the plugin's ``rule_<name>_wildcards_...``),
        ``NumCPUs``, ``MinMemoryNode``, ``TimeLimit``, ``TresPerJob`` / ``TresPerNode`` ..."""
        out = self.run("scontrol", "show", "job", "-o").stdout
        return [
            dict(item.partition("=")[::2] for item in line.split() if "=" in item)
            for line in out.splitlines()
            if line.startswith("JobId=")
        ]

    def log_tail(self, lines: int = 20) -> str:
        """The last lines of the daemons' logs, for failure messages."""
        logs = [self.root / "log" / name for name in ("slurmctld.log", "slurmd.log", "munged.log")]
        tails = (
            f"--- {p.name}\n" + "\n".join(p.read_text().splitlines()[-lines:]) for p in logs if p.exists()
        )
        return "\n".join(tails)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _slurm_conf(root: Path, cpus: int, memory_mb: int) -> str:
    run = root / "run"
    return f"""\
ClusterName=contrastlab-test
SlurmctldHost={NODE}(127.0.0.1)
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={run}/munge.socket
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={run}/slurmctld.pid
SlurmdPidFile={run}/slurmd.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
GresTypes=gpu
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
# Finished jobs stay visible to squeue/scontrol this long (the plugin's squeue status needs >= 120 s).
MinJobAge=600
KillWait=5
DefMemPerCPU=500
NodeName={NODE} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={memory_mb} Gres=gpu:1 State=UNKNOWN
PartitionName={PARTITION} Nodes={NODE} Default=YES MaxTime=INFINITE State=UP
"""


def _wait(condition, timeout: float, what: str, cluster: SlurmCluster) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        for process in cluster.processes:
            if process.poll() is not None:
                raise ClusterUnavailable(
                    f"{Path(process.args[0]).name} exited with status {process.returncode} while waiting "
                    f"for {what}: {_first_error(cluster)}"
                )
        time.sleep(0.3)
    raise ClusterUnavailable(f"timed out after {timeout:.0f} s waiting for {what}: {_first_error(cluster)}")


def _first_error(cluster: SlurmCluster) -> str:
    for name in ("slurmctld.log", "slurmd.log", "munged.log", "slurmctld.out", "slurmd.out"):
        path = cluster.root / "log" / name
        if path.exists():
            for line in path.read_text(errors="replace").splitlines():
                if ("error" in line.lower() or "fatal" in line.lower()) and "pmix" not in line.lower():
                    return f"{name}: {line.strip()}"
    return f"no error in the logs under {cluster.root / 'log'}"


def start_cluster(timeout: float = 60) -> SlurmCluster:
    """Start munged, slurmctld and slurmd on a fresh configuration; raise :class:`ClusterUnavailable`
    with a one-line reason when that cannot be done here."""
    missing = [name for name in (*DAEMONS, *CLIENTS, "munge") if shutil.which(name) is None]
    if missing:
        raise ClusterUnavailable(
            f"SLURM/munge not installed ({', '.join(missing)} not found): apt-get install slurm-wlm munge"
        )
    if os.geteuid() != 0:
        raise ClusterUnavailable("the local SLURM cluster needs root (slurmd starts jobs as root here)")
    # Not under pytest's tmp_path: munged insists on a socket folder every user can traverse.
    root = Path(tempfile.mkdtemp(prefix="contrastlab-slurm-"))
    root.chmod(0o755)
    for sub in ("run", "state", "spool", "log", "bin", "munge"):
        (root / sub).mkdir()
    (root / "run").chmod(0o755)
    (root / "munge").chmod(0o700)
    conf = root / "slurm.conf"
    memory_mb = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2**20  # /proc/meminfo's MemTotal
    conf.write_text(_slurm_conf(root, os.cpu_count() or 1, memory_mb - MEMORY_MARGIN_MB))
    # A gpu nobody can use: enough for the scheduler to allocate it (gres and --gpus alike).
    (root / "gres.conf").write_text(f"NodeName={NODE} Name=gpu File=/dev/null\n")
    key = root / "munge" / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    for client in CLIENTS:
        wrapper = root / "bin" / client
        wrapper.write_text(f'#!/bin/sh\nSLURM_CONF={conf} exec {shutil.which(client)} "$@"\n')
        wrapper.chmod(0o755)
    env = dict(os.environ, SLURM_CONF=str(conf), PATH=f"{root / 'bin'}{os.pathsep}{os.environ['PATH']}")
    cluster = SlurmCluster(root=root, conf=conf, env=env)
    try:
        run_files = [f"--socket={root}/run/munge.socket", f"--pid-file={root}/run/munged.pid"]
        kept = [f"--log-file={root}/log/munged.log", f"--seed-file={root}/munge/munged.seed"]
        argv = [shutil.which("munged"), f"--key-file={key}", *run_files, *kept]
        munged = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        if munged.returncode != 0:
            reason = (munged.stderr or munged.stdout).strip().splitlines() or ["no message"]
            raise ClusterUnavailable(f"munged did not start: {reason[-1]}")
        for daemon, extra in (("slurmctld", []), ("slurmd", ["-N", NODE])):
            argv = [shutil.which(daemon), "-D", "-f", str(conf), *extra]
            with open(root / "log" / f"{daemon}.out", "w") as out:
                daemon_process = subprocess.Popen(
                    argv, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
                )
            cluster.processes.append(daemon_process)

        def node_idle() -> bool:
            done = cluster.run("sinfo", "-h", "-N", "-o", "%t")
            return done.returncode == 0 and done.stdout.strip() == "idle"

        _wait(node_idle, timeout, "the node to be idle in sinfo", cluster)
    except BaseException:
        stop_cluster(cluster)
        raise
    return cluster


def stop_cluster(cluster: SlurmCluster) -> None:
    """Cancel what is still queued or running, stop the daemons this cluster started, remove its folder."""
    with contextlib.suppress(Exception):
        if any(p.poll() is None for p in cluster.processes):
            cluster.run("scancel", "--full", "--user", "root", timeout=15)
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and cluster.run("squeue", "-h", "-t", "R,CG,PD").stdout.strip():
                time.sleep(0.5)
    for process in reversed(cluster.processes):
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=15)
    pid_file = cluster.root / "run" / "munged.pid"
    with contextlib.suppress(OSError, ValueError):
        pid = int(pid_file.read_text().strip())
        os.kill(pid, signal.SIGTERM)
        for _ in range(50):
            os.kill(pid, 0)  # raises once munged is gone
            time.sleep(0.1)
    shutil.rmtree(cluster.root, ignore_errors=True)
