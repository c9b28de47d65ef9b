"""When will it finish: a list-scheduling simulation of the plan's jobs over N GPUs and C CPU slots.

The jobs are the plan's (:func:`contrastlab.cost.plan.make_plan`): each cell's training, its GPU
evaluation, then its CPU probe job; each Pretrained row's ``encode_pretrained`` then its probe job. A job
starts once the jobs it needs have finished and a slot of its kind is free; among the ready jobs, the
one with the longest chain of work still behind it goes first (critical-path-first list scheduling,
within 2× of the optimum; Snakemake orders by other priorities, so a real run may take longer).

Reported per N: the makespan, the GPUs' utilisation (busy GPU time ÷ N × makespan), and the two lower
bounds no schedule beats: the critical path and the GPU work ÷ N. Figures, tables and the searches'
later stages are not simulated: they are minutes, or not in the default target.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from contrastlab.blocks import Heading, Paragraph, rows_table


@dataclass(frozen=True)
class SimJob:
    """One job of the simulation: name, slot (``gpu`` or ``cpu``), seconds, and the jobs it needs."""

    name: str
    slot: str
    seconds: float
    after: tuple[str, ...] = ()


@dataclass(frozen=True)
class Schedule:
    """The simulation's answer for one slot count (see the module docstring)."""

    gpus: int
    cpus: int
    makespan_s: float
    gpu_busy_s: float
    critical_path_s: float
    critical_path: tuple[str, ...]

    @property
    def gpu_utilisation(self) -> float:
        return self.gpu_busy_s / (self.gpus * self.makespan_s) if self.makespan_s else 0.0


def simulate(jobs: Sequence[SimJob], gpus: int, cpus: int) -> Schedule:
    """Run ``jobs`` on ``gpus`` GPU slots and ``cpus`` CPU slots, critical-path-first (module docstring)."""
    if gpus < 1 or cpus < 1:
        raise ValueError(f"the simulation needs at least one GPU and one CPU slot, got {gpus} and {cpus}")
    by_name = {j.name: j for j in jobs}
    missing = sorted({n for j in jobs for n in j.after} - by_name.keys())
    if missing:
        raise ValueError(f"jobs need jobs that are not in the plan: {', '.join(missing[:3])}")
    needed_by: dict[str, list[str]] = {j.name: [] for j in jobs}
    for job in jobs:
        for name in job.after:
            needed_by[name].append(job.name)
    # per job, the longest chain of work from its start to the DAG's end, and the next job on it
    tail: dict[str, float] = {}
    following: dict[str, str | None] = {}

    def visit(name: str) -> float:  # the DAG is three jobs deep: recursion is shallow
        if name not in tail:
            best = max(needed_by[name], key=visit, default=None)
            tail[name] = by_name[name].seconds + (visit(best) if best else 0.0)
            following[name] = best
        return tail[name]

    for job in jobs:
        visit(job.name)
    waiting_on = {j.name: len(j.after) for j in jobs}
    free = {"gpu": gpus, "cpu": cpus}
    # ready jobs per slot kind, longest tail first (name breaks ties: the same plan, the same answer)
    ready: dict[str, list[tuple[float, str]]] = {"gpu": [], "cpu": []}
    for job in jobs:
        if not job.after:
            heapq.heappush(ready[job.slot], (-tail[job.name], job.name))
    running: list[tuple[float, str]] = []  # (end time, name)
    now = gpu_busy = 0.0
    done = 0
    while done < len(jobs):
        for slot, queue in ready.items():
            while free[slot] and queue:
                _, name = heapq.heappop(queue)
                free[slot] -= 1
                heapq.heappush(running, (now + by_name[name].seconds, name))
                if slot == "gpu":
                    gpu_busy += by_name[name].seconds
        now, name = heapq.heappop(running)
        free[by_name[name].slot] += 1
        done += 1
        for later in needed_by[name]:
            waiting_on[later] -= 1
            if not waiting_on[later]:
                heapq.heappush(ready[by_name[later].slot], (-tail[later], later))
    name = max(by_name, key=lambda n: (tail[n], n), default=None)
    path: list[str] = []
    while name is not None:
        path.append(name)
        name = following[name]
    return Schedule(gpus, cpus, now, gpu_busy, max(tail.values(), default=0.0), tuple(path))


def plan_jobs(planned: Sequence[Any], probe_seconds: float, choice: str) -> list[SimJob]:
    """The simulation's jobs from the plan's under one precision choice: an encoding needs its cell's
    training, a CPU probe job (``probe_seconds``, or an image cell's ``cpu_after_s``) its encoding."""
    trained = {p.cell for p in planned if p.rule.startswith("train")}
    training = {"encode": "train", "search_encode": "train", "encode_vision": "train_vision"}
    out = []
    for p in planned:
        name = f"{p.rule}:{p.cell}"
        after = (f"{training[p.rule]}:{p.cell}",) if p.rule in training and p.cell in trained else ()
        out.append(SimJob(name, "gpu", p.seconds[choice], after))
        if p.rule in ("encode", "encode_pretrained"):
            out.append(SimJob(f"evaluate:{p.cell}", "cpu", probe_seconds, (name,)))
        if p.rule == "encode_vision":
            out.append(SimJob(f"evaluate_vision:{p.cell}", "cpu", p.cpu_after_s, (name,)))
    return out


def hm(seconds: float) -> str:
    """``h:mm`` of a duration in seconds (rounded to the minute)."""
    minutes = round(seconds / 60)
    return f"{minutes // 60}:{minutes % 60:02d}"


def schedule_blocks(
    planned: Sequence[Any],
    probe_seconds: float,
    choice: str,
    gpu_counts: Sequence[int],
    cpus_per_gpu: int,
) -> list:
    """The makespan section of ``make plan``: per GPU count N (``cpus_per_gpu`` × N CPU slots), the
    makespan, the GPUs' utilisation and the two lower bounds."""
    jobs = plan_jobs(planned, probe_seconds, choice)
    gpu_work = sum(j.seconds for j in jobs if j.slot == "gpu")
    rows: list[Mapping[str, str]] = []
    path: tuple[str, ...] = ()
    for gpus in sorted(set(gpu_counts)):
        result = simulate(jobs, gpus, cpus_per_gpu * gpus)
        path = result.critical_path
        rows.append(
            {
                "GPUs": str(gpus),
                "CPU slots": str(result.cpus),
                "makespan (h:mm)": hm(result.makespan_s),
                "GPU utilisation": f"{result.gpu_utilisation:.0%}",
                "bound: GPU work ÷ N": hm(gpu_work / gpus),
                "bound: critical path": hm(result.critical_path_s),
            }
        )
    return [
        Heading(3, "When it finishes (list-scheduling simulation)"),
        Paragraph(
            f"The plan's GPU jobs ({choice.replace('config', 'as configured')}) over N GPUs and their probe "
            f"jobs (SentEval and image) over {cpus_per_gpu} CPU slots per GPU, the longest remaining chain "
            "first (`contrastlab.cost.schedule`; a real scheduler may take somewhat longer). Critical path: "
            + " → ".join(f"`{name}`" for name in path)
            + "."
        ),
        rows_table(rows, right=1),
    ]
