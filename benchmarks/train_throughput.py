"""Training throughput of the sentence trainer's step: sentences/s and model FLOPs utilisation (MFU).

Runs ``contrastlab.training.sentence.train_step`` and the runtime's optimiser step exactly as the
trainer does (duplicated batch in one forward pass, SimCSE head, InfoNCE, loss scaling in fp16, grad
clipping, AdamW fused on CUDA; the precision's autocast and TF32 switches from
``contrastlab.training.runtime``) on randomly initialised encoders built from their configurations
(``--archs``: bert-base, bert-large, roberta-base, roberta-large, or ``tiny`` for a smoke test;
``AutoModel.from_config``, nothing downloaded; each row prints the parameter count of what was built) at a
fixed sequence length (default 32: the truncation length; the real corpus pads to the longest sentence
of each batch, so real steps are no slower). ``--precision`` defaults to fp32, the precision the Nie and
Li cells run in; tf32, bf16 and fp16 are the faster choices.

Dev evaluation is timed warm (one untimed pass first) in the evaluator's own precision (IEEE fp32, no
autocast), and a snapshot (``torch.save`` of model, head and AdamW state) and the start-up (building
the model and optimiser) are timed too: the projected cell time adds them (a snapshot every 10
minutes, config.yaml's ``state_minutes``).

FLOPs per step: the plan's model, ``contrastlab.cost.flops.training_step_flops`` (6 · N · T, T = 2 ·
batch · L tokens: every sentence twice; N the non-embedding parameters of encoder + head; attention's
score products, under 1% at 32 tokens, left out), so that this MFU and the plan's are one quantity.
MFU = achieved FLOP/s ÷ the device's peak (``contrastlab.cost.calibration.GPU_PEAKS``), printed with
its source (``--peak-tflops`` overrides). Projected epoch = 1M sentences / batch steps at the measured
step time plus one STS-B dev evaluation (2,909 unique sentences, forward only) every 125 steps.

    python benchmarks/train_throughput.py                  # CUDA when available, else CPU
    python benchmarks/train_throughput.py --device cpu --steps 1 --warmup 1
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import time
from pathlib import Path

import torch
import yaml

from contrastlab.cost.calibration import peak_tflops as gpu_peak_tflops
from contrastlab.cost.flops import (
    KNOWN_ARCHITECTURES,
    STSB_DEV_SENTENCES,
    WIKI1M_SENTENCES,
    training_step_flops,
)
from contrastlab.losses import build_loss
from contrastlab.precision import CHOICES as PRECISIONS
from contrastlab.training.equivalence import training_step
from contrastlab.training.runtime import (
    TrainingRun,
    build_optimizer,
    device_name,
    resolve_precision,
)
from contrastlab.training.sentence import build_head

DEMO = Path(__file__).resolve().parents[1] / "config" / "demo.yaml"
DEV_SENTENCES = STSB_DEV_SENTENCES
DEV_LENGTH = 20  # typical padded length of a length-sorted STS-B dev batch (tokens)
EVAL_EVERY = 125
EPOCH_SENTENCES = WIKI1M_SENTENCES
SNAPSHOT_MINUTES = 10  # config.yaml's state_minutes


def _public(hf_id: str) -> tuple[str, dict]:
    """The config class and keyword arguments of a public checkpoint, from the plan's table."""
    hidden, layers, intermediate, heads, vocab, positions, types = KNOWN_ARCHITECTURES[hf_id]
    sizes = dict(hidden_size=hidden, num_hidden_layers=layers, intermediate_size=intermediate)
    sizes.update(num_attention_heads=heads, vocab_size=vocab, max_position_embeddings=positions)
    return ("RobertaConfig" if hf_id.startswith("roberta") else "BertConfig"), {
        **sizes,
        "type_vocab_size": types,
    }


#: Architectures by name: (config class, keyword arguments); the public checkpoints' configurations
#: (contrastlab.cost.flops.KNOWN_ARCHITECTURES) and config/demo.yaml's tiny BERT.
ARCHS = {
    "bert-base": _public("bert-base-uncased"),
    "bert-large": _public("bert-large-uncased"),
    "roberta-base": _public("roberta-base"),
    "roberta-large": _public("roberta-large"),
    "tiny": (
        "BertConfig",
        {**yaml.safe_load(DEMO.read_text())["backbones"]["tiny-bert"]["random"], "vocab_size": 2000},
    ),
}


