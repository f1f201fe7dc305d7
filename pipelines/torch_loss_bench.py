"""`qsrank bench torch-losses` (docs/benchmarks.md): medians over warm repeats of the rank losses
(curves of time and memory), lai_batch against lai row by row, the distributed loss against one
process, and the memory bank; writes report.md, curves.csv and curves.png."""

import csv
import os
from functools import partial

import numpy as np

from qsrank.pipelines._io import atomic_path, save_figure, write_text
from qsrank.pipelines._measure import PeakMemory, exact_rss
from qsrank.pipelines._runner import run_dir
from qsrank.pipelines._tables import markdown_table
from qsrank.pipelines.torch_loss_parts import (
    DISTRIBUTED_REPEATS,
    distributed_step,
    interleaved,
    memory_bank,
    one_vs_rest,
    ratio_text,
)

SIZES = tuple(2**k for k in range(8, 21, 2))
PARTS = ("curves", "batched", "distributed", "memory")
LOSSES = (
    "exact AP hinge",
    "exact NDCG hinge",
    "DLM AP (positive, eps 0.1)",
    "black-box AP",
    "Smooth-AP",
)
#: timed on CUDA only: the torch method (the GPU path) at every size, beside "auto" (numba on
#: a CPU copy below qs.torch.losses.CUDA_TORCH_FROM scores)
CUDA_LOSSES = ("exact AP hinge, torch method",)
#: Smooth-AP is skipped where its (Q, n, n) table and the temporaries of its backward
#: (about four of them) would need more than this
SMOOTH_AP_MAX_BYTES = 4 << 30


def _losses(torch):
    from qs.surrogates.outside import blackbox_ap_loss, smooth_ap_loss
    from qs.torch import rank_hinge_loss
    from qs.torch.dlm import direct_loss

    # scores (queries, n), one query per row, as the surrogates take them
    return {
        "exact AP hinge": lambda s, y: rank_hinge_loss(s, y, "ap", dim=-1),
        "exact NDCG hinge": lambda s, y: rank_hinge_loss(s, y, "ndcg", dim=-1),
        "exact AP hinge, torch method": lambda s, y: rank_hinge_loss(
            s, y, "ap", method="torch", dim=-1
        ),
        "DLM AP (positive, eps 0.1)": lambda s, y: direct_loss(s, y, "ap", eps=0.1, dim=-1),
        "black-box AP": blackbox_ap_loss,
        "Smooth-AP": smooth_ap_loss,
    }


def loss_curves(
    torch, sizes=SIZES, q=8, repeats=5, device="cpu", budget=30.0, seed=0, losses=LOSSES
):
    """Rows (device, loss, n, median s, min s, max s, peak bytes or None, note), the losses' repeats
    interleaved at each n; peaks in a second pass after `exact_rss`."""
    fns = _losses(torch)
    losses = tuple(losses) + (CUDA_LOSSES if device == "cuda" else ())
    rows, stopped = [], {}
    for n, s, y in _inputs(torch, sizes, q, device, seed):
        steps, notes = {}, {}
        for name in losses:
            need = 4 * q * n * n * s.element_size()
            if name in stopped:
                notes[name] = stopped[name]
            elif name == "Smooth-AP" and need > SMOOTH_AP_MAX_BYTES:
                notes[name] = f"needs about {need / 2**30:,.0f} GiB"
            else:
                steps[name] = _step(torch, fns[name], s, y, device)
        # interleaved makes each step's first call (compiling, allocating) untimed; [:, 0]: wall
        times = {name: t[:, 0] for name, t in interleaved(steps, repeats).items()}
        for name in losses:
            if name not in steps:
                rows.append([device, name, n, None, None, None, None, notes[name]])
                continue
            t = times[name]
            med, lo, hi = float(np.median(t)), float(t.min()), float(t.max())
            rows.append([device, name, n, med, lo, hi, None, ""])
            if med > budget:
                stopped[name] = f"skipped: {med:.1f} s at n = {n}"
    if device == "cpu":
        exact_rss()
    timed = {(r[1], r[2]): r for r in rows if r[3] is not None}
    for n, s, y in _inputs(torch, sizes, q, device, seed):
        for name in losses:
            if (name, n) in timed:
                step = _step(torch, fns[name], s, y, device)
                with PeakMemory(torch, device) as peak:
                    step()
                timed[name, n][6] = peak.peak
    return [tuple(r) for r in rows]


