"""Each benchmark runs one step on the CPU at a toy size and builds the architecture it names (the
figures themselves are printed by the benchmarks, never asserted). The scripts run in this process
through their ``main(argv)`` (no fresh interpreter and torch import per run)."""

from __future__ import annotations

import importlib.util
import json
import sys
from types import SimpleNamespace

import pytest
import torch

from contrastlab.cost.measured import grouped
from contrastlab.paths import REPO_ROOT

BENCHMARKS = REPO_ROOT / "benchmarks"


def _load(script: str):
    spec = importlib.util.spec_from_file_location(
        f"benchmark_{script.removesuffix('.py')}", BENCHMARKS / script
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(script: str, *args: str) -> None:
    """Run a benchmark script's ``main`` with these command-line arguments, in this process."""
    _load(script).main(list(args))


def test_senteval_check_flags_a_transfer_task_beyond_the_reference_tests_tolerances():
    """benchmarks/senteval.py --check holds the seven-task comparison that test_reference.py left to it
    (MR, SUBJ, MPQA): a difference within tolerance passes, one beyond it is named with its size."""
    bench = _load("senteval.py")
    reference = {task: 70.0 for task in bench.P.TRANSFER_TASKS}
    assert bench.off_tolerance(dict(reference), reference) == []
    # At the limit: the replica's 0.1 (either side).
    assert bench.off_tolerance({**reference, "MR": 70.1, "TREC": 69.9}, reference) == []
    scores = {**reference, "SUBJ": 70.2, "TREC": 68.4}
    assert bench.off_tolerance(scores, reference) == ["SUBJ senteval +0.20", "TREC senteval -1.60"]


def test_train_throughput_builds_the_named_architecture_and_times_one_step(tmp_path):
    out = tmp_path / "rows.json"
    _run(
        "train_throughput.py",
        *("--device", "cpu", "--archs", "tiny", "--batch-sizes", "4", "--steps", "1", "--warmup", "1"),
        *("--eval-sentences", "128", "--precision", "tf32", "--json", str(out), "--state-dir", str(tmp_path)),
    )
    (row,) = json.loads(out.read_text())
    # tiny = BertConfig(hidden 32, 2 layers, intermediate 64, vocab 2000) + the SimCSE head (32x32 + 32)
    assert row["arch"] == "tiny" and row["params"] == 99_712 and row["precision"] == "fp32"  # tf32 on CPU
    assert row["step_s"] > 0 and row["snapshot_s"] > 0 and row["cell_1m_min"] >= row["epoch_1m_min"]


@pytest.mark.parametrize(
    "arch, millions",
    [("bert-base", 109.5), ("bert-large", 335.1), ("roberta-base", 124.6), ("roberta-large", 355.4)],
)
def test_train_throughput_architectures_have_the_public_checkpoints_sizes(arch, millions):
    """Built on the meta device (no memory): the encoder's parameters as in the published checkpoints."""
    import transformers
    from transformers import AutoModel

    config_class, kwargs = _load("train_throughput.py").ARCHS[arch]
    with torch.device("meta"):
        model = AutoModel.from_config(getattr(transformers, config_class)(**kwargs))
    assert sum(p.numel() for p in model.parameters()) / 1e6 == pytest.approx(millions, abs=0.1)


@pytest.mark.parametrize(
    "shape, arch, oar", [("macl", "resnet18", False), ("oar-resnet50", "resnet50", True)]
)
def test_vision_throughput_builds_the_cells_shape_and_times_one_step(shape, arch, oar, capsys):
    args = ("--device", "cpu", "--shape", shape, "--width", "8", "--size", "32", "--batch-size", "8")
    _run("vision_throughput.py", *args, "--steps", "1", "--warmup", "1")
    row = json.loads(capsys.readouterr().out)
    assert row["arch"] == arch and row["oar_pass"] is oar and row["step_s"] > 0
    assert row["precision"] == "fp32" and row["cudnn_benchmark"] is False  # CPU: nothing to switch


def test_vision_throughput_times_each_variant_on_its_own(capsys):
    args = ("--device", "cpu", "--shape", "macl", "--width", "4", "--size", "16", "--batch-size", "4")
    variants = ("--variants", "one_call,contiguous,nope")
    _run("vision_throughput.py", *args, "--steps", "1", "--warmup", "0", *variants)
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [row["variant"] for row in rows] == ["one_call", "contiguous", "nope"]
    assert rows[0]["augment_calls"] == "one" and rows[0]["steps_per_s"] > 0
    assert rows[1]["augment_calls"] == "two" and rows[1]["channels_last"] is False
    assert rows[2]["error"].startswith("ValueError: variant must be one of")  # reported, the others ran


def test_gpu_share_runs_k_copies_and_sums_their_rates(tmp_path):
    # Its own interpreter: the copies are spawned processes, which must import the script by path.
    import subprocess

    out = tmp_path / "share.json"
    subprocess.run(
        [sys.executable, str(BENCHMARKS / "gpu_share.py"), "--device", "cpu", "--arch", "tiny"]
        + ["--concurrency", "1", "2", "--steps", "1", "--warmup", "1", "--json", str(out)]
        + ["--state-dir", str(tmp_path / "state"), "--fork"],
        check=True,
        cwd=REPO_ROOT,
    )
    rows = json.loads(out.read_text())
    assert [row["k"] for row in rows] == [1, 2] and [len(row["steps_per_s"]) for row in rows] == [1, 2]
    assert rows[1]["sum"] == pytest.approx(sum(rows[1]["steps_per_s"]))
    assert rows[0]["speedup"] == 1.0 and rows[1]["speedup"] == pytest.approx(rows[1]["sum"] / rows[0]["sum"])


def test_tensorboard_cost_trains_the_cell_with_events_on_and_off(tmp_path, capsys):
    out = tmp_path / "rows.json"
    options = ["--steps", "4", "--log-every", "2", "--repeats", "1"]
    _run("tensorboard_cost.py", *options, "--out", str(tmp_path / "o"), "--json", str(out))
    rows = json.loads(out.read_text())
    assert [row["events"] for row in rows] == ["off", "on"] and all(row["ms_per_step"] > 0 for row in rows)
    assert list((tmp_path / "o" / "run0-on" / "state.tensorboard").glob("events.out.tfevents.*"))
    assert not (tmp_path / "o" / "run0-off" / "state.tensorboard").exists()
    assert "difference:" in capsys.readouterr().out


def test_gpu_step_compares_the_variants_losses_with_eager_on_a_cpu(tmp_path, capsys):
    """benchmarks/gpu_step.py at toy size: the 2D-mask eager and the 4D-mask variants' losses equal a
    separate eager run's (bit_equal: eager is deterministic on a CPU), and a CUDA-only variant reports
    its error without stopping the others."""
    out = tmp_path / "rows.jsonl"
    _run(
        "gpu_step.py",
        *("--toy", "--device", "cpu", "--part", "sentence", "--precisions", "fp32", "--batch", "8"),
        *("--variants", "eager2d,graph,mask4d", "--steps", "2", "--warmup", "2"),
        *("--out", str(out), "--scratch", str(tmp_path / "scratch")),
    )
    rows = {row["variant"]: row for row in map(json.loads, out.read_text().splitlines())}
    assert sorted(rows) == ["eager2d", "graph", "mask4d"]  # the reference run is no row
    assert rows["eager2d"]["bit_equal"] is True and rows["mask4d"]["bit_equal"] is True
    assert rows["eager2d"]["reference"] == rows["mask4d"]["reference"] == "separate eager run (mask4d)"
    assert rows["mask4d"]["steps_per_s"] > 0 and rows["mask4d"]["kernels_per_step"] > 0
    assert rows["graph"]["error"] == "RuntimeError: graph needs a CUDA device"


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_vision_throughput_eager_is_the_trainers_default_step(device):
    """The ``eager`` variant's switches are VisionTrainSettings' defaults as train() applies them on that
    device (channels-last None = CUDA only; cudnn.benchmark set on CUDA only, left alone on a CPU); every
    other variant changes exactly one of them. On a CPU the measured eager row reports them."""
    from contrastlab.training.vision import VisionTrainSettings

    bench = _load("vision_throughput.py")
    d = VisionTrainSettings()
    cuda = device == "cuda"
    trainer = {
        "channels_last": cuda if d.channels_last is None else d.channels_last,
        "augment_calls": d.augment_calls,
        "cudnn_benchmark": d.cudnn_benchmark if cuda else None,
        "compile": d.compile,
    }
    assert bench.switches("eager", torch.device(device)) == trainer
    for variant in bench.VARIANTS:
        changed = {k for k, v in bench.switches(variant, torch.device(device)).items() if trainer[k] != v}
        assert len(changed) <= 1 and changed <= set(bench.CHANGES[variant]), variant
    assert bench.switches("cudnn_off", torch.device("cuda"))["cudnn_benchmark"] is False
    if not cuda:
        row = bench.measure(torch.device("cpu"), "macl", 4, steps=1, warmup=0, width=4, size=16)
        assert row["variant"] == "eager" and row["augment_calls"] == d.augment_calls
        assert row["compiled"] is d.compile and row["channels_last"] is (d.channels_last or False)
        assert row["cudnn_benchmark"] is torch.backends.cudnn.benchmark  # a CPU: train() leaves it alone


def test_vision_throughput_eager_follows_the_dataclass_not_a_copy(monkeypatch):
    """The defaults are read from VisionTrainSettings' fields, not retyped: change one, eager follows."""
    from contrastlab.training.vision import VisionTrainSettings

    bench = _load("vision_throughput.py")
    fields = VisionTrainSettings.__dataclass_fields__
    monkeypatch.setattr(fields["augment_calls"], "default", "one")
    monkeypatch.setattr(fields["cudnn_benchmark"], "default", False)
    monkeypatch.setattr(fields["channels_last"], "default", True)
    assert bench.switches("eager", torch.device("cuda")) == {
        "channels_last": True, "augment_calls": "one", "cudnn_benchmark": False, "compile": False
    }  # fmt: skip
    row = bench.measure(torch.device("cpu"), "macl", 4, 1, 0, width=4, size=16)
    assert row["augment_calls"] == "one" and row["channels_last"] is True


@pytest.mark.parametrize(
    "variant, before, during", [("cudnn_bench", False, True), ("cudnn_off", True, False)]
)
def test_vision_throughput_reports_the_cudnn_flag_in_effect_while_timing(
    variant, before, during, monkeypatch
):
    """The row's ``cudnn_benchmark`` is the value the timed steps ran with, and the flag is restored
    afterwards (on a CPU the flag can be set: it changes nothing there)."""
    bench = _load("vision_throughput.py")
    seen, train_step = [], bench.train_step

    def recording(*args, **kwargs):
        seen.append(torch.backends.cudnn.benchmark)
        return train_step(*args, **kwargs)

    monkeypatch.setattr(bench, "train_step", recording)
    monkeypatch.setattr(torch.backends.cudnn, "benchmark", before)
    row = bench.measure(torch.device("cpu"), "macl", 4, steps=2, warmup=1, width=4, size=16, variant=variant)
    assert seen == [during] * 3 and row["cudnn_benchmark"] is during
    assert torch.backends.cudnn.benchmark is before  # restored


def test_gpu_step_compares_every_row_with_a_separate_eager_run(tmp_path, monkeypatch):
    """The reference losses come from a run of their own (the mask4d step, once per precision, before the
    variants, not reported), never from the row itself: perturb that run's losses and the eager2d row,
    bit-equal to it otherwise, is no longer bit-equal."""
    bench = _load("gpu_step.py")
    calls, run_variant = [], bench.run_variant

    def recording(name, precision, *args, **kwargs):
        calls.append((name, kwargs.get("tag")))
        row = run_variant(name, precision, *args, **kwargs)
        if kwargs.get("tag", "").startswith("reference"):
            row["losses"][1] *= 1 + 1e-3
        return row

    monkeypatch.setattr(bench, "run_variant", recording)
    out = tmp_path / "rows.jsonl"
    toy = ("--toy", "--device", "cpu", "--part", "sentence", "--precisions", "fp32", "--batch", "8")
    scratch = ("--out", str(out), "--scratch", str(tmp_path / "scratch"))
    bench.main([*toy, "--variants", "eager2d", "--steps", "2", "--warmup", "1", *scratch])
    assert calls == [("mask4d", "reference-mask4d-fp32"), ("eager2d", None)]
    (row,) = map(json.loads, out.read_text().splitlines())  # the reference is not a row
    assert row["variant"] == "eager2d" and row["reference"] == "separate eager run (mask4d)"
    assert row["bit_equal"] is False and row["max_rel_diff"] == pytest.approx(1e-3, rel=1e-3)


def test_gpu_step_compare_losses_names_the_reference_and_finds_a_difference():
    bench = _load("gpu_step.py")
    row = bench.compare_losses({"losses": [1.0, 2.0, 4.0]}, [1.0, 2.0, 4.0])
    assert row["bit_equal"] is True and row["max_rel_diff"] == 0.0
    assert row["reference"] == "separate eager run (mask4d)"
    row = bench.compare_losses({"losses": [1.0, 2.0, 4.0]}, [1.0, 2.0, 4.0 * (1 + 1e-7)])
    assert row["bit_equal"] is False and 0 < row["max_rel_diff"] < 2e-7


def test_gpu_step_dev_equivalence_compares_each_way_with_a_separate_eager_run_on_a_cpu():
    """The importable dev check (benchmarks/gpu_bench.py calls it): on a CPU the two eager ways, each
    against a separate eager IEEE run of the 512 bucketing; the graph ways need CUDA and are left out."""
    bench = _load("gpu_step.py")
    rows = bench.dev_equivalence(torch.device("cpu"), toy=True, sentences=300)
    assert [row["variant"] for row in rows] == ["dev:trainer_128_2d_ieee", "dev:bucket512_4d_ieee"]
    assert all(row["reference"] == "separate eager run (bucket512_4d_ieee)" for row in rows)
    trainer, bucket = rows
    assert bucket["max_rel_diff_vs_first"] == 0.0 and bucket["within_tolerance"] is True  # CPU: deterministic
    assert trainer["max_rel_diff_vs_first"] < 1e-5 and "within_tolerance" not in trainer  # other padding
    assert all(row["s_per_eval"] > 0 and row["s_per_cell_126"] == 126 * row["s_per_eval"] for row in rows)


def test_gpu_step_dev_equivalence_restores_a_given_models_mode_and_the_fp32_switches():
    from contrastlab.precision import fp32_mode_now, set_fp32_mode

    bench = _load("gpu_step.py")
    model, _ = bench.bert(True, torch.device("cpu"))
    before = fp32_mode_now()
    rows = bench.dev_equivalence(torch.device("cpu"), model=model, sentences=40)
    assert model.training and len(rows) == 2 and all("error" not in row for row in rows)
    assert fp32_mode_now() == before
    set_fp32_mode("ieee")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the CUDA-graph dev ways need a CUDA device")
def test_gpu_step_graphed_dev_forward_keeps_its_inputs_and_matches_eager():
    """The graphed dev forward within 1e-6 of eager in IEEE fp32 (its mask was freed after capture: 0.67)."""
    bench = _load("gpu_step.py")
    rows = {row["variant"]: row for row in bench.dev_equivalence(torch.device("cuda"), toy=True)}
    graph = rows["dev:bucket512_4d_graph_ieee"]
    assert "error" not in graph and graph["within_tolerance"] is True, graph
    assert rows["dev:bucket512_4d_graph_tf32"]["max_rel_diff_vs_first"] < 1e-2


def test_gpu_bench_runs_every_part_at_toy_size_on_a_cpu(tmp_path):
    """benchmarks/gpu_bench.py (make gpu-bench) end to end at toy size: every part gives its rows, and the
    Markdown table and the JSON file are written. On a CPU the graph's place in the two equivalence
    checks and in the packed cells is taken by the eager step (rows say captured false): a CPU's eager
    step is bit-reproducible, so both checks must pass here."""
    bench = _load("gpu_bench.py")
    result = bench.main(["--toy", "--device", "cpu", "--out", str(tmp_path), "--work", str(tmp_path / "w")])
    rows = result["rows"]
    by_part = grouped(rows, lambda row: row["part"])
    assert set(by_part) == set(bench.PARTS)
    assert not [r for r in rows if "error" in r], rows
    (pack,) = by_part["pack"]  # two toy cells at once, each its own process, timed together
    assert pack["pack"] == 2 and len(pack["steps_per_s_each"]) == 2 and pack["captured"] is False
    spread, det = by_part["spread"], by_part["deterministic"]
    assert {r["precision"] for r in spread} == {r["precision"] for r in det} == {"bf16", "fp32"}
    assert all(r["within"] and not r["captured"] for r in spread)
    assert all(r["bit_equal"] and r["steps"] == 6 for r in det)
    (cell,) = by_part["cell"]
    assert cell["steps"] == 20 and cell["dev_evaluations"] == 3 and cell["cuda_graph"] is False
    assert cell["dev_batch_size"] == 128  # a CPU keeps its dev batches
    table = (tmp_path / "gpu_bench.md").read_text()
    (padfree,) = by_part["padfree"]  # fp32 only on a CPU: padding-free vs padded, the same masks
    assert padfree["padded_vs_padded_max"] == 0.0 and 0 < padfree["packed_vs_padded_max"] < 1e-5
    assert padfree["padded_ms"] > 0 and padfree["packed_ms"] > 0 and "graph_ms" not in padfree
    # + the dev way that states a tolerance, + padfree's rounding-level agreement
    assert table.count("| pass |") == len(spread) + len(det) + 2
    assert json.loads((tmp_path / "gpu_bench.json").read_text())["rows"] == json.loads(json.dumps(rows))


def test_gpu_bench_times_the_pack_part_from_its_own_start(tmp_path, monkeypatch):
    """``--pack-until-s`` counts from the pack part's own start, not the benchmark's. On a
    fake clock the parts before it take 300 s and each packed configuration 100 s: with 250 s the
    configurations starting 0, 100 and 200 s into the part run, the one at 300 s is skipped."""
    bench = _load("gpu_bench.py")
    now = [1000.0]
    monkeypatch.setattr(bench, "time", SimpleNamespace(perf_counter=lambda: now[0]))
    environment = {"device": "cpu", "torch": "-", "transformers": "-", "date": "-"}
    monkeypatch.setattr(bench, "environment", lambda device: environment)

    def earlier_parts(args, device):
        now[0] += 300.0
        return [{"note": "the parts before pack"}]

    def configuration(args, k, mps, env):
        now[0] += 100.0
        return {"pack": k, "mps": mps, "steps_per_s_sum": 1.0}

    monkeypatch.setitem(bench.PART_FUNCTIONS, "oar", earlier_parts)
    monkeypatch.setattr(bench, "_pack_row", configuration)
    argv = ["--device", "cpu", "--parts", "oar,pack", "--pack", "2,3,4,5", "--pack-until-s", "250"]
    rows = bench.main([*argv, "--budget-s", "1000", "--out", str(tmp_path)])["rows"]
    pack = [row for row in rows if row["part"] == "pack"]
    assert [row["pack"] for row in pack if "error" not in row] == [2, 3, 4]
    assert [row["error"] for row in pack if "error" in row] == [
        "skipped: 300 s into the pack part, past --pack-until-s 250"
    ]


def test_gpu_bench_draws_wiki1m_lengths():
    bench = _load("gpu_bench.py")
    lengths = bench.wiki1m_lengths(200_000, seed=0)
    assert lengths.min() >= 3 and lengths.max() == 32
    assert abs(lengths.mean() - 21.9) < 0.1 and abs((lengths == 32).mean() - 0.271) < 0.005


def test_gpu_step_runs_both_equivalence_checks_on_request(tmp_path, capsys):
    """gpu_step.py --deterministic --repeat: contrastlab.training.equivalence's checks as rows (on a CPU
    an eager run stands in for the graph: captured false, and a CPU's eager step is reproducible)."""
    out = tmp_path / "rows.jsonl"
    _run("gpu_step.py", "--toy", "--device", "cpu", "--part", "none", "--precisions", "fp32", "--steps", "4",
         "--deterministic", "--repeat", "2", "--out", str(out), "--scratch", str(tmp_path))  # fmt: skip
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["variant"] for r in rows] == ["equivalence:deterministic", "equivalence:spread"]
    assert rows[0]["bit_equal"] and rows[0]["steps"] == 4 and rows[0]["captured"] is False
    assert rows[1]["within"] and rows[1]["repeat"] == 2 and rows[1]["eager_vs_eager_max"] == 0.0


