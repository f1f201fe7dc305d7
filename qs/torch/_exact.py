"""Exact loss-augmented inference written in torch operations (method "torch"): the GPU path.

On CUDA tensors of AP and NDCG, where numba can compile for the GPU, `lai_torch` hands
the work to the few kernels of `qs.torch._cuda` instead; what follows is the path of the
other cases (CPU tensors, the 0-1 loss, no numba CUDA target).

Per query the negatives are sorted by descending score (stable: tied negatives keep input
order, so the earlier one takes the smaller place ``j``). Their optimal ranks are
non-decreasing along that order (DESIGN.md), so Algorithm 1's divide and conquer applies;
here it runs level by level, all queries and all blocks of a level at once: at level ``l`` the
places ``j = h, 3h, 5h, ...`` (``h = 2^(L-1-l)``) take the largest maximiser of their objective
over the ranks between those of their neighbours ``j - h`` and ``j + h``, found at earlier
levels. A level evaluates about ``P + 2^l`` ranks per query, so the whole costs
``O(N + P log N)`` evaluations in ``log2 N`` rounds of vector operations, with no loop over
negatives.

The objective of a rank is summed from the block's lowest rank by a segmented scan of the
same increments ``spos[i] - c2 (s - ref) + inc(j, i)`` that the numba kernels add (scores
measured from the kernels' reference score), in double-double arithmetic (a float64 pair
whose sum carries twice the digits), so that one huge increment (a positive scoring 10^17)
does not swallow the small ones after it: the ranks are the kernels' wherever the optimum
is not a tie to rounding. The coefficients then follow from the ranks as in the kernels, and
the hinge as one compensated sum over the pairs out of order (`qs.inference._hinge`).
"""

import functools
import math
import warnings

import torch


def lai_torch(scores, is_pos, loss):
    """The structured hinge, its gradient and the ranks of each row, on the scores' device:
    by `qs.torch._cuda`'s kernels (CUDA, AP and NDCG, numba's CUDA target at hand) or
    in torch operations.

    ``scores``: float64 (Q, n); ``is_pos``: bool (Q, n); ``loss``: "ap", "ndcg" or "01".
    Returns (hinge (Q,), gradient (Q, n), rank (Q, n) int64) with the conventions of
    `qs.inference.batch.lai_batch` (``gradient=True``): rows without a positive or a
    negative are zero.
    """
    if scores.is_cuda and loss != "01" and scores.numel() <= KERNEL_SCORES_MAX and cuda_kernels():
        from qs.torch._cuda import lai_cuda

        return lai_cuda(scores, is_pos, loss)
    n = scores.shape[1]
    n_pos = is_pos.sum(dim=1)
    n_neg = n - n_pos
    valid = (n_pos > 0) & (n_neg > 0)
    if loss == "01":
        hinge, grad, rank = _zero_one(scores, is_pos)
    else:
        hinge, grad, rank = _ranking(scores, is_pos, loss, n_pos.clamp(min=1), n_neg.clamp(min=1))
    return (
        torch.where(valid, hinge, 0.0),
        torch.where(valid[:, None], grad, 0.0),
        torch.where(valid[:, None], rank, 0),
    )


#: most scores the CUDA kernels take in one call (their threads are numbered in 32 bits)
KERNEL_SCORES_MAX = (1 << 31) - 1


@functools.cache
def cuda_kernels():
    """Whether numba compiles for and runs on the GPU (then `qs.torch._cuda` serves the
    CUDA tensors of AP and NDCG): a probe kernel is compiled once, so that a numba whose CUDA
    target fails in this environment leaves the torch operations in charge, with a warning."""
    try:
        from numba import cuda

        if not cuda.is_available():
            return False
        cuda.jit("void(int64[:])")(_probe)
    except Exception as err:  # any failure of numba's CUDA target: the torch operations
        warnings.warn(
            f"numba cannot compile for the GPU here ({type(err).__name__}: {err}); "
            "the torch method runs in torch operations",
            RuntimeWarning,
            stacklevel=3,
        )
        return False
    return True


def _probe(x):
    x[0] = 1