def _inputs(torch, sizes, q, device, seed):
    """(n, scores, labels) at each size, the same in every pass (one generator)."""
    rng = np.random.default_rng(seed)
    for n in sizes:
        scores, labels = one_vs_rest(rng, q, n)
        yield n, torch.from_numpy(scores).to(device), torch.from_numpy(labels).to(device)


def _step(torch, fn, s, y, device):
    """Forward + backward of ``fn`` on a fresh leaf copy of the scores."""
    x = s.clone().requires_grad_(True)

    def step():
        x.grad = None
        fn(x, y).backward()
        if device == "cuda":
            torch.cuda.synchronize()

    return step


def batched_vs_rows(
    q=4, sizes=(100_000, 1_000_000), fracs=(0.001, 0.01, 0.1), repeats=3, seed=0, loss="ap"
):
    """Rows (n, positives share, loss's inference, lai_batch, Q x lai), each (repeats, 2) of (wall
    s, CPU s) per call."""
    import torch

    from qs.inference import lai
    from qs.inference.batch import lai_batch
    from qs.torch import rank_hinge_loss

    rng = np.random.default_rng(seed)
    rows = []
    for n in sizes:
        for frac in fracs:
            scores, labels = one_vs_rest(rng, q, n, frac)
            scores = scores.astype(np.float64)
            s, y = torch.from_numpy(scores), torch.from_numpy(labels)

            def loss_forward(s=s, y=y):
                with torch.no_grad():
                    rank_hinge_loss(s, y, loss, dim=-1)

            cases = {
                "loss": loss_forward,
                "batch": partial(lai_batch, scores, labels, loss, gradient=True),
                "rows": lambda scores=scores, labels=labels: [
                    lai(scores[k], labels[k], loss) for k in range(q)
                ],
            }
            rows.append((n, frac, *interleaved(cases, repeats).values()))
    return rows


