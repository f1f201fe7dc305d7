"""Ranking structured hinge losses (AP, NDCG, 0-1) as torch autograd functions.

``rank_hinge_loss(scores, labels, loss="ap")`` is, per query, the structured hinge of the
ranking SVM, ``max_R (Delta(R*, R) + F(R)) - F(R*)``, found by exact loss-augmented inference
(`qs.inference`); its gradient with respect to the scores is ``coef(R_bar) - coef(R*)``
(an exact subgradient, since the inference is exact). A 2-D score tensor holds several
queries, solved in one call: by default the items are ranked along dim 0, so the (N, C)
logits of a mini-batch (as torch's classification losses take them) give one ranking of
the N samples per class; ``dim=-1`` ranks along each row of a (Q, n) tensor instead.

CPU tensors go to the numba kernels in one `qs.inference.batch.lai_batch` call, which
reads float32 and float64 scores in place and writes the gradient in their dtype; CUDA
tensors of at least `CUDA_TORCH_FROM` scores to the same inference run on the GPU
(method "torch": numba's CUDA kernels of `qs.torch._cuda` where numba can compile for
the GPU, else the torch operations of `qs.torch._exact`, which CPU tensors may ask for
too), smaller ones to the numba kernels on a copy on the CPU.

`row_loss` (a loss per row from a ``solve`` of the rows, with masks and reductions) is
the machinery the other score losses share: `qs.torch.dlm` differs only in ``solve``,
`qs.torch.retrieval` and `qs.torch.memory` take `hinge_solve`'s.
"""

import functools

import numpy as np
import torch

from qs.inference import resolve
from qs.inference.batch import lai_batch
from qs.torch._exact import cuda_kernels, lai_torch
from qs.torch.checks import READ_AS_IS, check_mask, check_score_input, ranked_along_columns

__all__ = [
    "CUDA_TORCH_FROM",
    "CUDA_TORCH_OPS_FROM",
    "RankHingeLoss",
    "hinge_solve",
    "rank_hinge_loss",
    "ranked_queries",
    "reduce_rows",
    "row_loss",
    "rows_of_queries",
    "solve_kept",
]

#: on CUDA, "auto" runs the torch method from this many scores (all queries together) on,
#: and numba on a CPU copy below: with numba's CUDA kernels (`qs.torch._cuda`) a call
#: costs about 1-2 ms of launches at any size up to about 10^6 scores
#: (results/torch_losses/cuda: the CPU copy is the faster at 8 x 2^12 scores, the kernels
#: at 8 x 2^14); `CUDA_TORCH_OPS_FROM` when only the torch operations can run
CUDA_TORCH_FROM = 1 << 16
#: the same for the torch operations of `qs.torch._exact`, bound by their kernel
#: launches up to about 10^6 scores (ten times numba on a CPU copy at 8 x 256 scores)
CUDA_TORCH_OPS_FROM = 1 << 20


