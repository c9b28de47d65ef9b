"""The sentence training step on a device: eager vs 4D mask vs CUDA graph vs compile, per precision.

Answers gpu-speed.md §5's sentence questions (docs/training-speed.md says how to read the output). It builds
a randomly initialised BERT (``BertConfig()``: BERT-base, nothing downloaded; ``--toy``: config/demo.yaml's
tiny BERT) and calls the trainer's own pieces (``train_step``, ``build_head``, ``build_loss``,
``build_optimizer``, ``TrainingRun.optimizer_step``, ``training.capture``), never ``TrainSettings``, so it
needs neither jsonschema nor snakemake nor data. Batches: ``--batch`` sentences of lengths drawn like
wiki1m's (27 % at the 32-token cap, the rest uniform from 8), padded to 32 (static shapes), the same
batches in the same order for every variant, one seed.

Variants (each on its own: a failing one prints its error and the others go on):
- ``trainer``: the trainer's host path per step (numpy gather and padding to the batch's longest,
  ``pin_memory``, H2D copy), dynamic shapes, 4D mask: what ``train()`` runs today;
- ``eager2d``: static shapes, the 2D mask (transformers' ``padding_mask.all()`` sync per forward);
- ``mask4d``: static shapes, the prebuilt 4D mask (no sync in the step);
- ``graph``: ``mask4d`` captured whole as a CUDA graph (``capture.capture_sentence_step``; CUDA only);
- ``compile``, ``compile_ro`` (``mode="reduce-overhead"``, CUDA only), ``compile_graph`` (the compiled
  encoder inside the captured step, CUDA only): TorchInductor, own dropout stream.

Each prints one JSON line (appended to ``--out``) and a table at the end: ``steps_per_s``, ``ms_per_step``,
``host_ms_per_step`` (the Python loop before the final synchronize: equal to ms_per_step = host-bound),
``busy_ms_per_step`` (device kernel time per step from torch.profiler over 3 steps; on a CPU the
profiled CPU time), ``kernels_per_step`` (CUDA kernels; on a CPU the aten ops), ``warmup_s`` (warm-up
or compile, or capture), ``peak_gib``, ``cell_min`` (15,625 steps), ``loss_mean_first_20``, and the
loss check against a separate eager run: per precision, before the variants, the ``mask4d`` step runs
once more on its own (:func:`sentence_reference`, not reported), and every row's losses are compared
with that run's (:func:`compare_losses`): ``reference`` (``"separate eager run (mask4d)"``),
``bit_equal`` (every loss equal as floats) and ``max_rel_diff``. No row is compared with itself, so on a
GPU, where eager is not bit-reproducible, the eager rows show eager's own run-to-run spread.

``--part dev``: one STS-B-dev-sized evaluation (forward only) four ways (:data:`DEV_WAYS`: the trainer's
128-sentence batches with the 2D mask, 512-sentence length buckets with the 4D mask eager, and the same
captured in CUDA graphs in IEEE fp32 and TF32; the graph ways on CUDA only), each with
``max_rel_diff_vs_first`` from a separate eager IEEE-fp32 run of the 512 bucketing (the first run made);
the graphed IEEE way must be within 1e-6 of it (``within_tolerance``). Another script calls it as
``dev_equivalence(device, *, toy=False, model=None, sentences=2909, seed=5) -> list[dict]`` (one row per
way; see its docstring), e.g. ``dev_equivalence(torch.device("cuda"))`` for BERT-base or
``dev_equivalence(torch.device("cpu"), toy=True, sentences=300)`` for a CPU smoke test.

``--deterministic`` / ``--repeat N``: the two checks of :mod:`contrastlab.training.equivalence` per precision
(``equivalence:deterministic``: graph and eager bit-equal under deterministic algorithms over ``--steps``
steps; ``equivalence:spread``: N eager and N graph runs, the graph within eager's own run-to-run spread),
each eager reference a separate run; ``benchmarks/gpu_bench.py`` runs both on BERT-base.

Three GPU commands of under 10 minutes each (the images' third is benchmarks/vision_throughput.py's):

    python benchmarks/gpu_step.py --part host,sentence,dev     # ~7 min on an H100/H200
    python benchmarks/gpu_step.py --part compile --precisions bf16 --budget-s 540
    python benchmarks/gpu_step.py --toy --device cpu --part sentence --precisions fp32 \\
        --variants eager2d,mask4d,compile --steps 30 --warmup 3     # the CPU smoke test
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch
import yaml
from torch import nn

from contrastlab import cuda
from contrastlab.losses import build_loss
from contrastlab.models.text import attention_bias
from contrastlab.precision import ieee_fp32, set_fp32_mode
from contrastlab.training import capture, equivalence
from contrastlab.training.runtime import TrainingRun, build_optimizer, device_name
from contrastlab.training.sentence import build_head  # reads the paper records: a broken one stops here
from contrastlab.training.sentence_step import to_device

DEMO = Path(__file__).resolve().parents[1] / "config" / "demo.yaml"
L = 32  # max_length of every sentence cell
CAP_SHARE = 0.27  # wiki1m sentences at the 32-token cap (first audit)
CELL_STEPS = 15_625  # 1M sentences / batch 64
DEV_SENTENCES, DEV_MEAN_TOKENS = 2_909, 16.4  # STS-B dev: unique sentences, mean tokens
VARIANTS = ("trainer", "eager2d", "mask4d", "graph", "compile", "compile_ro", "compile_graph")
CUDA_ONLY = {"graph", "compile_ro", "compile_graph"}
#: The eager step every sentence row's losses are compared with: run once more per precision, on its own,
#: before the variants (not reported as a variant), so no row is compared with itself.
REFERENCE = "mask4d"
REFERENCE_LABEL = f"separate eager run ({REFERENCE})"


class Mask2d(nn.Module):
    """The encoder without ``config`` on the wrapper: ``attention_bias`` hands the 2D mask through and
    transformers builds the 4D one itself (asking ``padding_mask.all()``: the step as it was)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, **inputs):
        return self.model(**inputs)