def figure(rows, stem):
    """Time and peak memory against n, log-log, one line per (device, loss)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 4.2))
    ax_t, ax_m = fig.subplots(1, 2)
    for device, name in dict.fromkeys((r[0], r[1]) for r in rows):
        pts = [r for r in rows if r[0] == device and r[1] == name and r[3] is not None]
        if not pts:
            continue
        label = name if device == "cpu" else f"{name} ({device})"
        ax_t.plot([r[2] for r in pts], [r[3] for r in pts], marker="o", label=label)
        mem = [r for r in pts if r[6]]
        if mem:
            ax_m.plot([r[2] for r in mem], [r[6] for r in mem], marker="o", label=label)
    for ax, what in ((ax_t, "forward + backward (s)"), (ax_m, "peak extra memory (bytes)")):
        ax.set(xscale="log", yscale="log", xlabel="scores per query n", ylabel=what)
        ax.grid(True, which="major", alpha=0.3)
    ax_t.legend(fontsize=8)
    fig.tight_layout()
    return save_figure(fig, stem)


def _curves_text(rows, q):
    table = []
    by = {(r[0], r[1], r[2]): r for r in rows}
    for device, name, n, med, lo, hi, peak, note in rows:
        ratio = ""
        ref = by.get((device, "black-box AP", n))
        if name.startswith("exact") and med and ref and ref[3]:
            ratio = f"{ref[3] / med:.1f}"
        table.append(
            (
                device,
                name,
                n,
                "" if med is None else f"{med * 1e3:.3g}",
                "" if med is None else f"{lo * 1e3:.3g}-{hi * 1e3:.3g}",
                "" if peak is None else f"{peak / 2**20:.1f}",
                "" if peak is None else f"{peak / (q * n):.1f}",
                ratio,
                note,
            )
        )
    return markdown_table(
        [
            "device",
            "loss",
            "n",
            "ms (median)",
            "ms (min-max)",
            "peak MiB",
            "bytes/score",
            "black-box / this",
            "note",
        ],
        table,
    )


def run(
    out=None,
    sizes=SIZES,
    q=8,
    repeats=5,
    parts=PARTS,
    budget=30.0,
    batched_sizes=(100_000, 1_000_000),
    per_rank=4096,
    bank=(100_000, 64, 128),
    seed=0,
    devices=None,
):
    """Run `parts` into the run directory `out` (default runs/torch_losses/<run-id>); return (it,
    the report). ``devices``: the curves' (None: cpu, and cuda when present)."""
    import torch

    if devices is None:
        devices = ("cpu",) + (("cuda",) if torch.cuda.is_available() else ())
    if "cuda" in devices and not torch.cuda.is_available():
        raise ValueError("devices names cuda, but torch sees no CUDA device")

    torch.set_num_threads(1)
    settings = {
        "sizes": list(sizes),
        "queries": q,
        "repeats": repeats,
        "parts": list(parts),
        "budget_s": budget,
        "threads": 1,
        "cpu_count": os.cpu_count(),
        "devices": list(devices),
    }
    cfg = {**settings, "seed": seed}
    with run_dir("torch_losses", "bench", out, cfg, "synthetic scores", settings) as out:
        sections = [
            f"# Rank losses in training: time and memory (Q = {q} queries, one thread, "
            f"torch {torch.__version__})"
        ]
        if "batched" in parts:
            rows = batched_vs_rows(q=4, sizes=batched_sizes, repeats=max(repeats, 5), seed=seed)
            sections.append(
                "## The loss's inference against `lai` row by row (4 queries, AP)\n\n"
                "`rank_hinge_loss` forward (float64, no grad) and `lai_batch` (with the "
                "gradient) against 4 `lai` calls; times are medians over the repeats "
                "(wall clock); ratios the median of the repeats' ratios, measured side "
                "by side, with the smallest and largest, on the wall clock and on CPU "
                "time\n\n"
                + markdown_table(
                    [
                        "n",
                        "positives",
                        "loss ms",
                        "lai_batch ms",
                        "4 x lai ms",
                        "loss / lai",
                        "lai_batch / lai",
                        "loss / lai (CPU)",
                        "lai_batch / lai (CPU)",
                    ],
                    [
                        (
                            n,
                            f"{f:.1%}",
                            *(f"{np.median(x[:, 0]) * 1e3:.1f}" for x in (a, b, r)),
                            ratio_text(a, r, 0),
                            ratio_text(b, r, 0),
                            ratio_text(a, r, 1),
                            ratio_text(b, r, 1),
                        )
                        for n, f, a, b, r in rows
                    ],
                )
            )
        if "distributed" in parts:
            times = distributed_step(per_rank, q, max(repeats, DISTRIBUTED_REPEATS), seed=seed)
            dist_ms, one_ms = np.median(times, axis=0) * 1e3
            sections.append(
                f"## Distributed (gloo, 2 processes, {per_rank} samples each, {q} "
                f"queries)\n\nstep {dist_ms:.2f} ms; one process on the global batch "
                f"{one_ms:.2f} ms (medians over {len(times)} repeats); ratio "
                f"{ratio_text(times[:, :1], times[:, 1:], 0)} (the median of the repeats' "
                "ratios, smallest-largest)"
            )
        if "memory" in parts:
            size, queries, dim = bank
            prod, loss = memory_bank(size, queries, dim, repeats=max(repeats, 5), seed=seed)
            p_ms, l_ms = (np.median(x, axis=0) * 1e3 for x in (prod, loss))
            sections.append(
                f"## Memory bank (M = {size}, {queries} queries, d = {dim}, 1000 "
                f"classes)\n\nsimilarity product {p_ms[0]:.1f} ms; loss + "
                f"gradient {l_ms[0]:.1f} ms; ratio {ratio_text(loss, prod, 0)} (CPU "
                f"time: {p_ms[1]:.1f} ms, {l_ms[1]:.1f} ms; ratio "
                f"{ratio_text(loss, prod, 1)}); medians over {len(prod)} repeats, ratios "
                f"the median of the repeats' ratios (smallest-largest)"
            )
        if "curves" in parts:
            rows = [
                r for d in devices for r in loss_curves(torch, sizes, q, repeats, d, budget, seed)
            ]
            with atomic_path(out / "curves.csv") as tmp, open(tmp, "w", newline="") as fh:
                writer = csv.writer(fh)
                writer.writerow(
                    ["device", "loss", "n", "median_s", "min_s", "max_s", "peak_bytes", "note"]
                )
                writer.writerows(rows)
            figure(rows, out / "curves")
            # last: its memory pass changes the allocator for the rest of the process
            sections.insert(1, "## Forward + backward per loss\n\n" + _curves_text(rows, q))
        report = "\n\n".join(sections) + "\n"
        write_text(out / "report.md", report)
    return out, report
