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
inference of ``s / eps``, solved by the kernels of :mod:`qs.inference` in ``O(N log P)`` per
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
from qs.torch import _check, _check_mask, _RowLoss, ranked_queries

__all__ = ["DirectLoss", "UPDATES", "direct_coefficients", "direct_loss"]

UPDATES = ("positive", "negative")
#: the dynamic programme keeps one int32 per (positive, number of negatives above it)
DP_MAX_CELLS = 1 << 28


def direct_loss(scores, labels, loss="ap", *, eps, update="positive", method="auto",
                reduction="mean", mask=None):
    """The task loss ``Delta(R*, R_w)`` per query, whose backward is the direct gradient.

    Parameters
    ----------
    scores, labels, mask, reduction : as :func:`qs.torch.rank_hinge_loss` (a query without
        both classes gives 0, zero gradient, and is left out of the mean).
    loss : "ap" or "ndcg".
    eps : float > 0: the step of the finite difference, on the scale of the scores.
    update : "positive" or "negative" (module docstring).
    method : for the positive update, a method of :data:`qs.inference.METHODS` for ``loss``
        ("auto": the default), or "dp" for the dynamic programme; the negative update always
        runs the programme. CUDA scores are solved on the CPU and the gradient sent back.
    """
    pos, keep = _check_direct(scores, labels, loss, eps, update, method, reduction, mask)
    flat = scores.ndim == 1
    if flat:
        scores, pos, keep = scores[None], pos[None], None if keep is None else keep[None]
    solve = functools.partial(_solve, loss=loss, eps=float(eps), update=update, method=method)
    values = _RowLoss.apply(scores, pos, keep, solve)
    if reduction == "none":
        return values[0] if flat else values
    if reduction == "sum":
        return values.sum()
    return values.sum() / ranked_queries(pos, keep).sum().clamp(min=1)


class DirectLoss(torch.nn.Module):
    """:func:`direct_loss` as a module: ``DirectLoss("ap", eps=0.1)(scores, labels)``."""

    def __init__(self, loss="ap", *, eps, update="positive", method="auto", reduction="mean"):
        super().__init__()
        self.loss, self.eps, self.update = loss, eps, update
        self.method, self.reduction = method, reduction

    def forward(self, scores, labels, mask=None):
        return direct_loss(scores, labels, self.loss, eps=self.eps, update=self.update,
                           method=self.method, reduction=self.reduction, mask=mask)

    def extra_repr(self):
        return (f"loss={self.loss!r}, eps={self.eps!r}, update={self.update!r}, "
                f"method={self.method!r}, reduction={self.reduction!r}")


def _solve(scores, pos, loss, eps, update, method):
    coef_w, coef_d, delta = direct_coefficients(scores.to("cpu", torch.float64).numpy(),
                                                pos.cpu().numpy(), loss, eps, update, method)
    grad = (coef_d - coef_w) / eps if update == "positive" else (coef_w - coef_d) / eps
    return (torch.from_numpy(delta).to(scores.device),
            torch.from_numpy(grad).to(scores.device, scores.dtype))


def direct_coefficients(scores, labels, loss, eps, update, method="auto"):
    """(coef(R_w), coef(R_direct), Delta(R*, R_w)) of each row of ``scores`` (Q, n) float64,
    ``labels`` bool (Q, n); rows without both classes are zeros."""
    scores = np.ascontiguousarray(scores, dtype=np.float64)
    is_pos = np.ascontiguousarray(labels, dtype=np.bool_).view(np.uint8)
    table = LOSSES["ndcg"].discount(np.arange(1, scores.shape[1] + 2))
    ndcg = loss == "ndcg"
    coef_w, delta = np.zeros(scores.shape), np.zeros(len(scores))
    _predicted(ndcg, scores, is_pos, table, coef_w, delta)
    if update == "positive" and method != "dp":
        with np.errstate(over="ignore"):
            scaled = scores / eps
        if not np.isfinite(scaled).all():
            raise ValueError(f"eps={eps!r} is too small for these scores: scores / eps "
                             "overflows float64.")
        return coef_w, lai_batch(scaled, is_pos, loss, method).coef, delta
    n_pos = is_pos.sum(axis=1, dtype=np.int64)
    cells = int((n_pos * (scores.shape[1] - n_pos + 1)).max(initial=0))
    if cells > DP_MAX_CELLS:
        raise ValueError(f"the dynamic programme of the {update} update needs P (N + 1) = "
                         f"{cells} cells for one query, over {DP_MAX_CELLS}; use the positive "
                         "update (exact inference, no table) or fewer samples per query.")
    coef_d = np.zeros(scores.shape)
    _programme(ndcg, 1.0 if update == "positive" else -1.0, eps, scores, is_pos, table, coef_d)
    return coef_w, coef_d, delta


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
def _predicted(ndcg, scores, is_pos, table, coef, delta):
    """Per row: coef(R_w) and Delta(R*, R_w), R_w the scores' order with a positive above a
    negative of equal score."""
    for q in range(scores.shape[0]):
        pos_index, neg_index = _classes(scores[q], is_pos[q])
        p, m = pos_index.size, neg_index.size
        if p == 0 or m == 0:
            continue
        above = np.empty(p, dtype=np.int64)
        j = 0
        for k in range(p):
            while j < m and scores[q, neg_index[j]] > scores[q, pos_index[k]]:
                j += 1
            above[k] = j
        _pattern(above, pos_index, neg_index, coef[q])
        delta[q] = _delta(ndcg, above, table)


@jit
def _programme(ndcg, sign, eps, scores, is_pos, table, coef):
    """Per row: coef of ``argmax F(R) + sign eps Delta(R*, R)``, over the non-decreasing
    counts ``a_k`` of negatives above positive k (both classes in score order: any other
    order of a class lowers F and leaves Delta). The objective splits over the positives:
    ``-c2 sum_{j <= a_k} (s+_k - s-_j) + sign eps delta_k(a_k)``, with ``delta_k(a) =
    a / (P (k + a))`` (AP) or ``-D(k + a) / C(P)`` (NDCG); best[a] holds the best sum over
    positives 1..k with ``a_k <= a``, and arg its smallest maximiser for the backtrack."""
    for q in range(scores.shape[0]):
        s = scores[q]
        pos_index, neg_index = _classes(s, is_pos[q])
        p, m = pos_index.size, neg_index.size
        if p == 0 or m == 0:
            continue
        ref = s[0]
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
        _pattern(above, pos_index, neg_index, coef[q])


def _check_direct(scores, labels, loss, eps, update, method, reduction, mask):
    """Validate the arguments; return (positives, kept entries or None) as bool tensors."""
    if loss not in ("ap", "ndcg"):
        raise ValueError(f"loss must be 'ap' or 'ndcg' for direct loss minimization; got "
                         f"{loss!r}.")
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not 0 < eps < np.inf:
        raise ValueError(f"eps must be a finite number > 0; got {eps!r}.")
    if update not in UPDATES:
        raise ValueError(f"update must be one of {list(UPDATES)}; got {update!r}.")
    if method == "torch":
        raise ValueError("direct loss minimization runs on the CPU kernels; method 'torch' "
                         "is not one of its methods ('auto', a named method, or 'dp').")
    pos = _check(scores, labels, loss, "auto" if method == "dp" else method, reduction)
    return pos, None if mask is None else ~_check_mask(mask, scores)