@pytest.mark.fault(
    "benchmarks/gpu_step.py or gpu_share.py on a machine without a GPU",
    "one contrastlab: line and exit status 1 (they ran on the CPU), unless --toy (gpu_step) or --device cpu",
)
@pytest.mark.parametrize(
    ("script", "quick"),
    [("gpu_step.py", "--part none --out"), ("gpu_share.py", "--arch tiny --steps 1 --state-dir")],
)
def test_gpu_benchmarks_refuse_without_a_gpu(script, quick, tmp_path, monkeypatch, capsys, observed):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(SystemExit) as stopped:  # without the refusal: a quick run on the CPU
        _run(script, *quick.split(), str(tmp_path / "out"))
    line = capsys.readouterr().err
    observed(line.strip())
    assert stopped.value.code == 1 and line.count("\n") == 1
    assert line.startswith(f"contrastlab: benchmarks/{script} needs a CUDA GPU and torch sees none (torch ")


def test_padding_free_times_the_padded_and_the_packed_step_at_toy_size(capsys):
    """benchmarks/padding_free.py at a toy size: both step times and their ratio are printed."""
    toy = ("--batch", "4", "--length", "8", "--hidden", "32", "--heads", "4", "--intermediate", "64")
    _run("padding_free.py", *toy, "--layers", "1", "--vocab", "2000", "--steps", "2", "--warmup", "1")
    lines = {line.split()[0]: line.split() for line in capsys.readouterr().out.splitlines()[1:]}
    assert set(lines) == {"padded", "packed", "ratio"}
    assert float(lines["padded"][1]) > 0 and float(lines["packed"][1]) > 0 and float(lines["ratio"][1]) > 0


