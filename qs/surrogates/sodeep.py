"""SoDeep (Engilberge et al., CVPR 2019): a learned differentiable sorter, frozen inside the
AP and Spearman losses.

A sorter maps a vector of d scores to their normalised ranks. The convention is the paper's:
rank 1 is the highest score and ranks are divided by d, so the exact rank of score i is
``r_i = (1 + #{j : s_j > s_i}) / d`` in {1/d, ..., 1} (the top score gets 1/d, the lowest 1).
Tied scores all get the largest rank of their group, ``#{j : s_j >= s_i} / d`` (the paper
breaks ties arbitrarily; with this choice AP from exact ranks equals scikit-learn's AP even
with ties).

Both networks see each score vector standardised (shifted to mean 0 and scaled to unit
standard deviation, :func:`standardise`): the map is increasing, so the ranks are unchanged,
and the network meets every vector on one scale whatever the units of the scores (the paper
feeds raw scores). Their last affine layer gives a logit per position, mapped into the
range of the ranks by ``1/d + (1 - 1/d) sigmoid(logit)`` (the paper's LSTM ends on the affine
layer; its released CNN ends on a sigmoid). Each choice lowered the test error of short
seeded training runs of both sorters at the same number of steps.

- :class:`LSTMSorter`: a 2-layer bidirectional LSTM over the scores and a 1-D convolution of
  kernel 1 on top (the same affine map at every position) giving each position its logit.
- :class:`CNNSorter`: 8 blocks of 1-D convolution + batch norm + ReLU over the scores, then a
  convolution whose kernel spans the whole vector and whose d output channels are the logits.
- :class:`HandcraftedSorter`: the paper's untrained baseline, one plus a sum of sigmoids of
  pairwise differences.

Sorters are trained once on synthetic score vectors (:func:`synthetic_scores`) with an L1
loss against the exact ranks and Adam (:func:`train_sorter`), then frozen. A trained sorter
is tied to its length d (the paper trains one per length and neither pads nor chunks): a
score vector of another length is an error. The package ships trained checkpoints at
:data:`DEFAULT_LENGTH` (:func:`load_sorter`). Needs the ``[torch]`` extra.
"""

import io
import math
import pickle
import zipfile
from importlib import resources
from pathlib import Path

import torch
from torch import nn

from qs.validation import as_positive_tensor, check_finite_tensor, check_scores

__all__ = ["DEFAULT_LENGTH", "KINDS", "PAPER_L1", "SIZES", "CNNSorter", "HandcraftedSorter",
           "LSTMSorter", "bounded_ranks", "build_sorter", "exact_ranks", "load_sorter",
           "n_parameters", "rank_l1_error", "shipped_checkpoint", "sodeep_ap_loss",
           "sodeep_spearman_loss", "sorter_from_state", "sorter_state", "standardise",
           "synthetic_scores", "train_sorter"]

#: the length of the shipped checkpoints
DEFAULT_LENGTH = 64
KINDS = ("lstm", "cnn")
#: hyper-parameters of each sorter kind: "default" trains on 2 CPU cores in minutes, "full"
#: is the paper's LSTM (hidden 512)
SIZES = {
    "lstm": {"default": {"hidden": 32}, "full": {"hidden": 512}},
    "cnn": {"default": {"channels": (8, 16, 16, 32, 32, 32, 32, 32)},
            "full": {"channels": (8, 16, 32, 64, 96, 128, 256, 256)}},
}
#: Adam's learning rate by kind (the LSTM learns several times faster at 1e-2 on our budget;
#: the CNN with batch norm diverges there and keeps 1e-3)
LEARNING_RATES = {"lstm": 1e-2, "cnn": 1e-3}
#: Table 1 of the paper: L1 error of the sorters on synthetic test vectors (length 100)
PAPER_L1 = {"handcrafted": 0.0350, "cnn": 0.0120, "lstm": 0.0033}
#: the test set of every sorter: a seeded stream apart from the training seeds
TEST_SEED = 20190616
#: the first vectors of the test stream, whose L1 error a checkpoint also records: a quick
#: check that a loaded sorter computes what it did when it was trained
CHECK_VECTORS = 500
FORMAT = "qsrank-sodeep-sorter"
FORMAT_VERSION = 2  # 2: standardised input, bounded output
# the CNN's kernel sizes, block by block: "same" padding, so the receptive field before the
# final whole-vector convolution is 1 + sum(k - 1) = 41 scores
_CNN_KERNELS = (3, 3, 5, 5, 7, 7, 9, 9)