def _zero_one(scores, is_pos):
    """The binary hinge as `qs.inference.zero_one` computes it: the most violated
    labelling flips the samples inside the margin, and the hinge is the mean of ``1 - y s``
    over them (a sample outside the margin takes no part, however large its score)."""
    n = scores.shape[1]
    y = torch.where(is_pos, 1.0, -1.0).to(scores.dtype)
    flip = 1.0 - y * scores > 0.0
    h = 0.5 / n
    coef = torch.where(flip, -y * h, y * h)
    flipped = torch.where(flip, -y * scores, 0.0)
    hinge = (flip.sum(dim=1).to(scores.dtype) + compensated_sum(flipped)) / n
    return hinge, coef - y * h, torch.zeros_like(scores, dtype=torch.int64)


def two_sum(a, b):
    """Knuth's TwoSum: ``(a + b, its rounding error)``, elementwise."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def compensated_sum(x):
    """Row sums of (Q, n) ``x``, pairwise with TwoSum (the rounding errors summed apart and
    added once): about as exact as the float64 result can hold."""
    hi, lo = x, torch.zeros_like(x)
    while hi.shape[1] > 1:
        if hi.shape[1] % 2:
            hi = torch.nn.functional.pad(hi, (0, 1))
            lo = torch.nn.functional.pad(lo, (0, 1))
        s, e = two_sum(hi[:, 0::2], hi[:, 1::2])
        hi, lo = s, lo[:, 0::2] + lo[:, 1::2] + e
    return (hi + lo).sum(dim=1)


def reference(scores):
    """Per row, the score the kernels measure all others from
    (`qs.inference._input.reference`): the median (the upper one of an even count) of
    a sample of the row at stride ``max(1, n // 31)``."""
    step = max(1, scores.shape[1] // 31)
    sample = torch.sort(scores[:, ::step], dim=1).values
    return sample[:, sample.shape[1] // 2]


def _ranking(scores, is_pos, loss, n_pos, n_neg):
    n = scores.shape[1]
    dev, f64 = scores.device, scores.dtype
    minus_inf = torch.tensor(-math.inf, dtype=f64, device=dev)
    # positives, then negatives, by descending score (ties in input order); the other class
    # sorts last as -inf
    pos_sorted, pos_index = torch.sort(
        torch.where(is_pos, scores, minus_inf), dim=1, descending=True, stable=True
    )
    neg_sorted, neg_index = torch.sort(
        torch.where(is_pos, minus_inf, scores), dim=1, descending=True, stable=True
    )
    c2 = 2.0 / (n_pos * n_neg).to(f64)
    ref = reference(scores)
    # spos[:, i-1] = c2 (s+_i - ref) (-inf past the positives)
    spos = c2[:, None] * (pos_sorted - ref[:, None])
    p_f = n_pos.to(f64)
    if loss == "ndcg":
        discount = 1.0 / torch.log2(1.0 + torch.arange(1, n + 2, dtype=f64, device=dev))
        ideal = torch.cumsum(discount, 0)[n_pos - 1]  # C(P) = sum_{k<=P} D(k)
    levels = max(1, math.ceil(math.log2(int(n_neg.max()) + 1)))
    width = 1 << levels
    # rank[:, j] of the negative at place j (1..N); place 0 and places past N are the bounds
    rank = (n_pos + 1)[:, None].repeat(1, max(width, n) + 1)
    rank[:, 0] = 1
    for level in range(levels):
        h = 1 << (levels - 1 - level)
        places = torch.arange(h, width, 2 * h, device=dev)
        qq, kk = torch.nonzero(places[None, :] <= n_neg[:, None], as_tuple=True)
        j = places[kk]
        lo, hi = rank[qq, j - h], rank[qq, j + h]
        size = hi - lo + 1  # ranks lo..hi to try
        block = torch.repeat_interleave(torch.arange(j.numel(), device=dev), size)
        offset = torch.arange(block.numel(), device=dev) - (torch.cumsum(size, 0) - size)[block]
        i = lo[block] + offset  # a rank tried; its increment comes from rank i - 1
        bq, bj = qq[block], j[block].to(f64)
        t = (i - 1).clamp(min=1)
        s = neg_sorted[bq, j[block] - 1] - ref[bq]
        if loss == "ap":
            inc = -t.to(f64) / ((bj + t - 1.0) * (bj + t) * p_f[bq])
        else:
            u = t + j[block]  # (D(t+j) - D(t+j-1)) / C
            inc = (discount[u - 1] - discount[u - 2]) / ideal[bq]
        step = spos[bq, t - 1] - c2[bq] * s + inc
        gain, low = _segmented_cumsum(torch.where(offset > 0, step, 0.0), offset, int(size.max()))
        # the largest rank of the largest gain, compared as (high part, low part)
        best = torch.full_like(lo, -math.inf, dtype=f64).scatter_reduce(0, block, gain, "amax")
        at_best = gain == best[block]
        best_low = torch.full_like(lo, -math.inf, dtype=f64).scatter_reduce(
            0, block, torch.where(at_best, low, -math.inf), "amax"
        )
        top = torch.where(at_best & (low >= best_low[block]), i, 0)
        rank[qq, j] = torch.zeros_like(lo).scatter_reduce(0, block, top, "amax")
    return _finish(
        scores,
        is_pos,
        loss,
        n_pos,
        n_neg,
        rank[:, 1 : n + 1],
        pos_sorted,
        pos_index,
        neg_index,
        ideal if loss == "ndcg" else None,
        discount if loss == "ndcg" else None,
        ref,
    )


def _segmented_cumsum(x, offset, longest):
    """Inclusive prefix sums of ``x`` within each segment (``offset``: place in the segment),
    by doubling steps (Hillis-Steele), in double-double: (high, low) parts, ``high`` the
    sum rounded to float64 and ``low`` what it left out. Sums stay within their segment, so
    no rounding from other segments' totals enters them."""
    hi, lo = x, torch.zeros_like(x)
    d = 1
    while d < longest:
        take = offset >= d
        shifted_hi, shifted_lo = torch.zeros_like(hi), torch.zeros_like(lo)
        shifted_hi[d:], shifted_lo[d:] = hi[:-d], lo[:-d]
        s, e = two_sum(hi, torch.where(take, shifted_hi, 0.0))
        hi, lo = two_sum(s, e + lo + torch.where(take, shifted_lo, 0.0))
        d *= 2
    return hi, lo


def _finish(
    scores,
    is_pos,
    loss,
    n_pos,
    n_neg,
    neg_rank,
    pos_sorted,
    pos_index,
    neg_index,
    ideal,
    discount,
    ref,
):
    """Coefficients, loss and hinge from the ranks of the sorted negatives (as
    `qs.inference._output.finish` and `negative_coefficients`)."""
    q, n = scores.shape
    f64 = scores.dtype
    place = torch.arange(1, n + 1, device=scores.device)
    is_neg_place = place[None, :] <= n_neg[:, None]
    r = torch.where(is_neg_place, neg_rank, 0)
    rank = torch.zeros_like(r).scatter(1, neg_index, r)
    inv = 1.0 / (n_pos * n_neg).to(f64)
    count = torch.zeros((q, n + 2), dtype=torch.int64, device=scores.device)
    count.scatter_add_(1, r, is_neg_place.to(torch.int64))
    n_above = torch.cumsum(count, 1)[:, 1 : n + 1].to(f64)  # negatives above the k-th positive
    is_pos_place = place[None, :] <= n_pos[:, None]
    c_pos = torch.where(is_pos_place, (n_neg[:, None] - 2.0 * n_above) * inv[:, None], 0.0)
    c_neg = (n_pos[:, None] + 2 - 2 * rank) * inv[:, None]
    coef = torch.where(is_pos, torch.zeros_like(scores).scatter(1, pos_index, c_pos), c_neg)
    k = place.to(f64)[None, :]
    if loss == "ap":
        value = torch.where(is_pos_place, n_above / (k + n_above), 0.0).sum(1) / n_pos
    else:
        gained = discount[(place[None, :] + n_above.to(torch.int64) - 1).clamp(max=n)]
        value = 1.0 - torch.where(is_pos_place, gained, 0.0).sum(1) / ideal
    truth_coef = torch.where(is_pos, 1.0 / n_pos[:, None].to(f64), -1.0 / n_neg[:, None].to(f64))
    # the hinge's score term (qs.inference._hinge): weight P + 1 - rank at a negative, minus
    # the negatives above at a positive, each over P N; zero for a sample in its place
    w_pos = torch.zeros_like(scores).scatter(1, pos_index, torch.where(is_pos_place, -n_above, 0.0))
    weight = torch.where(is_pos, w_pos, (n_pos[:, None] + 1 - rank).to(f64)) * inv[:, None]
    term = compensated_sum(weight * (scores - ref[:, None]))
    return value + 2.0 * term, coef - truth_coef, rank
