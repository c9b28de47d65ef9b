"""make plan's makespan: the list-scheduling simulation checked on small DAGs worked out by hand."""

from __future__ import annotations

import pytest

from contrastlab.cost.schedule import SimJob, plan_jobs, simulate
from tests.cost.common import planned


def _cell(name: str, train: float, encode: float, probe: float) -> list[SimJob]:
    return [
        SimJob(f"train:{name}", "gpu", train),
        SimJob(f"encode:{name}", "gpu", encode, (f"train:{name}",)),
        SimJob(f"evaluate:{name}", "cpu", probe, (f"encode:{name}",)),
    ]


def test_two_cells_on_one_gpu_by_hand():
    # Longest remaining chain first: a (10+2+5 = 17) before b (4+1+5 = 10). One GPU runs
    # train a 0-10, then the ready jobs encode a (tail 7) and train b (tail 10): train b 10-14,
    # encode a 14-16, encode b 16-17; the probes on the CPU: a 16-21, b 21-26 (one CPU slot).
    jobs = _cell("a", 10, 2, 5) + _cell("b", 4, 1, 5)
    result = simulate(jobs, gpus=1, cpus=1)
    assert result.makespan_s == 26
    assert result.gpu_busy_s == 17 and result.gpu_utilisation == pytest.approx(17 / 26)
    assert result.critical_path_s == 17
    assert result.critical_path == ("train:a", "encode:a", "evaluate:a")
    # Two CPU slots: the probes overlap (a 16-21, b 17-22).
    assert simulate(jobs, gpus=1, cpus=2).makespan_s == 22
    # Two GPUs: each cell on its own, the makespan is the critical path.
    assert simulate(jobs, gpus=2, cpus=2).makespan_s == 17


def test_more_gpus_never_beat_the_bounds_and_never_slow_it_down():
    jobs = [job for i in range(7) for job in _cell(f"c{i}", 3 + 2 * i, 1 + i % 3, 4)]
    gpu_work = sum(j.seconds for j in jobs if j.slot == "gpu")
    previous = float("inf")
    for gpus in (1, 2, 3, 8):
        result = simulate(jobs, gpus, cpus=4 * gpus)
        assert result.makespan_s >= max(result.critical_path_s, gpu_work / gpus)
        assert result.makespan_s <= previous
        previous = result.makespan_s


def test_a_job_needing_an_unknown_job_is_one_line():
    with pytest.raises(ValueError, match="not in the plan: train:x"):
        simulate([SimJob("encode:x", "gpu", 1, ("train:x",))], 1, 1)


def test_the_plans_jobs_chain_training_encoding_and_probes():
    jobs = plan_jobs(
        [
            planned("train", "nie/bert/cl/seed42", 2),
            planned("encode", "nie/bert/cl/seed42", 0.1),
            planned("train_vision", "oar/r18/oar/seed42", 3),
            planned("encode_vision", "oar/r18/oar/seed42", 0.5, cpu_after_s=600),
            planned("encode_pretrained", "pretrained/bert", 0.1),
        ],
        probe_seconds=300,
        choice="config",
    )
    after = {j.name: (j.slot, j.after) for j in jobs}
    assert after["encode:nie/bert/cl/seed42"] == ("gpu", ("train:nie/bert/cl/seed42",))
    assert after["evaluate:nie/bert/cl/seed42"] == ("cpu", ("encode:nie/bert/cl/seed42",))
    assert after["encode_vision:oar/r18/oar/seed42"] == ("gpu", ("train_vision:oar/r18/oar/seed42",))
    assert after["evaluate_vision:oar/r18/oar/seed42"] == ("cpu", ("encode_vision:oar/r18/oar/seed42",))
    assert after["evaluate:pretrained/bert"] == ("cpu", ("encode_pretrained:pretrained/bert",))
    # 1 GPU: the OAR cell's training has the longest tail (3.5 h) and goes first; the GPU is busy for
    # 5.7 h, and the last GPU job (an encoding) is followed by its 300-s probe.
    result = simulate(jobs, gpus=1, cpus=8)
    assert result.makespan_s == pytest.approx((3 + 2 + 0.5 + 0.1 + 0.1) * 3600 + 300)
    assert result.critical_path == (
        "train_vision:oar/r18/oar/seed42",
        "encode_vision:oar/r18/oar/seed42",
        "evaluate_vision:oar/r18/oar/seed42",  # its 600-s probes on the CPU, done by 5.5 h + 600 s
    )
    assert result.critical_path_s == pytest.approx(3.5 * 3600 + 600)