def exact_ranks(scores):
    """The normalised ranks of the module docstring: ``#{j : s_j >= s_i} / d`` along the last
    axis (1/d for the highest score, 1 for the lowest). Piecewise constant, no gradient."""
    scores = scores.detach()
    d = scores.shape[-1]
    ascending = scores.sort(dim=-1).values.contiguous()
    below = torch.searchsorted(ascending, scores.contiguous(), side="left")
    return (d - below).to(scores.dtype if scores.is_floating_point() else torch.float32) / d


class LSTMSorter(nn.Module):
    """Bidirectional LSTM sorter: (B, d) scores -> (B, d) normalised ranks.

    Two stacked bidirectional LSTM layers of `hidden` units read the standardised scores as
    a sequence; a kernel-1 convolution maps each position's 2*hidden features to its logit,
    so every output sees every input.
    """

    kind = "lstm"

    def __init__(self, length, hidden=SIZES["lstm"]["default"]["hidden"]):
        super().__init__()
        self.length, self.hidden = int(length), int(hidden)
        self.lstm = nn.LSTM(1, self.hidden, num_layers=2, batch_first=True, bidirectional=True)
        self.head = nn.Conv1d(2 * self.hidden, 1, kernel_size=1)

    def hyper(self):
        """The constructor's keyword arguments besides the length."""
        return {"hidden": self.hidden}

    def forward(self, scores):
        features, _ = _run_lstm(self.lstm, standardise(scores).unsqueeze(-1))
        return bounded_ranks(self.head(features.transpose(1, 2)).squeeze(1))


def standardise(scores):
    """Each vector (last axis) minus its mean, divided by its root-mean-square deviation:
    an increasing map, so ranks are kept. The deviation is floored at the dtype's epsilon,
    so a constant vector maps to zeros with a finite gradient."""
    centred = scores - scores.mean(dim=-1, keepdim=True)
    spread = torch.linalg.vector_norm(centred, dim=-1, keepdim=True) / math.sqrt(
        scores.shape[-1])
    return centred / spread.clamp_min(torch.finfo(scores.dtype).eps)


def bounded_ranks(logits):
    """Logits (.., d) -> ranks in [1/d, 1], the range of the exact normalised ranks."""
    d = logits.shape[-1]
    return 1 / d + (1 - 1 / d) * torch.sigmoid(logits)


def _run_lstm(lstm, x):
    """cuDNN computes an LSTM's backward pass only in training mode; a frozen (eval mode)
    sorter on a CUDA tensor that needs a gradient runs without cuDNN."""
    if x.is_cuda and x.requires_grad and not lstm.training:
        with torch.backends.cudnn.flags(enabled=False):
            return lstm(x)
    return lstm(x)


