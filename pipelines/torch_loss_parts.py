"""Parts of `qsrank bench torch-losses`: seeded one-vs-rest scores, cases timed side by side, the
distributed loss against one process, the memory bank against the similarity product."""

import datetime
import socket
import tempfile
import time

import numpy as np

#: a repeat of the distributed part is the mean of this many back-to-back steps, and the part
#: makes at least this many repeats (each about 0.1 s: a hiccup of the machine spoils few)
DISTRIBUTED_STEPS = 20
DISTRIBUTED_REPEATS = 15

#: a repeat of a fast loss runs back-to-back calls for at least this long (their mean counts)
MIN_REPEAT_S = 0.05


def one_vs_rest(rng, q, n, frac=0.1, dtype=np.float32):
    """Scores (q, n) of normal draws and labels, about `frac` positives (and a negative) a query."""
    scores = rng.normal(size=(q, n)).astype(dtype)
    labels = rng.random((q, n)) < frac
    labels[:, 0], labels[:, 1] = True, False  # every query has both classes
    return scores, labels


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _distributed_worker(rank, world, port, out, per_rank, q, repeats, seed):
    import torch
    import torch.distributed as dist

    from qs.torch import rank_hinge_loss
    from qs.torch.distributed import distributed_rank_hinge_loss

    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=120),
    )
    try:
        scores, labels = one_vs_rest(np.random.default_rng(seed), q, world * per_rank)
        cols = slice(rank * per_rank, (rank + 1) * per_rank)
        x = torch.from_numpy(scores[:, cols].copy()).requires_grad_(True)
        y = torch.from_numpy(labels[:, cols].copy())
        whole = torch.from_numpy(scores).requires_grad_(True)
        whole_y = torch.from_numpy(labels)
        times = []
        for k in range(repeats + 1):
            dist.barrier()
            step = _mean_step(lambda: distributed_rank_hinge_loss(x, y, dim=-1), x)
            dist.barrier()  # the other processes wait at the next barrier meanwhile
            one = (
                _mean_step(lambda: rank_hinge_loss(whole, whole_y, dim=-1), whole)
                if rank == 0
                else 0
            )
            if k:
                times.append((step, one))
        np.save(f"{out}/{rank}.npy", np.array(times))
    finally:
        dist.destroy_process_group()


def _mean_step(loss, x):
    """Mean wall time of :data:`DISTRIBUTED_STEPS` back-to-back steps (forward + backward)."""
    start = time.perf_counter()
    for _ in range(DISTRIBUTED_STEPS):
        x.grad = None
        loss().backward()
    return (time.perf_counter() - start) / DISTRIBUTED_STEPS


def distributed_step(per_rank=4096, q=8, repeats=DISTRIBUTED_REPEATS, world=2, seed=0):
    """(distributed step s, one-process step s) per repeat, timed in turn in the same processes (the
    one-process step on process 0, the others at a barrier)."""
    import torch

    with tempfile.TemporaryDirectory() as tmp:
        torch.multiprocessing.spawn(
            _distributed_worker,
            args=(world, _free_port(), tmp, per_rank, q, repeats, seed),
            nprocs=world,
            join=True,
        )
        every = [np.load(f"{tmp}/{r}.npy") for r in range(world)]
    return np.column_stack([np.max([t[:, 0] for t in every], axis=0), every[0][:, 1]])


def interleaved(cases, repeats):
    """(wall s, CPU s) per call of each case per repeat, repeats interleaved across cases, each the
    mean of calls filling `MIN_REPEAT_S`."""
    inner = {}
    for name, fn in cases.items():
        fn()
        start = time.perf_counter()
        fn()
        inner[name] = max(1, int(MIN_REPEAT_S / (time.perf_counter() - start)))
    times = {name: [] for name in cases}
    for _ in range(repeats):
        for name, fn in cases.items():
            start, cpu = time.perf_counter(), time.process_time()
            for _ in range(inner[name]):
                fn()
            times[name].append(
                (
                    (time.perf_counter() - start) / inner[name],
                    (time.process_time() - cpu) / inner[name],
                )
            )
    return {name: np.array(t) for name, t in times.items()}


def ratio_text(num, den, clock):
    """'1.23 (1.10-1.31)': the median ratio of two `interleaved` cases on ``clock`` (0 wall, 1 CPU),
    with its range."""
    r = num[:, clock] / den[:, clock]
    return f"{np.median(r):.2f} ({r.min():.2f}-{r.max():.2f})"


def memory_bank(size=100_000, queries=64, dim=128, classes=1000, repeats=5, seed=0):
    """(similarity product, loss + gradient) times, each (repeats, 2) of (wall s, CPU s)."""
    import torch

    from qs.torch.memory import CrossBatchMemory

    rng = np.random.default_rng(seed)
    memory = CrossBatchMemory(size)
    bank = torch.nn.functional.normalize(
        torch.from_numpy(rng.normal(size=(size, dim)).astype(np.float32)), dim=1
    )
    memory._store(bank, torch.from_numpy(rng.integers(0, classes, size)))
    emb = torch.from_numpy(rng.normal(size=(queries, dim)).astype(np.float32))
    labels = torch.from_numpy(rng.integers(0, classes, queries))

    def product():
        return torch.nn.functional.normalize(emb, dim=1) @ memory.memory.T

    def step():
        x = emb.clone().requires_grad_(True)
        memory(x, labels).backward()

    times = interleaved({"product": product, "step": step}, repeats)
    return times["product"], times["step"]
