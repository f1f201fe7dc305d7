"""Direct loss minimization (Hazan, Keshet and McAllester, NIPS 2010; Song, Schwing, Zemel
and Urtasun, ICML 2016) for AP and NDCG, on the exact inference.

The loss is the task loss itself, ``Delta(R*, R_w)`` with ``R_w = argmax_R F(R)`` the
ranking the scores make (1 - AP, or 1 - NDCG). It is piecewise constant in the scores;
direct loss minimization replaces its gradient by a finite difference of the joint feature
map between two inferences, for ``eps > 0``:

- positive update: ``(coef(R+) - coef(R_w)) / eps`` with ``R+ = argmax F(R) + eps Delta``;
- negative update: ``(coef(R_w) - coef(R-)) / eps`` with ``R- = argmax F(R) - eps Delta``.

Under Hazan et al.'s assumptions both tend to the gradient of the expected loss as eps
goes to 0 (their Theorem 1), and both descend the loss. ``F`` is linear in the scores, so
``argmax F + eps Delta = argmax F(s / eps) + Delta``: ``R+`` is the loss-augmented
inference of ``s / eps``, solved by the kernels of `qs.inference` in ``O(N log P)`` per
query. ``-Delta`` breaks the property that makes that inference exact (each negative's best
rank, taken alone, need no longer be monotone in its score, which Algorithm 1's divide and
conquer relies on; DESIGN.md), so ``R-`` is found by a dynamic programme over the numbers of
negatives above each positive, ``O(P N)`` time and memory per query (Song et al.'s bound;
the positive update does not pay it). The same programme solves ``R+`` with
``method="dp"``, an independent check of the fast route.

Ties: ``R_w`` ranks a positive above a negative of equal score (the rule of the kernels: a
negative takes the larger rank on a tie), so ``Delta(R*, R_w)`` is the loss of the most
favourable order among tied scores; the programme keeps, among rankings of equal objective,
the one with fewer negatives above each positive. A positive and a negative of equal score
make the negative update ``1/eps``-large (the loss jumps there); the positive update stays
bounded.
"""

import functools

import numpy as np
import torch

from qs._numba import jit
from qs.inference.batch import lai_batch
from qs.losses import LOSSES
from qs.torch.checks import READ_AS_IS, check_mask, check_score_input
from qs.torch.losses import row_loss, rows_of_queries

__all__ = ["UPDATES", "DirectLoss", "direct_coefficients", "direct_loss"]

UPDATES = ("positive", "negative")
#: the dynamic programme keeps one int32 per (positive, number of negatives above it)
DP_MAX_CELLS = 1 << 28


def direct_loss(
    scores,
    labels,
    loss="ap",
    *,
    eps,
    update="positive",
    method="auto",
    reduction="mean",
    dim=0,
    mask=None,
):
    """The task loss ``Delta(R*, R_w)`` per query, whose backward is the direct gradient.

    Parameters
    ----------
    scores, labels, mask, reduction, dim : as `qs.torch.rank_hinge_loss` (a query
        without both classes gives 0, zero gradient, and is left out of the mean; the items
        are ranked along ``dim``, 0 by default: one query per column of (batch, classes)
        scores).
    loss : str, default "ap"
        "ap" or "ndcg".
    eps : float
        The step of the finite difference (> 0), on the scale of the scores.
    update : str
        "positive" or "negative" (see the module's docstring).
    method : for the positive update, a method of `qs.inference.METHODS` for ``loss``
        ("auto": the default), or "dp" for the dynamic programme; the negative update always
        runs the programme. CUDA scores are solved on the CPU and the gradient sent back.

    Returns
    -------
    torch.Tensor
        The task loss, reduced; its gradient with respect to the scores is the direct one.

    Examples
    --------
    >>> scores = torch.tensor([[0.5, 0.1, 0.9]], requires_grad=True)
    >>> loss = direct_loss(scores, [[1, 0, 0]], eps=2.0, update="negative", dim=-1)
    >>> loss.backward()
    >>> loss.detach(), scores.grad
    (tensor(0.5000), tensor([[-0.5000,  0.0000,  0.5000]]))
    """
    pos, keep = _check_direct(scores, labels, loss, eps, update, method, reduction, mask)
    scores, pos, keep = rows_of_queries(dim, scores, pos, keep)
    solve = functools.partial(_solve, loss=loss, eps=float(eps), update=update, method=method)
    return row_loss(scores, pos, keep, solve, reduction)