def rank_hinge_loss(
    scores, labels, loss="ap", method="auto", reduction="mean", *, dim=0, mask=None
):
    """The structured hinge of a rank-based loss, differentiable in ``scores``.

    Parameters
    ----------
    scores : Tensor
        Finite float scores: one query (n,), or one query per column (``dim=0``: (n, Q),
        as the (batch, classes) logits of a classifier) or per row (``dim=-1``: (Q, n)).
        float16 and bfloat16 (as autocast makes them) are accepted.
    labels : Tensor or array_like
        Of the scores' shape: 1 (or True) at the positives, 0, -1 (or False) at the
        negatives.
    loss : str or QSLoss, default "ap"
        "ap", "ndcg" or "01" (the binary hinge: ``mean(max(0, 1 - y s))`` per query), or a
        [qs.losses.QSLoss][] instance (solved by `qs.inference.batch.lai_batch` on the
        CPU, also for CUDA scores).
    method : str, default "auto"
        "auto", "torch" (named losses only), or a method of `qs.inference.METHODS` for
        ``loss``. On the
        CPU "auto" is `qs.inference.lai`'s default; on CUDA it is "torch" from
        `CUDA_TORCH_FROM` scores on (`CUDA_TORCH_OPS_FROM` where numba cannot
        compile for the GPU and only the torch operations run), and below that the numba
        default on a copy on the CPU (where kernel launches would cost more than the work);
        a named numba method
        copies the scores to the CPU and back.
    reduction : str, default "mean"
        "mean" (over the queries that have a positive and a negative), "sum", or "none"
        (shape (Q,), or a scalar for 1-D scores).
    dim : int, default 0
        The dimension along which items are ranked: 0 (each column of a 2-D tensor is a
        query) or -1 (each row is). A 1-D tensor is one query either way.
    mask : Tensor or array_like, optional
        Bool, of the scores' shape, True where an entry takes no part in its query's ranking
        (as a masked array's mask): a query ranked against the others but not itself,
        padding. A masked entry gets zero gradient.

    Returns
    -------
    Tensor
        A scalar in the scores' dtype, or with ``reduction="none"`` one value per query.

    Examples
    --------
    A classifier's (batch, classes) logits and one-hot targets: each class ranks the samples
    of the batch (its positives are the samples of that class), the mean over the classes.

    >>> import torch
    >>> from qs.torch import rank_hinge_loss
    >>> logits = torch.tensor([[2.0, 0.1], [0.3, 1.5], [1.1, -0.2], [-0.5, 0.4]],
    ...                       requires_grad=True)
    >>> targets = torch.tensor([[1, 0], [0, 1], [1, 0], [0, 1]])
    >>> value = rank_hinge_loss(logits, targets, "ap")  # dim=0: one ranking per column
    >>> value.backward()
    >>> tuple(logits.grad.shape)
    (4, 2)

    The same rankings with one query per row, (classes, batch):

    >>> same = rank_hinge_loss(logits.T, targets.T, "ap", dim=-1)
    >>> bool(torch.equal(value, same))
    True

    Notes
    -----
    A query without a positive or without a negative (among its entries not masked) has no
    ranking: its loss is 0 with zero gradient, and "mean" leaves it out of the denominator
    (0 when no query counts). Scores are solved in float64 (float64 and float32 CPU tensors
    are read in place, float32 rows widened one at a time; float16 and bfloat16 are cast to
    float32 once, exactly); the loss and gradient come back in the scores' dtype. Ties, which
    float16 and bfloat16 make often, are broken as the kernels break them
    (`qs.inference.lai`): where two rankings reach the same objective, a negative takes
    the larger interleaving rank, that is, the place below the positives it ties with.
    """
    # the CPU kernels check finiteness in the pass that reads the scores (the error names
    # the query and the sample); elsewhere a pass here (a mask moves the samples)
    on_kernels = (
        mask is None
        and method != "torch"
        and isinstance(scores, torch.Tensor)
        and not scores.is_cuda
    )
    pos = check_score_input(
        scores, labels, loss, method, reduction, finite=not on_kernels, any_loss=True
    )
    keep = None if mask is None else ~check_mask(mask, scores)
    scores, pos, keep = rows_of_queries(dim, scores, pos, keep)
    return row_loss(
        scores, pos, keep, functools.partial(_solve, loss=loss, method=method), reduction
    )


def rows_of_queries(dim, scores, pos, keep=None):
    """The scores, positives and kept entries with one query per row, for `row_loss`.

    Parameters
    ----------
    dim : int
        The dimension along which items are ranked.
    scores : torch.Tensor
        (n,) or 2-D scores.
    pos : torch.Tensor
        Bool, of the scores' shape.
    keep : torch.Tensor or None, default None
        Bool, of the scores' shape; None: every entry.

    Returns
    -------
    tuple
        ``(scores, pos, keep)``: transposed views when the items are ranked along dim 0 of
        a 2-D tensor (`qs.torch.checks.ranked_along_columns`), as given otherwise.

    Examples
    --------
    >>> pos = torch.ones(3, 2, dtype=torch.bool)
    >>> scores, pos, keep = rows_of_queries(0, torch.zeros(3, 2), pos)
    >>> scores.shape, keep
    (torch.Size([2, 3]), None)
    """
    if not ranked_along_columns(dim, scores):
        return scores, pos, keep
    return scores.T, pos.T, None if keep is None else keep.T


