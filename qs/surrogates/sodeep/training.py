"""Training SoDeep's sorters on synthetic score vectors, and their L1 rank error (the
paper's Table 1 measure)."""

import math
from collections.abc import Callable
from typing import Any

import torch

from qs.surrogates.sodeep.sorters import (
    DEFAULT_LENGTH,
    build_sorter,
    exact_ranks,
    n_parameters,
)

__all__ = [
    "CHECK_VECTORS",
    "LEARNING_RATES",
    "PAPER_L1",
    "TEST_SEED",
    "rank_l1_error",
    "synthetic_scores",
    "train_sorter",
]

#: Adam's learning rate by kind (docs/experiments/sodeep.md says why they differ)
LEARNING_RATES = {"lstm": 1e-2, "cnn": 1e-3}
#: Table 1 of the paper: L1 error of the sorters on synthetic test vectors (length 100)
PAPER_L1 = {"handcrafted": 0.0350, "cnn": 0.0120, "lstm": 0.0033}
#: the test set of every sorter: a seeded stream apart from the training seeds
TEST_SEED = 20190616
#: the first vectors of the test stream, whose L1 error a checkpoint also records: a quick
#: check that a loaded sorter computes what it did when it was trained
CHECK_VECTORS = 500


def synthetic_scores(n: int, length: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """Synthetic score vectors drawn as the paper's training data.

    Each vector is, with equal chance, one of four families: uniform on [-1, 1]; standard
    normal; evenly spaced over a random sub-range of [-1, 1] plus Gaussian noise of up to
    one spacing; a mixture, whose first k entries (k uniform in 1..length-1) come from one of
    the first three families and the rest from another. Entries are then shuffled, so a
    position says nothing about a rank.

    Parameters
    ----------
    n : int
        Number of vectors.
    length : int
        Length of each vector.
    generator : torch.Generator or None, default None
        The random stream (None: torch's global one).

    Returns
    -------
    Tensor of shape (n, length)
        The vectors, float32.

    Examples
    --------
    >>> import torch
    >>> from qs.surrogates.sodeep import synthetic_scores
    >>> tuple(synthetic_scores(3, 5, torch.Generator().manual_seed(0)).shape)
    (3, 5)
    """
    g = generator
    shape = (n, length)
    uniform = 2 * torch.rand(shape, generator=g) - 1
    normal = torch.randn(shape, generator=g)
    ends = (2 * torch.rand((n, 2), generator=g) - 1).sort(dim=1).values
    spacing = (ends[:, 1:] - ends[:, :1]) / (length - 1)
    grid = ends[:, :1] + spacing * torch.arange(length, dtype=torch.float32)
    spaced = grid + torch.randn(shape, generator=g) * spacing * torch.rand((n, 1), generator=g)
    bases = torch.stack([uniform, normal, spaced])  # (3, n, length)
    rows = torch.arange(n)
    first = torch.randint(0, 3, (n,), generator=g)
    second = torch.randint(0, 3, (n,), generator=g)
    split = torch.randint(1, length, (n, 1), generator=g)
    mixed = torch.where(torch.arange(length) < split, bases[first, rows], bases[second, rows])
    family = torch.randint(0, 4, (n,), generator=g)
    x = torch.cat([bases, mixed[None]])[family, rows]
    order = torch.rand(shape, generator=g).argsort(dim=1)
    return x.gather(1, order)


def rank_l1_error(
    sorter: Callable[[torch.Tensor], torch.Tensor],
    length: int,
    n_vectors: int = 10_000,
    seed: int = TEST_SEED,
    batch_size: int = 500,
) -> float:
    """Mean absolute difference between a sorter's ranks and the exact normalised ranks.

    The paper's Table 1 measure, on seeded synthetic vectors (`synthetic_scores`).

    Parameters
    ----------
    sorter : callable
        Maps (B, length) scores to (B, length) ranks.
    length : int
        Length of the vectors.
    n_vectors : int, default 10000
        Number of test vectors.
    seed : int, default TEST_SEED
        Seed of the test stream.
    batch_size : int, default 500
        Vectors ranked at a time.

    Returns
    -------
    float
        The mean L1 error.

    Examples
    --------
    >>> from qs.surrogates.sodeep import exact_ranks, rank_l1_error
    >>> rank_l1_error(exact_ranks, 8, n_vectors=10)
    0.0
    """
    g = torch.Generator().manual_seed(seed)
    total, count = 0.0, 0
    with torch.no_grad():
        for start in range(0, n_vectors, batch_size):
            x = synthetic_scores(min(batch_size, n_vectors - start), length, g)
            total += (sorter(x) - exact_ranks(x)).abs().sum(dtype=torch.float64).item()
            count += x.numel()
    return total / count


def train_sorter(
    kind: str = "lstm",
    length: int = DEFAULT_LENGTH,
    steps: int = 2000,
    seed: int = 0,
    *,
    size: str = "default",
    batch_size: int = 128,
    lr: float | None = None,
    lr_halve_every: int | None = None,
    test_vectors: int = 10_000,
    callback: Callable[[int, float], object] | None = None,
    **hyper: Any,
) -> tuple[torch.nn.Module, dict[str, Any]]:
    """Train a sorter on fresh synthetic vectors.

    Each Adam step draws ``batch_size`` vectors (`synthetic_scores`, from a generator
    seeded with ``seed``) and minimises the L1 distance of the sorter's output to their
    exact ranks; the learning rate halves on a fixed schedule, as the paper's does. Runs on
    one thread with seeded weights, so a seed gives the same sorter on a given machine; the
    global RNG and thread count are left as they were.

    Parameters
    ----------
    kind : str, default "lstm"
        "lstm" or "cnn".
    length : int, default DEFAULT_LENGTH
        Length of the score vectors (>= 2).
    steps : int, default 2000
        Adam steps.
    seed : int, default 0
        Seed of the weights and of the training vectors.
    size : str, default "default"
        Hyper-parameters of ``SIZES[kind]``: "default" or "full".
    batch_size : int, default 128
        Vectors per step.
    lr : float or None, default None
        Adam's learning rate (None: ``LEARNING_RATES[kind]``).
    lr_halve_every : int or None, default None
        Steps between halvings of the learning rate (None: a quarter of ``steps``).
    test_vectors : int, default 10000
        Vectors of the fixed test stream the L1 error is measured on (0: none).
    callback : callable or None, default None
        Called as ``callback(step, loss)`` after every step.
    **hyper
        Hyper-parameters that update those of ``size`` (``hidden``, ``channels``).

    Returns
    -------
    sorter : torch.nn.Module
        The trained sorter, in eval mode, its parameters frozen.
    meta : dict
        The hyper-parameters, the seed, and the L1 error on ``test_vectors`` vectors of the
        fixed test stream (`rank_l1_error`) and on its first ``CHECK_VECTORS``.

    Raises
    ------
    ValueError
        On a bad kind, size, length, step count, batch size, learning rate or
        hyper-parameter.

    Examples
    --------
    A few steps at a short length, to show the call (the shipped sorters take 2000 or more):

    >>> sorter, meta = train_sorter("lstm", 8, steps=5, batch_size=8, test_vectors=16)
    >>> sorter.training, meta["kind"], meta["length"], meta["steps"]
    (False, 'lstm', 8, 5)
    """
    for name, value in (("steps", steps), ("batch_size", batch_size)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be a positive integer; got {value!r}.")
    lr = LEARNING_RATES.get(kind, 1e-3) if lr is None else lr
    if not (isinstance(lr, (int, float)) and math.isfinite(lr) and lr > 0):
        raise ValueError(f"lr must be a positive number; got {lr!r}.")
    halve = lr_halve_every or max(steps // 4, 1)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            sorter = build_sorter(kind, length, size, **hyper)
        g = torch.Generator().manual_seed(seed)
        opt = torch.optim.Adam(sorter.parameters(), lr=lr)
        schedule = torch.optim.lr_scheduler.StepLR(opt, step_size=halve, gamma=0.5)
        sorter.train()
        for step in range(1, steps + 1):
            x = synthetic_scores(batch_size, length, g)
            loss = (sorter(x) - exact_ranks(x)).abs().mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            schedule.step()
            if callback is not None:
                callback(step, loss.item())
        sorter.eval()
        test_l1 = rank_l1_error(sorter, length, test_vectors) if test_vectors else None
        check_l1 = rank_l1_error(sorter, length, CHECK_VECTORS)
    finally:
        torch.set_num_threads(threads)
    sorter.requires_grad_(False)
    meta = {
        "kind": kind,
        "length": length,
        "hyper": sorter.hyper(),
        "size": size,
        "parameters": n_parameters(sorter),
        "seed": seed,
        "steps": steps,
        "batch_size": batch_size,
        "lr": lr,
        "lr_halve_every": halve,
        "loss": "l1",
        "optimizer": "adam",
        "test_l1": test_l1,
        "test_vectors": test_vectors,
        "test_seed": TEST_SEED,
        "check_l1": check_l1,
        "check_vectors": CHECK_VECTORS,
        "torch_version": str(torch.__version__),
    }
    return sorter, meta