class DirectLoss(torch.nn.Module):
    """`direct_loss` as a module: ``DirectLoss("ap", eps=0.1)(scores, labels)``.

    Parameters
    ----------
    loss : str, default "ap"
        "ap" or "ndcg".
    eps : float
        The step of the finite difference (> 0), on the scale of the scores.
    update : str, default "positive"
        "positive" or "negative".
    method : str, default "auto"
        As `direct_loss` takes it.
    reduction : str, default "mean"
        "mean", "sum" or "none".
    dim : int, default 0
        The dimension along which items are ranked, as `qs.torch.RankHingeLoss` takes it.

    Examples
    --------
    >>> scores = torch.tensor([[0.5, 0.1, 0.9], [0.2, 0.3, 0.1]])
    >>> DirectLoss("ap", eps=0.1, dim=-1)(scores, [[1, 0, 0], [0, 1, 0]])
    tensor(0.2500)
    """

    def __init__(
        self, loss="ap", *, eps, update="positive", method="auto", reduction="mean", dim=0
    ):
        super().__init__()
        self.loss, self.eps, self.update = loss, eps, update
        self.method, self.reduction, self.dim = method, reduction, dim

    def forward(self, scores, labels, mask=None):
        """The task loss, as `direct_loss` computes it with the module's options.

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
        >>> DirectLoss("ap", eps=0.1, dim=-1, reduction="none")(scores, [[1, 0, 0], [0, 1, 0]])
        tensor([0.5000, 0.0000])
        """
        return direct_loss(
            scores,
            labels,
            self.loss,
            eps=self.eps,
            update=self.update,
            method=self.method,
            reduction=self.reduction,
            dim=self.dim,
            mask=mask,
        )

    def extra_repr(self):
        """The module's options, as its ``repr`` shows them.

        Returns
        -------
        str
            The options.

        Examples
        --------
        >>> DirectLoss("ap", eps=0.1)
        DirectLoss(loss='ap', eps=0.1, update='positive', method='auto', reduction='mean', dim=0)
        """
        return (
            f"loss={self.loss!r}, eps={self.eps!r}, update={self.update!r}, "
            f"method={self.method!r}, reduction={self.reduction!r}, dim={self.dim!r}"
        )


def _solve(scores, pos, loss, eps, update, method):
    """(Delta (Q,), direct gradient (Q, n), valid (Q,)) on the scores' device. float32 and
    float64 CPU scores are read in place (float16 and bfloat16 widen to float32, exactly),
    and the gradient is written in their dtype: each value is the float64 one rounded."""
    x = scores.to("cpu", scores.dtype if scores.dtype in READ_AS_IS else torch.float32)
    grad, delta, valid = direct_gradient(x.numpy(), pos.cpu().numpy(), loss, eps, update, method)
    return (
        torch.from_numpy(delta).to(scores.device),
        torch.from_numpy(grad).to(scores.device, scores.dtype),
        torch.from_numpy(valid).to(scores.device),
    )