def hinge_solve(loss, method):
    """The solver of the structured hinge of a loss, for `row_loss`.

    Parameters
    ----------
    loss : str or QSLoss
        The loss, as `rank_hinge_loss` takes it.
    method : str
        "torch", or a LAI method that supports the loss.

    Returns
    -------
    callable
        ``solve(scores, pos, lead=None) -> (hinge (Q,), gradient (Q, n), valid (Q,))``
        (``lead`` as `qs.inference.batch.lai_batch`'s, in tensors).

    Raises
    ------
    ValueError
        For an unknown method, or one that does not support the loss.

    Examples
    --------
    >>> scores = torch.tensor([[0.5, 0.1, 0.9], [0.2, 0.3, 0.1]])
    >>> pos = torch.tensor([[True, False, False], [False, True, False]])
    >>> hinge, gradient, valid = hinge_solve("ap", "auto")(scores, pos)
    >>> hinge, valid
    (tensor([0.9000, 0.4000], dtype=torch.float64), tensor([True, True]))
    """
    if method != "torch":
        resolve(loss, method)
    return functools.partial(_solve, loss=loss, method=method)


def row_loss(scores, pos, keep, solve, reduction):
    """The loss of each row of the scores on its kept entries, reduced.

    Without a graph to make (no gradient wanted) the rows are solved without the autograd
    function; "mean" counts the rows that the solve found ranked, with no pass over the
    labels.

    Parameters
    ----------
    scores : torch.Tensor
        (Q, n) or (n,) scores.
    pos : torch.Tensor
        Bool, of the scores' shape.
    keep : torch.Tensor or None
        Bool, of the scores' shape, the entries that take part (`solve_kept`); None: all.
    solve : callable
        A solver of `hinge_solve`'s form.
    reduction : str
        "mean", "sum" or "none", as `rank_hinge_loss` takes it.

    Returns
    -------
    torch.Tensor
        The reduced loss; with "none", one per row.

    Examples
    --------
    >>> scores = torch.tensor([[0.5, 0.1, 0.9], [0.2, 0.3, 0.1]])
    >>> pos = torch.tensor([[True, False, False], [False, True, False]])
    >>> row_loss(scores, pos, None, hinge_solve("ap", "auto"), "mean")
    tensor(0.6500)
    """
    flat = scores.ndim == 1
    if flat:
        scores, pos, keep = scores[None], pos[None], None if keep is None else keep[None]
    if torch.is_grad_enabled() and scores.requires_grad:
        values, valid = _RowLoss.apply(scores, pos, keep, solve)
    else:
        values, _, valid = solve_kept(scores.detach(), pos, keep, solve)
        values = values.to(scores.dtype)
    return reduce_rows(values[0] if flat else values, valid, reduction)


def reduce_rows(values, valid, reduction):
    """Per-row values summed, averaged over the valid rows, or returned as they are.

    Parameters
    ----------
    values : torch.Tensor of shape (Q,)
        One value per row.
    valid : torch.Tensor of shape (Q,), bool
        The rows a mean counts.
    reduction : str
        "mean", "sum" or "none".

    Returns
    -------
    torch.Tensor
        A scalar, or ``values`` for "none".

    Examples
    --------
    >>> reduce_rows(torch.tensor([1.0, 0.0, 3.0]), torch.tensor([True, False, True]), "mean")
    tensor(2.)
    """
    if reduction == "none":
        return values
    if reduction == "sum":
        return values.sum()
    return values.sum() / valid.sum().clamp(min=1)


def ranked_queries(pos, keep=None):
    """The queries that have a positive and a negative among their kept entries.

    These are the ones a "mean" counts.

    Parameters
    ----------
    pos : torch.Tensor of shape (Q, n), bool
        The positives.
    keep : torch.Tensor of shape (Q, n), bool, or None, default None
        The kept entries; None: all.

    Returns
    -------
    torch.Tensor of shape (Q,), bool
        True for a ranked query.

    Examples
    --------
    >>> ranked_queries(torch.tensor([[True, False], [True, True]]))
    tensor([ True, False])
    """
    if keep is None:  # amax and amin of the bytes: 0.07 ms each on 64 x 10^5 (one thread),
        # where a count took 2 ms, aminmax 4 ms, any() and all() 22 ms
        if pos.shape[-1] == 0:
            return torch.zeros(pos.shape[:-1], dtype=torch.bool, device=pos.device)
        as_bytes = pos.view(torch.uint8)
        return (as_bytes.amax(dim=-1) > 0) & (as_bytes.amin(dim=-1) == 0)
    return (pos & keep).any(dim=-1) & (~pos & keep).any(dim=-1)