def test_the_snapshot_benchmark_times_the_loop_three_ways(tmp_path, capsys):
    """benchmarks/snapshots.py at toy size: the loop without snapshots, with background writes and with
    writes in the loop; one snapshot each after step 2 of 4, every write counted."""
    out = tmp_path / "snapshots.json"
    rows = _load("snapshots.py").main(
        ["--device", "cpu", "--arch", "tiny", "--steps", "4", "--every", "2", "--batch", "8", "--warmup", "1"]
        + ["--repeat", "1", "--json", str(out)]
    )
    assert [r["way"] for r in rows] == ["none", "background", "in the loop"]
    assert [r["snapshots"] for r in rows] == [0, 1, 1] and all(r["loop_s"] > 0 for r in rows)
    assert rows[1]["write_s"] > 0 and json.loads(out.read_text()) == json.loads(json.dumps(rows))
    assert "| background |" in capsys.readouterr().out


@pytest.mark.fault(
    "make gpu-bench on a machine without a GPU",
    "one contrastlab: line and exit status 1 (it ran on the CPU silently), unless --toy or --device cpu",
)
def test_gpu_bench_without_a_gpu_stops_in_one_line_unless_asked_for_the_cpu(monkeypatch, capsys, observed):
    bench = _load("gpu_bench.py")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(SystemExit) as stopped:
        bench.parse([])
    line = capsys.readouterr().err
    observed(line.strip())
    assert stopped.value.code == 1 and line.count("\n") == 1
    assert line.startswith("contrastlab: make gpu-bench needs a CUDA GPU and torch sees none (torch ")
    assert line.endswith(
        "run it on a GPU node, or pass --toy --device cpu for its checks at toy size on this CPU\n"
    )
    assert bench.parse(["--toy"]).device == bench.parse(["--device", "cpu"]).device == "cpu"