def direct_gradient(scores, labels, loss, eps, update, method="auto"):
    """(direct gradient (Q, n) in the scores' dtype, Delta(R*, R_w) (Q,), valid (Q,)) of
    each row of ``scores`` (float32 or float64, read in place), ``labels`` bool (Q, n): the
    update's finite difference of `direct_coefficients`, each row made in float64
    work arrays and written once; rows without both classes are zeros (valid False)."""
    scores, is_pos, table = _prepared(scores, labels)
    ndcg = loss == "ndcg"
    grad = np.empty(scores.shape, dtype=scores.dtype)
    delta, valid = np.empty(len(scores)), np.empty(len(scores), dtype=np.bool_)
    sign = 1.0 if update == "positive" else -1.0
    if update == "positive" and method != "dp":
        coef_d = lai_batch(_scaled(scores, eps), is_pos, loss, method, ranks=False).coef
        _gradient_from(ndcg, eps, scores, is_pos, table, coef_d, grad, delta, valid)
    else:
        _check_cells(scores, is_pos, update)
        _gradient_by_programme(ndcg, sign, eps, scores, is_pos, table, grad, delta, valid)
    return grad, delta, valid


def direct_coefficients(scores, labels, loss, eps, update, method="auto"):
    """The coefficients of the predicted and of the direct ranking, and the task loss.

    Parameters
    ----------
    scores : numpy.ndarray of shape (Q, n)
        The scores, float32 or float64.
    labels : numpy.ndarray of shape (Q, n), bool
        The positives.
    loss : str
        "ap" or "ndcg".
    eps : float
        The step of the finite difference.
    update : str
        "positive" or "negative".
    method : str, default "auto"
        As `direct_loss` takes it.

    Returns
    -------
    tuple of numpy.ndarray
        ``(coef(R_w) (Q, n), coef(R_direct) (Q, n), Delta(R*, R_w) (Q,))`` in float64;
        rows without both classes are zeros.

    Examples
    --------
    >>> coef_w, coef_d, delta = direct_coefficients(
    ...     np.array([[0.5, 0.1, 0.9]]), np.array([[True, False, False]]), "ap", 2.0, "negative")
    >>> coef_w.tolist(), coef_d.tolist(), delta.tolist()
    ([[0.0, -0.5, 0.5]], [[1.0, -0.5, -0.5]], [0.5])
    """
    scores, is_pos, table = _prepared(scores, labels)
    ndcg = loss == "ndcg"
    coef_w, delta = np.zeros(scores.shape), np.zeros(len(scores))
    _predicted(ndcg, scores, is_pos, table, coef_w, delta)
    if update == "positive" and method != "dp":
        return coef_w, lai_batch(_scaled(scores, eps), is_pos, loss, method).coef, delta
    _check_cells(scores, is_pos, update)
    coef_d = np.zeros(scores.shape)
    _programme(ndcg, 1.0 if update == "positive" else -1.0, eps, scores, is_pos, table, coef_d)
    return coef_w, coef_d, delta


def _prepared(scores, labels):
    """(scores as float32 or float64 C-contiguous rows, labels as uint8, NDCG's discount
    D(1..n+1))."""
    scores = np.asarray(scores)
    dtype = scores.dtype if scores.dtype in (np.float32, np.float64) else np.float64
    scores = np.ascontiguousarray(scores, dtype=dtype)
    is_pos = np.ascontiguousarray(labels, dtype=np.bool_).view(np.uint8)
    return scores, is_pos, LOSSES["ndcg"].discount(np.arange(1, scores.shape[1] + 2))


def _scaled(scores, eps):
    """``scores / eps`` in float64 (``R+`` is the loss-augmented inference of it)."""
    with np.errstate(over="ignore"):
        scaled = np.divide(scores, eps, dtype=np.float64)
    if not np.isfinite(scaled).all():
        raise ValueError(
            f"eps={eps!r} is too small for these scores: scores / eps overflows float64."
        )
    return scaled


def _check_cells(scores, is_pos, update):
    """Refuse a dynamic programme whose table would outgrow `DP_MAX_CELLS`."""
    n_pos = is_pos.sum(axis=1, dtype=np.int64)
    cells = int((n_pos * (scores.shape[1] - n_pos + 1)).max(initial=0))
    if cells > DP_MAX_CELLS:
        raise ValueError(
            f"the dynamic programme of the {update} update needs P (N + 1) = "
            f"{cells} cells for one query, over {DP_MAX_CELLS}; use the positive "
            "update (exact inference, no table) or fewer samples per query."
        )


# ---------------------------------------------------------------------------- kernels