def bert(
    toy: bool, device: torch.device, seed: int = 0, vocab_size: int = 30522
) -> tuple[nn.Module, nn.Module]:
    """A random BERT (BERT-base, or config/demo.yaml's tiny BERT with ``toy``) and its SimCSE head, in
    train mode on ``device``; ``vocab_size``: bert-base-uncased's by default."""
    from transformers import BertConfig, BertModel

    torch.manual_seed(seed)
    spec = yaml.safe_load(DEMO.read_text())["backbones"]["tiny-bert"]["random"] if toy else {}
    config = BertConfig(vocab_size=vocab_size, **spec)  # without spec: BERT-base, 12 x 768, 110 M
    model = BertModel(config).to(device).train()
    head, _ = build_head("simcse", "bert", config.hidden_size, config.initializer_range)
    return model, head.to(device).train()


def token_table(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` sentences as a padded int32 token table [n, L] and their lengths (wiki1m-like)."""
    rng = np.random.default_rng(seed)
    lengths = np.where(rng.random(n) < CAP_SHARE, L, rng.integers(8, L, n))
    table = rng.integers(1000, 30000, (n, L)).astype(np.int32)
    table[np.arange(L)[None, :] >= lengths[:, None]] = 0
    return table, lengths


def host_batch(table, lengths, rows, width: int | None) -> tuple[torch.Tensor, torch.Tensor]:
    """The trainer's host batch: gather, pad to the longest (or ``width``), ids and mask."""
    w = width or int(lengths[rows].max())
    ids = torch.from_numpy(table[rows, :w].astype(np.int64))
    mask = torch.from_numpy((np.arange(w)[None, :] < lengths[rows, None]).astype(np.int64))
    return ids, mask


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def profile(step, device, steps: int = 3) -> tuple[float, float]:
    """(busy ms per step, kernels per step): CUDA kernels' time and count, or on a CPU the aten ops'."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as prof

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with prof(activities=activities) as p:
        for _ in range(steps):
            step()
        sync(device)
    events = p.events()
    if device.type == "cuda":
        kernels = [e for e in events if e.device_type == torch.autograd.DeviceType.CUDA]
        return sum(e.device_time for e in kernels) / 1e3 / steps, len(kernels) / steps
    ops = [e for e in events if e.name.startswith("aten::")]
    top = [e for e in ops if e.cpu_parent is None or not e.cpu_parent.name.startswith("aten::")]
    return sum(e.cpu_time_total for e in top) / 1e3 / steps, len(ops) / steps


def run_variant(
    name: str, precision: str, args, device, batches, table, lengths, *, tag: str | None = None,
    profiled: bool = True,
) -> dict:  # fmt: skip
    """Warm up, time ``args.steps`` steps, profile 3 (unless not ``profiled``), return the row (with its
    ``losses``, every step's). ``tag``: the run's scratch folder name (default ``<name>-<precision>``)."""
    if name in CUDA_ONLY and device.type != "cuda":
        raise RuntimeError(f"{name} needs a CUDA device")
    model, head = bert(args.toy, device)
    params = [*model.parameters(), *head.parameters()]
    run = TrainingRun(
        Path(args.scratch) / (tag or f"{name}-{precision}"), device=device, precision=precision,
        state_every=None, progress=False,
    )  # fmt: skip
    graphed = name in ("graph", "compile_graph")
    optimizer = build_optimizer("adamw", params, device, lr=3e-5, capturable=True) if graphed else (
        build_optimizer("adamw", params, device, lr=3e-5)
    )  # fmt: skip
    loss_fn = build_loss("infonce")
    encoder = {"eager2d": Mask2d(model)}.get(name, model)
    if name.startswith("compile"):
        encoder = torch.compile(model, mode="reduce-overhead" if name == "compile_ro" else None)
    device_batches = [to_device(ids, mask, device) for ids, mask in batches]
    losses: list[float] = []
    state = {"i": 0}
    torch.manual_seed(7)

    # the trainer's step (contrastlab.training.equivalence): captured once as a CUDA graph, or eager
    t = time.perf_counter()
    update = equivalence.training_step(
        run, encoder, head, loss_fn, optimizer, params, device_batches[0], graph=graphed
    )
    capture_s = time.perf_counter() - t if graphed else 0.0

    def step():
        i = state["i"] % len(batches)
        state["i"] += 1
        if name == "trainer":
            rows = np.arange(i * args.batch, (i + 1) * args.batch) % len(lengths)
            chunk = to_device(*host_batch(table, lengths, rows, None), device)
        else:
            chunk = device_batches[i]
        loss = update(*chunk).loss.detach()
        return loss.clone() if graphed else loss  # a graph writes its next loss into the same tensor

    t = time.perf_counter()
    for _ in range(args.warmup):
        losses.append(step())
    sync(device)
    warmup_s = time.perf_counter() - t + capture_s
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    t = time.perf_counter()
    for _ in range(args.steps):
        losses.append(step())
    host_s = time.perf_counter() - t
    sync(device)
    wall_s = time.perf_counter() - t
    busy_ms, kernels = profile(step, device) if profiled else (None, None)
    values = torch.stack(losses).float().cpu().tolist()
    return {
        "variant": name,
        "precision": run.precision.name,
        "steps_per_s": args.steps / wall_s,
        "ms_per_step": 1e3 * wall_s / args.steps,
        "host_ms_per_step": 1e3 * host_s / args.steps,
        "busy_ms_per_step": busy_ms,
        "kernels_per_step": kernels,
        "warmup_s": warmup_s,
        "peak_gib": torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else None,
        "cell_min": CELL_STEPS * wall_s / args.steps / 60,
        "losses": values,
        "loss_mean_first_20": float(np.mean(values[:20])),
    }


def sentence_reference(precision: str, args, device, batches, table, lengths) -> list[float]:
    """The reference losses of ``precision``: a separate run of the :data:`REFERENCE` eager step on the
    same batches and seed, not profiled and not reported."""
    tag = f"reference-{REFERENCE}-{precision}"
    row = run_variant(REFERENCE, precision, args, device, batches, table, lengths, tag=tag, profiled=False)
    return row["losses"]


def compare_losses(row: dict, reference: list[float], label: str = REFERENCE_LABEL) -> dict:
    """Add to ``row`` its losses' comparison with ``reference`` (another run's): ``reference`` (which run),
    ``bit_equal`` (every loss equal as floats) and ``max_rel_diff`` (over the steps both ran)."""
    n = min(len(reference), len(row["losses"]))
    a, b = np.array(reference[:n]), np.array(row["losses"][:n])
    row["reference"] = label
    row["bit_equal"] = bool(np.array_equal(a, b))
    row["max_rel_diff"] = float(np.max(np.abs(a - b) / np.abs(a)))
    return row


def host_cost(device, n: int = 2000) -> dict:
    """µs of host time per tiny kernel launched from Python, and per op replayed in a CUDA graph."""
    x = torch.zeros(16, device=device)
    for _ in range(100):
        x.add_(1)
    sync(device)
    t = time.perf_counter()
    for _ in range(n):
        x.add_(1)
    host = (time.perf_counter() - t) / n * 1e6
    sync(device)
    row = {"variant": "host", "us_per_launch_host": host, "torch": torch.__version__}
    row.update(cpu=platform.processor(), threads=torch.get_num_threads())
    if device.type == "cuda":
        graph = torch.cuda.CUDAGraph()
        side = torch.cuda.Stream()
        with torch.cuda.stream(side):
            x.add_(1)
        torch.cuda.current_stream().wait_stream(side)
        with torch.cuda.graph(graph):
            for _ in range(n):
                x.add_(1)
        sync(device)
        t = time.perf_counter()
        graph.replay()
        sync(device)
        row["us_per_op_in_graph"] = (time.perf_counter() - t) / n * 1e6
    return row


#: The dev evaluation's ways: (name, 2D mask through transformers, batch size, fp32 mode, CUDA graph).
DEV_WAYS = (
    ("trainer_128_2d_ieee", True, 128, "ieee", False),
    ("bucket512_4d_ieee", False, 512, "ieee", False),
    ("bucket512_4d_graph_ieee", False, 512, "ieee", True),
    ("bucket512_4d_graph_tf32", False, 512, "tf32", True),
)
#: The reference every way is compared with: this eager way, run once more on its own before the ways.
DEV_REFERENCE = "bucket512_4d_ieee"
#: The largest relative difference allowed from the reference for an IEEE-fp32 way of the same bucketing.
DEV_TOLERANCE = 1e-6


def dev_rows(args, device) -> list[dict]:
    """``--part dev``: :func:`dev_equivalence` at the size ``args`` asks for (``--toy``: the tiny BERT)."""
    return dev_equivalence(device, toy=args.toy)


def dev_equivalence(
    device: torch.device,
    *,
    toy: bool = False,
    model: nn.Module | None = None,
    sentences: int = DEV_SENTENCES,
    seed: int = 5,
) -> list[dict]:
    """One STS-B-dev-sized evaluation (forward only) the :data:`DEV_WAYS`, each against a separate eager
    IEEE-fp32 run of the same bucketing (:data:`DEV_REFERENCE`, computed first, not reported): one row
    per way, in that order.

    ``device``: where to run (the graph ways are left out on anything but CUDA, no row for them);
    ``toy``: config/demo.yaml's tiny BERT instead of BERT-base (random weights, built here); ``model``:
    a BERT-like encoder to use instead (put in eval mode for the call, its mode restored after);
    ``sentences``: how many dev sentences (Poisson lengths of mean 16.4, 4 to 64 tokens, seed ``seed``).
    The caller's fp32 switches are restored afterwards.

    Each row: ``variant`` (``dev:<way>``), ``batch_size``, ``fp32_mode``, ``graph``, ``s_per_eval``
    (one timed pass after a warm one), ``s_per_cell_126`` (126 evaluations), ``max_rel_diff_vs_first``
    (max |z - z_ref| / max |z_ref| over the CLS embeddings, z_ref = the separate reference run, the first
    run made), ``reference``, and for the IEEE ways of the reference's bucketing ``tolerance``
    (:data:`DEV_TOLERANCE`) and ``within_tolerance``; a way that fails has ``error`` instead.
    """
    rng = np.random.default_rng(seed)
    lengths = np.clip(rng.poisson(DEV_MEAN_TOKENS, sentences), 4, 64)
    tokens = rng.integers(1000, 30000, (sentences, int(lengths.max())))  # one sentence, one row
    order = np.argsort(lengths, kind="stable")
    was_training = None if model is None else model.training
    if model is None:
        model, _ = bert(toy, device)
    model.eval()

    def batches(size):
        out = []
        for start in range(0, len(order), size):
            rows = order[start : start + size]
            w = int(lengths[rows].max())
            ids = torch.from_numpy(tokens[rows, :w] * (np.arange(w)[None, :] < lengths[rows, None]))
            mask = torch.from_numpy((np.arange(w)[None, :] < lengths[rows, None]).astype(np.int64))
            out.append((ids.to(device), mask.to(device), torch.from_numpy(rows).to(device)))
        return out

    def encode(encoder, bs, fp32_mode="ieee", graph=False):
        set_fp32_mode(fp32_mode)
        z = torch.empty(sentences, model.config.hidden_size, device=device)
        calls = []
        for ids, mask, rows in bs:
            if graph:
                calls.append(GraphedForward(model, ids, mask, rows, z))
            else:

                def call(ids=ids, mask=mask, rows=rows):
                    out = encoder(input_ids=ids, attention_mask=attention_bias(encoder, mask))
                    z.index_copy_(0, rows, out.last_hidden_state[:, 0])

                calls.append(call)
        with torch.no_grad():
            for call in calls:  # warm
                call()
            sync(device)
            t = time.perf_counter()
            for call in calls:
                call()
            sync(device)
        set_fp32_mode("ieee")
        return z.clone(), time.perf_counter() - t

    ways = [way for way in DEV_WAYS if device.type == "cuda" or not way[4]]
    (ref_way,) = [way for way in DEV_WAYS if way[0] == DEV_REFERENCE]
    label = f"separate eager run ({DEV_REFERENCE})"
    rows = []
    try:
        with ieee_fp32():
            _, mask2d, size, mode, graph = ref_way
            reference, _ = encode(Mask2d(model) if mask2d else model, batches(size), mode, graph)
            scale = reference.abs().max()
            for name, mask2d, size, mode, graph in ways:
                row = {"variant": f"dev:{name}", "batch_size": size, "fp32_mode": mode, "graph": graph}
                try:
                    z, seconds = encode(Mask2d(model) if mask2d else model, batches(size), mode, graph)
                    diff = ((z - reference).abs().max() / scale).item()
                    row.update(s_per_eval=seconds, s_per_cell_126=126 * seconds)
                    row.update(max_rel_diff_vs_first=diff, reference=label)
                    if mode == "ieee" and size == ref_way[2]:
                        row.update(tolerance=DEV_TOLERANCE, within_tolerance=diff <= DEV_TOLERANCE)
                except Exception as err:  # one failing way does not stop the others
                    row["error"] = f"{type(err).__name__}: {err}"
                rows.append(row)
    finally:
        if was_training is not None:
            model.train(was_training)
    return rows


class GraphedForward:
    """One dev batch's forward captured in a CUDA graph (the dev batches never change); calling it
    replays the graph, writing the batch's CLS embeddings into ``z`` at ``rows``.

    Every tensor the graph reads lives as long as this object: the static ``ids``, the 2D ``mask`` and
    ``rows`` are its attributes, and the 4D attention bias is built from the 2D mask inside the captured
    region (as the trainer's captured step does), so it is recomputed at every replay in the graph's own
    pool. (Built outside and passed in, the bias was a view of a temporary ``mask.bool()`` freed once
    capture returned: every replay read another batch's memory, 0.67 off in IEEE fp32.)"""

    def __init__(self, model: nn.Module, ids, mask, rows, z) -> None:
        self.model, self.ids, self.mask, self.rows, self.z = model, ids, mask, rows, z
        with torch.no_grad():
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                self._forward()
            torch.cuda.current_stream().wait_stream(side)
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                self._forward()

    def _forward(self) -> None:
        out = self.model(input_ids=self.ids, attention_mask=attention_bias(self.model, self.mask))
        self.z.index_copy_(0, self.rows, out.last_hidden_state[:, 0])

    def __call__(self) -> None:
        self.graph.replay()


def equivalence_rows(args, device) -> list[dict]:
    """``--deterministic`` and ``--repeat``: contrastlab.training.equivalence's two checks per precision on
    this script's BERT and batches (the graph's place taken by an eager run off CUDA: ``captured`` false)."""
    table, lengths = token_table(8 * args.batch, seed=1)
    batches = [
        to_device(*host_batch(table, lengths, np.arange(i * args.batch, (i + 1) * args.batch), L), device)
        for i in range(8)
    ]
    template = bert(args.toy, device)
    make_model = lambda: copy.deepcopy(template)  # noqa: E731
    common = dict(device=device, steps=args.steps, captured=device.type == "cuda")
    rows = []
    for precision in args.precisions.split(","):
        checks = []
        if args.deterministic:
            checks.append(("deterministic", lambda p=precision: equivalence.deterministic_check(
                make_model, batches, precision=p, **common)))  # fmt: skip
        if args.repeat:
            checks.append(("spread", lambda p=precision: equivalence.spread_check(
                make_model, batches, precision=p, repeat=args.repeat, **common)))  # fmt: skip
        for name, check in checks:
            try:
                rows.append({"variant": f"equivalence:{name}", **check()})
            except Exception as err:  # one failing check is its row
                rows.append({"variant": f"equivalence:{name}", "precision": precision,
                             "error": f"{type(err).__name__}: {err}"})  # fmt: skip
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--part", default="host,sentence,dev", help="host, sentence, dev, compile (comma list)"
    )
    parser.add_argument("--precisions", default="bf16,fp16,tf32,fp32")
    parser.add_argument(
        "--variants", default="trainer,eager2d,mask4d,graph", help=f"of {', '.join(VARIANTS)}"
    )
    parser.add_argument("--device", default=None, help="cuda (--toy: cpu if no GPU) or cpu")
    parser.add_argument(
        "--toy", action="store_true", help="config/demo.yaml's tiny BERT instead of BERT-base"
    )
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--budget-s", type=float, default=570.0, help="skip the variants left after this")
    parser.add_argument("--out", default="gpu_step.jsonl")
    parser.add_argument("--scratch", default="/tmp/gpu_step")
    parser.add_argument(
        "--deterministic", action="store_true",
        help="graph vs eager under deterministic algorithms, --steps steps per precision: bit-equal?",
    )  # fmt: skip
    parser.add_argument(
        "--repeat", type=int, default=0,
        help="N >= 2: N eager and N graph runs of --steps steps per precision: graph within eager's spread?",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.deterministic:  # cuBLAS reads it when it starts, before any CUDA work of this process
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", capture.CUBLAS_DETERMINISTIC)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() or not args.toy else "cpu"))
    if device.type == "cuda" and (line := cuda.no_gpu_line("benchmarks/gpu_step.py")):  # not BERT-base on CPU
        parser.exit(1, f"{line}, or pass --toy --device cpu for its CPU smoke test\n")
    parts = args.part.split(",")
    variants = args.variants.split(",")
    if "compile" in parts and args.variants == parser.get_default("variants"):
        variants = ["eager2d", "compile_graph", "compile", "compile_ro"]
    unknown = sorted(set(variants) - set(VARIANTS))
    if unknown:
        sys.exit(f"unknown variant(s) {', '.join(unknown)}; choose from {', '.join(VARIANTS)}")
    print(
        json.dumps(
            {"device": device_name(device), "torch": torch.__version__, "cpus": torch.get_num_threads()}
        )
    )
    started, rows = time.perf_counter(), []

    def emit(row):
        row = {k: v for k, v in row.items() if k != "losses"}
        print(json.dumps(row, default=float), flush=True)
        with open(args.out, "a") as handle:
            handle.write(json.dumps(row, default=float) + "\n")
        rows.append(row)

    if "host" in parts:
        emit(host_cost(device))
    if "sentence" in parts or "compile" in parts:
        table, lengths = token_table(64 * args.batch, seed=1)
        batches = [
            host_batch(table, lengths, np.arange(i * args.batch, (i + 1) * args.batch), L) for i in range(64)
        ]
        for precision in args.precisions.split(","):
            reference = None
            if time.perf_counter() - started <= args.budget_s:
                try:
                    reference = sentence_reference(precision, args, device, batches, table, lengths)
                except Exception as err:  # the variants still run, without a comparison
                    emit({"variant": f"reference:{REFERENCE}", "precision": precision,
                          "error": f"{type(err).__name__}: {err}"})  # fmt: skip
            for name in variants:
                if time.perf_counter() - started > args.budget_s:
                    emit({"variant": name, "precision": precision, "error": "skipped: --budget-s reached"})
                    continue
                try:
                    row = run_variant(name, precision, args, device, batches, table, lengths)
                except Exception as err:
                    emit({"variant": name, "precision": precision, "error": f"{type(err).__name__}: {err}"})
                    continue
                if reference is not None:
                    compare_losses(row, reference)
                row["losses_first"] = row["losses"][:3]
                emit(row)
    if args.deterministic or args.repeat:
        for row in equivalence_rows(args, device):
            emit(row)
    if "dev" in parts:
        for row in dev_rows(args, device):
            emit(row)
    keys = ("variant", "precision", "steps_per_s", "ms_per_step", "host_ms_per_step", "busy_ms_per_step",
            "kernels_per_step", "warmup_s", "cell_min", "bit_equal", "max_rel_diff")  # fmt: skip
    print("\n| " + " | ".join(keys) + " |\n|" + "---|" * len(keys))
    for row in rows:
        if "steps_per_s" in row:
            cells = [row.get(k) for k in keys]
            print("| " + " | ".join(f"{c:.4g}" if isinstance(c, float) else str(c) for c in cells) + " |")
    with contextlib.suppress(Exception):
        print(f"\n{len(rows)} rows in {time.perf_counter() - started:.0f} s; JSON lines in {args.out}")


if __name__ == "__main__":
    main()