class CNNSorter(nn.Module):
    """1-D convolutional sorter: (B, d) scores -> (B, d) normalised ranks.

    Eight blocks [Conv1d (kernel 3, 3, 5, 5, 7, 7, 9, 9, "same" padding), BatchNorm1d, ReLU]
    with `channels` output channels over the standardised scores, then a Conv1d with kernel
    d and d output channels: an affine layer from all positions' features to the d logits.
    """

    kind = "cnn"

    def __init__(self, length, channels=SIZES["cnn"]["default"]["channels"]):
        super().__init__()
        self.length, self.channels = int(length), tuple(int(c) for c in channels)
        if len(self.channels) != len(_CNN_KERNELS):
            raise ValueError(f"the CNN sorter has {len(_CNN_KERNELS)} blocks; got "
                             f"{len(self.channels)} channel counts {self.channels}.")
        layers, width = [], 1
        for out, kernel in zip(self.channels, _CNN_KERNELS):
            layers += [nn.Conv1d(width, out, kernel, padding=kernel // 2), nn.BatchNorm1d(out),
                       nn.ReLU()]
            width = out
        self.blocks = nn.Sequential(*layers)
        self.head = nn.Conv1d(width, self.length, kernel_size=self.length)

    def hyper(self):
        """The constructor's keyword arguments besides the length."""
        return {"channels": list(self.channels)}

    def forward(self, scores):
        logits = self.head(self.blocks(standardise(scores).unsqueeze(1))).squeeze(-1)
        return bounded_ranks(logits)


class HandcraftedSorter(nn.Module):
    """The paper's untrained baseline: ``r_i = (1 + sum_{j != i} sigmoid(lam (s_j - s_i))) / d``.

    Each sigmoid is a soft "s_j is above s_i". `lam` trades accuracy for useful gradients; it
    is set per vector as ``scale / std(pairwise differences)`` so that the ranker does not
    depend on the scores' units (scale 6.8 by default). Works at any length.
    """

    kind = "handcrafted"
    length = None

    def __init__(self, scale=6.8):
        super().__init__()
        self.scale = float(scale)

    def forward(self, scores):
        diff = scores.unsqueeze(-2) - scores.unsqueeze(-1)  # [.., i, j] = s_j - s_i
        spread = diff.detach().flatten(-2).std(dim=-1).clamp_min(torch.finfo(diff.dtype).tiny)
        soft = torch.sigmoid(diff * (self.scale / spread)[..., None, None])
        d = scores.shape[-1]
        # the diagonal contributes sigmoid(0) = 1/2 per row; replace it by the "1 +"
        return (soft.sum(dim=-1) + 0.5) / d


SORTERS = {"lstm": LSTMSorter, "cnn": CNNSorter}


def build_sorter(kind, length, size="default", **hyper):
    """An untrained sorter of `kind` ("lstm" or "cnn") for vectors of `length`, at the
    hyper-parameters of ``SIZES[kind][size]`` updated by `hyper`."""
    if kind not in SORTERS:
        raise ValueError(f"unknown sorter kind {kind!r}; expected one of {list(KINDS)}.")
    if size not in SIZES[kind]:
        raise ValueError(f"unknown size {size!r}; expected one of {list(SIZES[kind])}.")
    if not isinstance(length, int) or isinstance(length, bool) or length < 2:
        raise ValueError(f"length must be an integer >= 2; got {length!r}.")
    unknown = sorted(set(hyper) - set(SIZES[kind][size]))
    if unknown:
        raise ValueError(f"the {kind} sorter has no hyper-parameter {', '.join(unknown)}; it "
                         f"takes {', '.join(SIZES[kind][size])}.")
    return SORTERS[kind](length, **{**SIZES[kind][size], **hyper})


def synthetic_scores(n, length, generator=None):
    """`n` synthetic score vectors (n, length), float32, drawn as the paper's training data.

    Each vector is, with equal chance, one of four families: uniform on [-1, 1]; standard
    normal; evenly spaced over a random sub-range of [-1, 1] plus Gaussian noise of up to
    one spacing; a mixture, whose first k entries (k uniform in 1..length-1) come from one of
    the first three families and the rest from another. Entries are then shuffled, so a
    position says nothing about a rank.
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


def rank_l1_error(sorter, length, n_vectors=10_000, seed=TEST_SEED, batch_size=500):
    """Mean absolute difference between `sorter`'s ranks and the exact normalised ranks on
    `n_vectors` synthetic vectors (:func:`synthetic_scores`, seeded): the paper's Table 1
    measure. `sorter` maps (B, length) scores to (B, length) ranks."""
    g = torch.Generator().manual_seed(seed)
    total, count = 0.0, 0
    with torch.no_grad():
        for start in range(0, n_vectors, batch_size):
            x = synthetic_scores(min(batch_size, n_vectors - start), length, g)
            total += (sorter(x) - exact_ranks(x)).abs().sum(dtype=torch.float64).item()
            count += x.numel()
    return total / count


def train_sorter(kind="lstm", length=DEFAULT_LENGTH, steps=2000, seed=0, *, size="default",
                 batch_size=128, lr=None, lr_halve_every=None, test_vectors=10_000,
                 callback=None, **hyper):
    """Train a sorter on fresh synthetic vectors; return (sorter in eval mode, metadata).

    Each of `steps` Adam steps draws `batch_size` vectors (:func:`synthetic_scores`, from a
    generator seeded with `seed`) and minimises the L1 distance of the sorter's output to
    their exact ranks; the learning rate (default ``LEARNING_RATES[kind]``) halves every
    `lr_halve_every` steps (default a quarter of `steps`), as the paper halves it on a fixed
    schedule. Runs on one thread with seeded weights, so a seed gives the same sorter on a
    given machine; the global RNG and thread count are left as they were. `callback(step, loss)` is called after every step.
    The metadata records the hyper-parameters, the seed, and the L1 error on
    `test_vectors` vectors of the fixed test stream (:func:`rank_l1_error`) and on its first
    :data:`CHECK_VECTORS`.
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
    meta = {"kind": kind, "length": length, "hyper": sorter.hyper(), "size": size,
            "parameters": n_parameters(sorter), "seed": seed, "steps": steps,
            "batch_size": batch_size, "lr": lr, "lr_halve_every": halve, "loss": "l1",
            "optimizer": "adam", "test_l1": test_l1, "test_vectors": test_vectors,
            "test_seed": TEST_SEED, "check_l1": check_l1, "check_vectors": CHECK_VECTORS,
            "torch_version": str(torch.__version__)}
    return sorter, meta


def n_parameters(module):
    """The number of parameters of a sorter, frozen ones included."""
    return sum(p.numel() for p in module.parameters())


def sorter_state(sorter, meta):
    """The checkpoint dictionary of a trained sorter: format tag, metadata, weights."""
    return {"format": FORMAT, "format_version": FORMAT_VERSION, **meta,
            "state_dict": {k: v.detach().cpu() for k, v in sorter.state_dict().items()}}


def sorter_from_state(state, source="checkpoint"):
    """The frozen sorter (eval mode, no parameter gradients) of a checkpoint dictionary."""
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise ValueError(f"{source} is not a qsrank SoDeep sorter checkpoint (no format "
                         f"{FORMAT!r}).")
    if state.get("format_version") != FORMAT_VERSION:
        raise ValueError(f"{source}: unsupported sorter checkpoint format version "
                         f"{state.get('format_version')!r}; this qsrank reads version "
                         f"{FORMAT_VERSION}.")
    kind = state.get("kind")
    if kind not in SORTERS:
        raise ValueError(f"{source}: unknown sorter kind {kind!r}; expected one of "
                         f"{list(KINDS)}.")
    try:
        sorter = SORTERS[kind](state["length"], **state["hyper"])
        sorter.load_state_dict(state["state_dict"])
    except (KeyError, TypeError, ValueError, RuntimeError) as err:
        raise ValueError(f"{source}: the {kind} sorter's weights do not load: "
                         f"{_first_line(err)}") from None
    sorter.eval().requires_grad_(False)
    sorter.meta = {k: v for k, v in state.items() if k != "state_dict"}
    return sorter


def _first_line(err):
    """An exception as one short line: its type and the start of its message."""
    lines = str(err).strip().splitlines()
    return f"{type(err).__name__}: {lines[0][:200]}" if lines else type(err).__name__


def shipped_checkpoint(kind="lstm"):
    """The path of the checkpoint shipped with the package for `kind` at DEFAULT_LENGTH."""
    if kind not in SORTERS:
        raise ValueError(f"unknown sorter kind {kind!r}; expected one of {list(KINDS)}.")
    return resources.files("qs.surrogates") / f"sorter_{kind}_{DEFAULT_LENGTH}.pt"


def load_sorter(path=None, *, kind="lstm", length=None):
    """The frozen sorter stored at `path` (default: the shipped checkpoint of `kind`).

    With `length` given, a checkpoint trained for another length is a ValueError naming
    both. An unreadable file, or one that is not a sorter checkpoint, is a ValueError too.
    The metadata of the checkpoint is on ``sorter.meta``.
    """
    source = path if path is not None else shipped_checkpoint(kind)
    try:
        raw = Path(source).read_bytes() if path is not None else source.read_bytes()
    except OSError as err:
        raise ValueError(f"cannot read sorter checkpoint {source}: {err.strerror or err}") \
            from None
    try:
        state = torch.load(io.BytesIO(raw), map_location="cpu", weights_only=True)
    except _UNREADABLE as err:
        raise ValueError(f"{source} is not a readable sorter checkpoint (corrupt or not a "
                         f"torch file): {_first_line(err)}") from None
    sorter = sorter_from_state(state, str(source))
    if length is not None and sorter.length != length:
        raise ValueError(f"sorter checkpoint {source} was trained for length {sorter.length}, "
                         f"but the scores have length {length}; train one for {length} "
                         f"(qsrank sodeep train --length {length}).")
    return sorter


# what torch.load raises on a damaged or foreign file
_UNREADABLE = (RuntimeError, ValueError, KeyError, AttributeError, EOFError, OSError,
               pickle.UnpicklingError, zipfile.BadZipFile)
_shipped = {}


def _default_sorter():
    """The shipped LSTM sorter, loaded once."""
    if "lstm" not in _shipped:
        _shipped["lstm"] = load_sorter()
    return _shipped["lstm"]


def _sorted_ranks(sorter, scores):
    """Validate (n,) or (Q, n) scores against `sorter`; return its ranks (Q, n) in the
    scores' dtype, differentiable in the scores."""
    if sorter is None:
        sorter = _default_sorter()
    check_scores(scores)
    n = scores.shape[-1]
    length = getattr(sorter, "length", None)
    if length is not None and n != length:
        raise ValueError(f"the sorter was trained for length {length}, but the scores have "
                         f"length {n}; use a sorter of length {n} (qsrank sodeep train "
                         f"--length {n}) or score groups of {length}.")
    if n < 2:
        raise ValueError(f"scores need at least 2 entries per query to be ranked; got {n}.")
    check_finite_tensor(scores)
    rows = scores if scores.ndim == 2 else scores[None]
    param = next(iter(sorter.parameters()), None) if isinstance(sorter, nn.Module) else None
    x = rows.to(param.dtype) if param is not None else rows
    return sorter(x).to(scores.dtype)


def _reduce(values, counted, flat, reduction):
    if reduction == "none":
        return values[0] if flat else values
    if reduction == "sum":
        return values.sum()
    if reduction == "mean":
        return values.sum() / counted.sum().clamp(min=1)
    raise ValueError(f"reduction must be one of ['mean', 'sum', 'none']; got {reduction!r}.")


def sodeep_ap_loss(scores, labels, sorter=None, reduction="mean"):
    """1 - AP per query with the sorter's rank in place of the exact one (paper eqs. 5-7).

    ``AP = (1/|P|) sum_{k in P} prec(k)``, ``prec(k) = #{positives j : s_j >= s_k} /
    rank(k)``. The numerator is the exact count (a set, piecewise constant, as in the paper);
    the denominator ``rank(k) = d * sorter(scores)_k`` carries the gradient to every score
    through the sorter. With :func:`exact_ranks` as `sorter` this is exactly 1 - AP as
    scikit-learn computes it. A predicted rank is clamped to at least 1/2 so a precision
    stays bounded.

    scores : float tensor (n,) or (Q, n), finite, n the sorter's length.
    labels : same shape; 1/True positive, 0/-1/False negative.
    sorter : a module or function (Q, n) -> (Q, n) normalised ranks; default the shipped LSTM
        sorter. A query without a positive or without a negative has loss 0 and no
        gradient, and "mean" leaves it out.
    """
    ranks = _sorted_ranks(sorter, scores)
    pos = as_positive_tensor(labels, scores)
    pos = pos if pos.ndim == 2 else pos[None]
    rows = scores.detach() if scores.ndim == 2 else scores.detach()[None]
    d = rows.shape[-1]
    # numerator: positives scored at or above each score (exact, no gradient)
    above = (rows[:, None, :] >= rows[:, :, None]) & pos[:, None, :]
    hits = above.sum(dim=-1).to(ranks.dtype)
    precision = hits / (d * ranks).clamp_min(0.5)
    n_pos = pos.sum(dim=-1)
    counted = (n_pos > 0) & (n_pos < d)
    ap = (precision * pos).sum(dim=-1) / n_pos.clamp(min=1)
    values = torch.where(counted, 1 - ap, torch.zeros_like(ap))
    return _reduce(values, counted, scores.ndim == 1, reduction)


def sodeep_spearman_loss(scores, targets, sorter=None, reduction="mean"):
    """1 - Spearman correlation per query between the scores and `targets`, with the sorter's
    rank of the scores in place of the exact one (paper eqs. 2-4).

    With normalised ranks r (scores, via the sorter) and t (targets, exact), ``rho = 1 -
    6 d sum_i (r_i - t_i)^2 / (d^2 - 1)``, Spearman's formula for distinct values (the paper's
    eq. 2; d^2 of it cancels the normalisation). With :func:`exact_ranks` as `sorter` and no
    ties this is exactly 1 - scipy.stats.spearmanr. Shapes and `sorter` as in
    :func:`sodeep_ap_loss`; targets are finite floats of the scores' shape.
    """
    ranks = _sorted_ranks(sorter, scores)
    targets = torch.as_tensor(targets, device=scores.device)
    if tuple(targets.shape) != tuple(scores.shape):
        raise ValueError(f"scores and targets must have the same shape; got scores "
                         f"{tuple(scores.shape)} and targets {tuple(targets.shape)}.")
    if not (targets.is_floating_point() or targets.dtype in (torch.int32, torch.int64)):
        raise ValueError(f"targets must be real numbers; got dtype {targets.dtype}.")
    if not torch.isfinite(targets).all():
        raise ValueError("targets must be finite.")
    t = exact_ranks(targets.to(ranks.dtype))
    t = t if t.ndim == 2 else t[None]
    d = ranks.shape[-1]
    values = 6 * d * ((ranks - t) ** 2).sum(dim=-1) / (d * d - 1)
    counted = torch.ones_like(values, dtype=torch.bool)
    return _reduce(values, counted, scores.ndim == 1, reduction)