class RankHingeLoss(torch.nn.Module):
    """`rank_hinge_loss` as a module: ``RankHingeLoss("ap")(scores, labels)``.

    Parameters
    ----------
    loss : str or QSLoss, default "ap"
        As `rank_hinge_loss` takes it.
    method : str, default "auto"
        As `rank_hinge_loss` takes it.
    reduction : str, default "mean"
        "mean", "sum" or "none".
    dim : int, default 0
        The dimension along which items are ranked (0: the columns of (batch, classes)
        logits).

    Examples
    --------
    >>> import torch
    >>> from qs.torch import RankHingeLoss
    >>> logits = torch.tensor([[2.0, 0.1], [0.3, 1.5], [1.1, -0.2], [-0.5, 0.4]])
    >>> targets = torch.tensor([[1, 0], [0, 1], [1, 0], [0, 1]])
    >>> RankHingeLoss("ap", reduction="none")(logits, targets).shape  # one per class
    torch.Size([2])
    >>> RankHingeLoss("ap", reduction="none", dim=-1)(logits, targets).shape  # one per row
    torch.Size([4])
    """

    def __init__(self, loss="ap", method="auto", reduction="mean", *, dim=0):
        super().__init__()
        self.loss, self.method, self.reduction, self.dim = loss, method, reduction, dim

    def forward(self, scores, labels, mask=None):
        """The loss, as `rank_hinge_loss` computes it with the module's options.

        Parameters
        ----------
        scores : torch.Tensor
            The scores.
        labels : torch.Tensor or array-like
            Binary labels of the scores' shape.
        mask : torch.Tensor or array-like or None, default None
            Bool, of the scores' shape: True where an entry takes no part.

        Returns
        -------
        torch.Tensor
            The reduced loss.

        Examples
        --------
        >>> scores = torch.tensor([[0.5, 0.1, 0.9], [0.2, 0.3, 0.1]])
        >>> labels = [[1, 0, 0], [0, 1, 0]]
        >>> RankHingeLoss("ap", reduction="none", dim=-1)(scores, labels)
        tensor([0.9000, 0.4000])
        """
        return rank_hinge_loss(
            scores, labels, self.loss, self.method, self.reduction, dim=self.dim, mask=mask
        )

    def extra_repr(self):
        """The module's options, as its ``repr`` shows them.

        Returns
        -------
        str
            The options.

        Examples
        --------
        >>> RankHingeLoss("ndcg")
        RankHingeLoss(loss='ndcg', method='auto', reduction='mean', dim=0)
        """
        return (
            f"loss={self.loss!r}, method={self.method!r}, reduction={self.reduction!r}, "
            f"dim={self.dim!r}"
        )


class _RowLoss(torch.autograd.Function):
    """A loss per row of (Q, n) scores from ``solve(scores, pos) -> (value (Q,), gradient
    (Q, n), valid (Q,))`` on the kept entries (`solve_kept`); the gradient is saved
    from the forward pass, ``valid`` (the rows that have a positive and a negative) is
    returned beside the values. The hinge and direct loss minimization (`qs.torch.dlm`)
    differ only in ``solve``."""

    @staticmethod
    def forward(ctx, scores, pos, keep, solve):
        value, grad, valid = solve_kept(scores.detach(), pos, keep, solve)
        ctx.save_for_backward(grad)
        ctx.mark_non_differentiable(valid)
        return value.to(scores.dtype), valid

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_out, _):
        (grad,) = ctx.saved_tensors
        return grad_out[:, None] * grad, None, None, None