@jit
def _classes(scores, is_pos):
    """Indices of the positives and of the negatives, each by descending score (ties in
    input order)."""
    order = np.argsort(-scores, kind="mergesort")
    p = 0
    for k in range(scores.size):
        p += is_pos[k]
    pos_index = np.empty(p, dtype=np.int64)
    neg_index = np.empty(scores.size - p, dtype=np.int64)
    a = 0
    b = 0
    for k in order:
        if is_pos[k]:
            pos_index[a] = k
            a += 1
        else:
            neg_index[b] = k
            b += 1
    return pos_index, neg_index


@jit
def _pattern(above, pos_index, neg_index, coef):
    """``coef`` of the ranking in which ``above[k]`` negatives (non-decreasing in k) lie
    above the k-th positive, both classes in score order: (N - 2 above) / (PN) at the
    positives, (P + 2 - 2 r) / (PN) at a negative of interleaving rank r."""
    p, m = pos_index.size, neg_index.size
    inv = 1.0 / (p * m)
    for k in range(p):
        coef[pos_index[k]] = (m - 2.0 * above[k]) * inv
    k = 0
    for j in range(1, m + 1):
        while k < p and above[k] < j:
            k += 1
        coef[neg_index[j - 1]] = (p + 2.0 - 2.0 * (k + 1)) * inv


@jit
def _delta(ndcg, above, table):
    """1 - AP, or 1 - NDCG, of the ranking with ``above[k]`` negatives above positive k
    (summed as the inference kernels sum them)."""
    p = above.size
    total = 0.0
    ideal = 0.0
    for k in range(p):
        if ndcg:
            total += table[k + above[k]]
            ideal += table[k]
        else:
            total += above[k] / (k + 1.0 + above[k])
    return 1.0 - total / ideal if ndcg else total / p


@jit
def _predicted_row(ndcg, s, is_pos, table, coef):
    """coef(R_w) of one row into ``coef`` and Delta(R*, R_w), R_w the scores' order with a
    positive above a negative of equal score; False (nothing written) without both
    classes."""
    pos_index, neg_index = _classes(s, is_pos)
    p, m = pos_index.size, neg_index.size
    if p == 0 or m == 0:
        return False, 0.0
    above = np.empty(p, dtype=np.int64)
    j = 0
    for k in range(p):
        while j < m and s[neg_index[j]] > s[pos_index[k]]:
            j += 1
        above[k] = j
    _pattern(above, pos_index, neg_index, coef)
    return True, _delta(ndcg, above, table)


@jit
def _predicted(ndcg, scores, is_pos, table, coef, delta):
    """Per row: coef(R_w) and Delta(R*, R_w) (rows without both classes left alone)."""
    for q in range(scores.shape[0]):
        ranked, d = _predicted_row(ndcg, scores[q], is_pos[q], table, coef[q])
        if ranked:
            delta[q] = d


@jit
def _programme_row(ndcg, sign, eps, s, is_pos, table, coef):
    """coef of ``argmax F(R) + sign eps Delta(R*, R)`` for one row into ``coef`` (nothing
    written without both classes), over the non-decreasing counts ``a_k`` of negatives
    above positive k (both classes in score order: any other order of a class lowers F and
    leaves Delta). The objective splits over the positives: ``-c2 sum_{j <= a_k} (s+_k -
    s-_j) + sign eps delta_k(a_k)``, with ``delta_k(a) = a / (P (k + a))`` (AP) or ``-D(k +
    a) / C(P)`` (NDCG); best[a] holds the best sum over positives 1..k with ``a_k <= a``,
    and arg its smallest maximiser for the backtrack. Scores are measured from the first
    one in float64, whatever their dtype."""
    pos_index, neg_index = _classes(s, is_pos)
    p, m = pos_index.size, neg_index.size
    if p == 0 or m == 0:
        return
    ref = np.float64(s[0])
    prefix = np.zeros(m + 1)  # sum of the top a negatives' scores (less ref)
    for j in range(m):
        prefix[j + 1] = prefix[j] + (s[neg_index[j]] - ref)
    ideal = 0.0
    for k in range(p):
        ideal += table[k]
    c2 = 2.0 / (p * m)
    arg = np.empty((p, m + 1), dtype=np.int32)
    best = np.zeros(m + 1)
    for k in range(p):
        sp = s[pos_index[k]] - ref
        top = -np.inf
        at = 0
        for a in range(m + 1):
            if ndcg:
                gain = -table[k + a] / ideal
            else:
                gain = a / (p * (k + 1.0 + a))
            value = -c2 * (a * sp - prefix[a]) + sign * eps * gain + best[a]
            if value > top:
                top = value
                at = a
            best[a] = top
            arg[k, a] = at
    above = np.empty(p, dtype=np.int64)
    a = m
    for k in range(p - 1, -1, -1):
        a = arg[k, a]
        above[k] = a
    _pattern(above, pos_index, neg_index, coef)


