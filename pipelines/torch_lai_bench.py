"""`qsrank bench torch-lai`: medians over warm calls, first calls apart, of (a) a mini-batch of 10 x
256 scores: lai_batch and rank_hinge_loss against 10 single calls; (b) the loss's share of a
PL-CNN step; (c) the torch method against numba; (d) the same on CUDA, at 64 x 10^6."""

import time
from functools import partial

import numpy as np

from qs.inference import lai
from qs.inference.batch import lai_batch
from qs.inference.zero_one import zero_one_lai
from qsrank.pipelines._measure import median_time
from qsrank.pipelines.torch_loss_parts import one_vs_rest

#: the named methods timed beside the default in (a)
NAMED = {
    "ap": ("bucket_sort", "qs", "sort_dc", "search", "yue"),
    "ndcg": ("bucket_sort", "qs", "sort_dc", "chakrabarti"),
    "01": (),
}
GPU_BATCH = (64, 1_000_000)


def minibatch(torch, q=10, n=256, repeats=200, seed=0):
    """(a): rows (name, seconds per call, note)."""
    rng = np.random.default_rng(seed)
    scores, labels = one_vs_rest(rng, q, n, dtype=np.float64)
    s_t, y_t = torch.from_numpy(scores.T.copy()), torch.from_numpy(labels)
    from qs.torch import rank_hinge_loss

    is_pos = [np.ascontiguousarray(y).view(np.uint8) for y in labels]
    coef = np.empty(n)

    def zero_one_kernels():
        for k in range(q):
            zero_one_lai(scores[k], is_pos[k], coef)

    def single_lai(loss):
        return lambda: [lai(scores[k], labels[k], loss) for k in range(q)]

    def torch_step(loss):
        def step():
            x = s_t.clone().requires_grad_(True)
            rank_hinge_loss(x.T, y_t, loss, dim=-1).backward()

        return step

    cases = [("10 x zero_one_lai kernel (0-1)", zero_one_kernels)]
    for loss in ("ap", "ndcg", "01"):
        batch = partial(lai_batch, scores, labels, loss, gradient=True)
        cases += [
            (f"lai_batch {loss}, gradient", batch),
            (f"10 x lai {loss}", single_lai(loss)),
            (f"rank_hinge_loss {loss} fwd+bwd (logits.T)", torch_step(loss)),
        ]
        cases += [(f"lai_batch {loss} method {m}", partial(batch, method=m)) for m in NAMED[loss]]
    first = [median_time(fn, 1) for _, fn in cases]
    # interleaved: each round times every case once, so that a change of the machine's load
    # (shared cores) touches all cases alike
    rounds = np.array([[median_time(fn, 1, inner=5) for _, fn in cases] for _ in range(repeats)])
    return [(name, float(t), f) for (name, _), t, f in zip(cases, np.median(rounds, 0), first)]


def cnn_share(torch, batch=200, repeats=3, loss="ap", seed=0):
    """(b): (step seconds, loss seconds, parameters), the loss and its backward timed in a step."""
    from qs.nets import PLCNN, n_parameters
    from qs.torch import rank_hinge_loss

    torch.manual_seed(seed)
    net = PLCNN()
    images = torch.randn(batch, 3, 32, 32)
    targets = torch.randint(0, 10, (batch,))
    onehot = torch.nn.functional.one_hot(targets, 10).bool()
    loss_times, step_times = [], []
    for r in range(repeats + 1):  # the first step warms up (compilation, allocator)
        net.zero_grad()
        start = time.perf_counter()
        logits = net(images)
        t0 = time.perf_counter()
        value = rank_hinge_loss(logits, onehot, loss)  # (batch, classes): dim 0 ranked
        t1 = time.perf_counter()
        grad = torch.autograd.grad(value, logits, retain_graph=True)[0]
        t2 = time.perf_counter()
        logits.backward(grad)
        end = time.perf_counter()
        if r:
            loss_times.append((t1 - t0) + (t2 - t1))
            step_times.append(end - start)
    return float(np.median(step_times)), float(np.median(loss_times)), n_parameters(net)