def cpu_peak(threads: int) -> tuple[float, str]:
    """threads × clock × FP32 FLOPs/cycle (AVX-512 with two FMA units: 64; AVX2 + FMA: 32)."""
    info = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    flags = next((line for line in info.splitlines() if line.startswith("flags")), "")
    mhz = [float(line.split(":")[1]) for line in info.splitlines() if line.startswith("cpu MHz")]
    ghz = (max(mhz) / 1000) if mhz else 2.0
    per_cycle = 64 if "avx512f" in flags else 32 if "avx2" in flags else 16
    peak = threads * ghz * per_cycle / 1000
    return (
        peak,
        f"{threads} threads × {ghz:.2f} GHz × {per_cycle} FP32 FLOP/cycle (assumed, from /proc/cpuinfo)",
    )


def peak_tflops(device: torch.device, precision: str, threads: int, override: float | None):
    if override:
        return override, "--peak-tflops"
    if device.type == "cpu":
        return cpu_peak(threads)
    peak, source = gpu_peak_tflops(torch.cuda.get_device_name(device), precision)
    return (peak, source) if peak else (math.nan, f"{source}: pass --peak-tflops")


def build(arch: str, device: torch.device):
    """The named architecture with random weights (``ARCHS``), its SimCSE head, and its config."""
    import transformers
    from transformers import AutoModel

    if arch not in ARCHS:
        raise SystemExit(f"unknown arch {arch!r}; choose from {', '.join(ARCHS)}")
    config_class, kwargs = ARCHS[arch]
    config = getattr(transformers, config_class)(**kwargs)
    model = AutoModel.from_config(config).to(device).train()
    head, _ = build_head("simcse", config.model_type, config.hidden_size)
    return model, head.to(device).train(), config


def non_embedding_params(model, head) -> int:
    total = sum(p.numel() for p in model.parameters()) + sum(p.numel() for p in head.parameters())
    return total - sum(p.numel() for p in model.embeddings.parameters())


def activation_gib(config, batch: int, seq_len: int) -> float:
    """Activation memory of one fp32 training step: 2 × (34·s·h + 5·a·s²) bytes per sequence and layer
    (Korthikanti et al. 2022, Eq. 2, which counts 16-bit activations), 2·batch sequences."""
    per_layer = 2 * (34 * seq_len * config.hidden_size + 5 * config.num_attention_heads * seq_len**2)
    return per_layer * config.num_hidden_layers * 2 * batch / 2**30


def available_gib() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable"):
            return int(line.split()[1]) / 2**20
    return math.inf