@jit
def _programme(ndcg, sign, eps, scores, is_pos, table, coef):
    """Per row: coef of ``argmax F(R) + sign eps Delta(R*, R)`` (`_programme_row`)."""
    for q in range(scores.shape[0]):
        _programme_row(ndcg, sign, eps, scores[q], is_pos[q], table, coef[q])


@jit
def _write_difference(sign, eps, coef_w, coef_d, grad):
    """``grad = (coef_d - coef_w) / eps`` (``sign`` +1) or ``(coef_w - coef_d) / eps``, in
    float64, stored in ``grad``'s dtype."""
    if sign > 0.0:
        for k in range(grad.size):
            grad[k] = (coef_d[k] - coef_w[k]) / eps
    else:
        for k in range(grad.size):
            grad[k] = (coef_w[k] - coef_d[k]) / eps


@jit
def _gradient_from(ndcg, eps, scores, is_pos, table, coef_d, grad, delta, valid):
    """Per row: the positive update's gradient from ``coef_d`` (coef(R+), float64), with
    coef(R_w) made in a work row."""
    coef_w = np.empty(scores.shape[1])
    for q in range(scores.shape[0]):
        valid[q], delta[q] = _predicted_row(ndcg, scores[q], is_pos[q], table, coef_w)
        if valid[q]:
            _write_difference(1.0, eps, coef_w, coef_d[q], grad[q])
        else:
            grad[q, :] = 0.0


@jit
def _gradient_by_programme(ndcg, sign, eps, scores, is_pos, table, grad, delta, valid):
    """Per row: the update's gradient, coef(R_w) and coef(R_direct) (the programme) made in
    work rows."""
    coef_w = np.empty(scores.shape[1])
    coef_d = np.empty(scores.shape[1])
    for q in range(scores.shape[0]):
        valid[q], delta[q] = _predicted_row(ndcg, scores[q], is_pos[q], table, coef_w)
        if valid[q]:
            _programme_row(ndcg, sign, eps, scores[q], is_pos[q], table, coef_d)
            _write_difference(sign, eps, coef_w, coef_d, grad[q])
        else:
            grad[q, :] = 0.0


def _check_direct(scores, labels, loss, eps, update, method, reduction, mask):
    """Validate the arguments; return (positives, kept entries or None) as bool tensors."""
    if loss not in ("ap", "ndcg"):
        raise ValueError(f"loss must be 'ap' or 'ndcg' for direct loss minimization; got {loss!r}.")
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not 0 < eps < np.inf:
        raise ValueError(f"eps must be a finite number > 0; got {eps!r}.")
    if update not in UPDATES:
        raise ValueError(f"update must be one of {list(UPDATES)}; got {update!r}.")
    if method == "torch":
        raise ValueError(
            "direct loss minimization runs on the CPU kernels; method 'torch' "
            "is not one of its methods ('auto', a named method, or 'dp')."
        )
    pos = check_score_input(scores, labels, loss, "auto" if method == "dp" else method, reduction)
    return pos, None if mask is None else ~check_mask(mask, scores)