def torch_vs_numba(torch, q, n, device="cpu", repeats=3, loss="ap", seed=0):
    """(c), (d): (numba seconds on the CPU, torch method seconds on `device`, ranks identical)."""
    from qs.torch._exact import lai_torch

    rng = np.random.default_rng(seed)
    scores, labels = one_vs_rest(rng, q, n, frac=0.01, dtype=np.float64)
    s_t, y_t = torch.from_numpy(scores).to(device), torch.from_numpy(labels).to(device)

    def on_device():
        result = lai_torch(s_t, y_t, loss)
        if device == "cuda":
            torch.cuda.synchronize()
        return result

    on_device()  # CUDA context, kernels, allocator
    torch_s = median_time(on_device, repeats)
    numba_s = median_time(lambda: lai_batch(scores, labels, loss, gradient=True), repeats)
    same = bool(np.array_equal(on_device()[2].cpu().numpy(), lai_batch(scores, labels, loss).rank))
    return numba_s, torch_s, same


def run(threads=1, repeats=200, cnn_batch=200, large=(16, 100_000), parts="abcd"):
    """The measurements of ``parts`` as Markdown text."""
    import torch

    torch.set_num_threads(threads)
    out = [f"torch {torch.__version__}, {threads} torch thread(s); seconds are medians."]
    if "a" in parts:
        out += _minibatch_text(torch, repeats)
    if "b" in parts:
        step, loss_s, params = cnn_share(torch, batch=cnn_batch)
        out += [
            "",
            f"(b) PL-CNN ({params} parameters), batch {cnn_batch}, CPU: step "
            f"{step:.3f} s, AP loss (LAI forward + its backward) {loss_s * 1e3:.3f} ms = "
            f"{100 * loss_s / step:.3f}% of the step",
        ]
    if "c" in parts:
        numba_s, torch_s, same = torch_vs_numba(torch, *large)
        out += [
            "",
            f"(c) {large[0]} queries x {large[1]} samples (1% positives), AP, CPU: "
            f"numba lai_batch {numba_s:.3f} s, torch method {torch_s:.3f} s "
            f"(ratio {torch_s / numba_s:.1f}), ranks identical: {same}",
        ]
    if "d" in parts:
        head = f"(d) {GPU_BATCH[0]} queries x {GPU_BATCH[1]} samples (1% positives), AP:"
        if not torch.cuda.is_available():
            out += [
                "",
                f"{head} skipped, torch sees no CUDA device (torch.cuda.is_available() is False).",
            ]
        else:
            numba_s, torch_s, same = torch_vs_numba(torch, *GPU_BATCH, device="cuda")
            out += [
                "",
                f"{head} numba lai_batch on the CPU {numba_s:.3f} s, torch method on "
                f"{torch.cuda.get_device_name()} {torch_s:.4f} s (speed-up "
                f"{numba_s / torch_s:.1f}x), ranks identical: {same}",
            ]
    return "\n".join(out)


def _minibatch_text(torch, repeats):
    """(a) as Markdown lines."""
    out = [
        "",
        "(a) 10 queries x 256 samples",
        "",
        "| call | warm us | first call s |",
        "|---|---|---|",
    ]
    rows = minibatch(torch, repeats=repeats)
    out += [f"| {name} | {t * 1e6:.1f} | {first:.2f} |" for name, t, first in rows]
    t = {name: v for name, v, _ in rows}
    base = t["10 x zero_one_lai kernel (0-1)"]
    out += ["", "| ratio | value |", "|---|---|"]
    for loss in ("ap", "ndcg", "01"):
        batch = t[f"lai_batch {loss}, gradient"]
        out += [
            f"| lai_batch {loss} / 10 x 0-1 kernel | {batch / base:.2f} |",
            f"| 10 x lai {loss} / lai_batch {loss} | {t[f'10 x lai {loss}'] / batch:.2f} |",
        ]
        out += [
            f"| lai_batch {loss} method {m} / default method | "
            f"{t[f'lai_batch {loss} method {m}'] / batch:.2f} |"
            for m in NAMED[loss]
        ]
    return out