def solve_kept(scores, pos, keep, solve):
    """A solver's result on the kept entries of each row, the gradient zero elsewhere.

    Rows keeping the same number of entries are gathered into one rectangle and solved in
    one call: queries ranked against all but themselves are one call.

    Parameters
    ----------
    scores : torch.Tensor of shape (Q, n)
        The scores.
    pos : torch.Tensor of shape (Q, n), bool
        The positives.
    keep : torch.Tensor of shape (Q, n), bool, or None
        The kept entries; None: all.
    solve : callable
        ``solve(scores, pos) -> (value (Q,), gradient (Q, n), valid (Q,))``.

    Returns
    -------
    tuple of torch.Tensor
        ``(value (Q,), gradient (Q, n), valid (Q,))``.

    Examples
    --------
    >>> scores = torch.tensor([[0.5, 0.1, 0.9], [0.2, 0.3, 0.1]])
    >>> pos = torch.tensor([[True, False, False], [False, True, False]])
    >>> keep = torch.tensor([[True, True, False], [True, True, True]])
    >>> value, gradient, valid = solve_kept(scores, pos, keep, hinge_solve("ap", "auto"))
    >>> value, gradient[0]
    (tensor([0.0000, 0.4000], dtype=torch.float64), tensor([0., 0., 0.]))
    """
    if keep is None or bool(keep.all()):
        return solve(scores, pos)
    hinge = torch.zeros(scores.shape[0], dtype=torch.float64, device=scores.device)
    grad = torch.zeros_like(scores)
    valid = torch.zeros(scores.shape[0], dtype=torch.bool, device=scores.device)
    counts = keep.sum(dim=1)
    for count in torch.unique(counts).tolist():
        if count == 0:
            continue
        rows = torch.nonzero(counts == count).flatten()
        cols = torch.nonzero(keep[rows])[:, 1].view(-1, count)  # row-major: row by row
        h, g, v = solve(scores[rows].gather(1, cols), pos[rows].gather(1, cols))
        hinge[rows], valid[rows] = h, v
        grad[rows] = torch.zeros_like(grad[rows]).scatter(1, cols, g)
    return hinge, grad, valid


def _torch_method(is_cuda, numel, method):
    """Whether the torch method solves a batch of `numel` scores: asked for, or "auto" on a
    CUDA batch of at least CUDA_TORCH_FROM scores (CUDA_TORCH_OPS_FROM without the CUDA
    kernels)."""
    if method == "torch":
        return True
    if method != "auto" or not is_cuda:
        return False
    return numel >= (CUDA_TORCH_FROM if cuda_kernels() else CUDA_TORCH_OPS_FROM)


def _solve(scores, pos, loss, method, lead=None):
    """(hinge (Q,), gradient (Q, n), valid (Q,)) on the scores' device, the gradient in the
    scores' dtype; ``lead``: None, or (scores (Q, k), positives (Q, k)) that come first in
    each row (`qs.inference.batch.lai_batch`), the gradient then (Q, k + n)."""
    numel = scores.numel() + (0 if lead is None else lead[0].numel())
    if isinstance(loss, str) and _torch_method(scores.is_cuda, numel, method):
        if lead is not None:
            scores, pos = torch.cat([lead[0], scores], 1), torch.cat([lead[1], pos], 1)
        hinge, grad, _ = lai_torch(scores.to(torch.float64), pos, loss)
        return hinge, grad.to(scores.dtype), ranked_queries(pos)
    # float32 and float64 are read in place; float16 and bfloat16 widen to float32 exactly
    dtype = scores.dtype if scores.dtype in READ_AS_IS else torch.float32
    if lead is not None:
        lead = lead[0].to("cpu", dtype).numpy(), lead[1].cpu().numpy()
    res = lai_batch(
        scores.to("cpu", dtype).numpy(),
        pos.cpu().numpy(),
        loss,
        method,
        gradient=True,
        ranks=False,
        lead=lead,
        coef_dtype=np.float64 if dtype == torch.float64 else np.float32,
    )
    return (
        torch.from_numpy(res.hinge).to(scores.device),
        torch.from_numpy(res.coef).to(scores.device, scores.dtype),
        torch.from_numpy(res.valid).to(scores.device),
    )