def time_snapshot(model, head, optimizer, folder: Path) -> float:
    """Seconds to write one snapshot's tensors (model, head, AdamW moments) with ``torch.save``."""
    path = Path(folder) / "snapshot-benchmark.pt"
    start = time.perf_counter()
    torch.save({"model": model.state_dict(), "head": head.state_dict(), "opt": optimizer.state_dict()}, path)
    elapsed = time.perf_counter() - start
    path.unlink()
    return elapsed


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure(arch, batch_sizes, args, device, precision):
    """Yield one row per batch size; the model, optimiser state and kernels are warmed up once."""
    torch.manual_seed(0)
    started = time.perf_counter()
    model, head, config = build(arch, device)
    params = [*model.parameters(), *head.parameters()]
    run = TrainingRun(args.state_dir, device=device, precision=precision, state_every=None, progress=False)
    optimizer = build_optimizer("adamw", params, device, lr=1e-5)
    startup_s = time.perf_counter() - started
    loss_fn = build_loss("infonce")
    n = non_embedding_params(model, head)
    total_params = sum(p.numel() for p in params)

    def batch_of(size: int, length: int):
        ids = torch.randint(1000, config.vocab_size, (size, length), device=device)
        return ids, torch.ones_like(ids)

    update = training_step(run, model, head, loss_fn, optimizer, params, None, graph=False)  # trainer's eager

    def step(chunk):
        update(*chunk)

    eval_n = min(args.eval_sentences or DEV_SENTENCES, DEV_SENTENCES)
    eval_chunk = batch_of(128, DEV_LENGTH)
    model.eval()
    with torch.inference_mode():  # the dev evaluator's precision: IEEE fp32, no autocast; warm first
        model(input_ids=eval_chunk[0], attention_mask=eval_chunk[1])
        sync(device)
        start = time.perf_counter()
        for _ in range(math.ceil(eval_n / 128)):
            model(input_ids=eval_chunk[0], attention_mask=eval_chunk[1])
    sync(device)
    eval_s = (time.perf_counter() - start) * DEV_SENTENCES / (math.ceil(eval_n / 128) * 128)
    model.train()

    for _ in range(args.warmup):  # allocates the optimiser state, picks kernels
        step(batch_of(args.warmup_batch or batch_sizes[0], args.seq_len))
    snapshot_s = time_snapshot(model, head, optimizer, args.state_dir)
    for batch in batch_sizes:
        need = activation_gib(config, batch, args.seq_len)
        if device.type == "cpu" and need > 0.7 * available_gib():  # an OOM kill would hit the whole machine
            print(
                f"{arch:13} {batch:5d} skipped: ~{need:.0f} GiB activations, {available_gib():.0f} GiB free"
            )
            continue
        chunk = batch_of(batch, args.seq_len)
        if device.type == "cuda":
            step(chunk)  # one untimed step at this shape (allocator, autotuning)
            torch.cuda.reset_peak_memory_stats(device)
        sync(device)
        start = time.perf_counter()
        for _ in range(args.steps):
            step(chunk)
        sync(device)
        step_s = (time.perf_counter() - start) / args.steps
        flops = training_step_flops(n, batch, args.seq_len)
        steps = EPOCH_SENTENCES // batch
        train_min = (steps * step_s + steps // EVAL_EVERY * eval_s) / 60
        snapshots = math.floor(train_min / SNAPSHOT_MINUTES)
        yield {
            "arch": arch,
            "params": total_params,
            "batch": batch,
            "seq_len": args.seq_len,
            "step_s": step_s,
            "sentences_per_s": batch / step_s,
            "tflops_per_s": flops / step_s / 1e12,
            "non_embedding_params": n,
            "dev_eval_s": eval_s,
            "snapshot_s": snapshot_s,
            "startup_s": startup_s,
            "epoch_1m_min": train_min,
            "cell_1m_min": train_min + (snapshots * snapshot_s + startup_s) / 60,
            "peak_mem_gib": torch.cuda.max_memory_allocated(device) / 2**30
            if device.type == "cuda"
            else None,
        }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    parser.add_argument("--archs", nargs="+", default=["bert-base", "roberta-base"])
    parser.add_argument("--batch-sizes", nargs="+", type=int, default=[64, 128, 512])
    parser.add_argument("--seq-len", type=int, default=32)
    parser.add_argument("--steps", type=int, default=None, help="timed steps (default: 20 CUDA, 1 CPU)")
    parser.add_argument("--warmup", type=int, default=None, help="untimed steps (default: 5 CUDA, 1 CPU)")
    parser.add_argument("--warmup-batch", type=int, default=None, help="batch of the warm-up steps (CPU: 8)")
    parser.add_argument("--precision", default="fp32", choices=PRECISIONS, help="default: the cells' fp32")
    parser.add_argument(
        "--eval-sentences", type=int, default=None, help="encode only this many dev-like sentences"
    )
    parser.add_argument("--peak-tflops", type=float, default=None, help="device peak to compute MFU against")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows here")
    parser.add_argument("--state-dir", type=Path, default=Path("benchmarks/out/state"), help="scratch folder")
    args = parser.parse_args(argv)
    args.state_dir.mkdir(parents=True, exist_ok=True)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    cuda = device.type == "cuda"
    args.steps = args.steps or (20 if cuda else 1)
    args.warmup = args.warmup if args.warmup is not None else (5 if cuda else 1)
    args.eval_sentences = args.eval_sentences or (None if cuda else 256)
    args.warmup_batch = args.warmup_batch or (None if cuda else 8)
    precision = resolve_precision(args.precision, device)
    peak, source = peak_tflops(device, precision, torch.get_num_threads(), args.peak_tflops)
    print(f"device: {device_name(device)}; precision {precision}; peak {peak:.2f} TFLOP/s ({source})")
    header = ("arch", "batch", "step s", "sent/s", "TFLOP/s", "MFU %", "1M epoch min", "params M")
    print(
        f"{header[0]:13} "
        + " ".join(f"{h:>{w}}" for h, w in zip(header[1:], (5, 8, 9, 8, 6, 12, 9), strict=True))
    )
    rows = []
    for arch in args.archs:
        with contextlib.suppress(torch.OutOfMemoryError) if cuda else contextlib.nullcontext():
            for row in measure(arch, args.batch_sizes, args, device, precision):
                row.update(mfu=row["tflops_per_s"] / peak, device=device_name(device), precision=precision)
                row.update(peak_tflops=peak, peak_source=source)
                rows.append(row)
                print(
                    f"{arch:13} {row['batch']:5d} {row['step_s']:8.3f} {row['sentences_per_s']:9.1f} "
                    f"{row['tflops_per_s']:8.3f} {100 * row['mfu']:6.1f} {row['epoch_1m_min']:12.1f} "
                    f"{row['params'] / 1e6:9.1f}",
                    flush=True,
                )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
