"""Exact loss-augmented inference in a few CUDA kernels (numba's CUDA target): what the torch
method runs when the scores live on a GPU and numba can compile for it.

The level-by-level torch operations of `qs.torch._exact` launch hundreds of kernels and
two full per-row sorts; here the work is:

1. **One sort of all queries at once.** A flat stable sort of 64-bit keys (query, label,
   score) puts each query's positives, then its negatives, by descending score, ties in
   input order, in one pass where torch's per-row sort takes two (``qsrank bench
   torch-lai`` measures the whole inference). The query and the label take the key's top
   bits, so the score keeps the rest; scores that differ only in the bits cut off come out
   equal-keyed in input order, and `_repair` sorts each such run by score (a run of
   two, rarely, in random scores).
2. **Algorithm 1's divide and conquer** (`_divide`), one block of threads per query,
   level by level: each place of a level takes the largest maximiser over the ranks between
   those of its neighbours, by the rank evaluation of `qs.inference._ranks.best_rank`
   (the same increments, summed from the best rank so far, and the same score cap). For AP
   it covers the places up to P only: from there on every negative's objective is concave
   (DESIGN.md, Proposition 5), so `_sweep` gives each later negative its rank alone,
   by a binary search for the rank where its increment turns negative (the rank the
   kernels' monotone sweep stops at).
3. **The result** (`_finish`), one thread per score: ranks and coefficients written
   back in input order; a positive's negatives above it found by a binary search over the
   non-decreasing ranks of its query's negatives.

The spos and increment arithmetic is the kernels' with ``ref`` = 0 (the torch operations of
`qs.torch._exact` measure the scores from the kernels' reference score), so the ranks
are theirs wherever the optimum is not a tie to rounding and the scores share no common
offset large beside their spread. Tested on the CPU with
numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``); timed in ``qsrank bench torch-lai d``.
"""

import math

import numpy as np
import torch
from numba import cuda

from qs.losses import LOSSES
from qs.torch._exact import compensated_sum

#: threads per block (the divide and conquer's block per query, and the per-score kernels);
#: the simulator runs a Python thread for each, so it gets fewer
THREADS = 256
SIMULATED_THREADS = 16
#: the loss codes of these kernels
AP, NDCG = 0, 1
_INT64_MIN = -(1 << 63)


@cuda.jit(device=True, inline=True)
def _increment(loss, j, i, n_pos, disc, ideal):
    """``delta_j(i+1) - delta_j(i)``, as `qs.losses` computes it."""
    if loss == AP:
        return -i / ((j + i - 1.0) * (j + i) * n_pos)
    t = i + j - 1
    return (disc[t] - disc[t - 1]) / ideal


@cuda.jit(device=True)
def _best_rank(loss, spos, base_p, n_pos, cs, j, lo, hi, disc, ideal):
    """Largest maximiser over ranks ``lo..hi`` of a negative's objective (``cs = c2 s``),
    as `qs.inference._ranks.best_rank_capped`: the search stops at the first rank whose
    positive does not score above the negative."""
    if hi - lo > 64 and spos[base_p + hi - 2] - cs <= 0.0:
        a, b = lo, hi - 1  # the first rank U in lo..hi-1 with spos[U] - cs <= 0
        while a < b:
            m = (a + b) >> 1
            if spos[base_p + m - 1] - cs > 0.0:
                a = m + 1
            else:
                b = m
        hi = b
    best = lo
    gain = 0.0
    for i in range(lo, hi):
        gain += spos[base_p + i - 1] - cs + _increment(loss, j, i, n_pos, disc, ideal)
        if gain >= 0.0:
            best = i + 1
            gain = 0.0
    return best


@cuda.jit
def _keys(bits_of, is_pos, n, cut, key):
    """Each score's int64 key, ascending in (query, positives first, descending score):
    the query and the label in the top ``cut`` bits, the score's order in the others
    (``bits_of``: the float64 scores' bits)."""
    k = cuda.grid(1)
    if k >= key.size:
        return
    x = bits_of[k]
    if x == _INT64_MIN:
        x = 0  # -0.0 sorts as +0.0, equal as scores are
    ordered = x ^ ((x >> 63) & 0x7FFFFFFFFFFFFFFF)  # signed order = the scores' order
    unsigned = ~ordered ^ _INT64_MIN  # descending, in unsigned order
    kept = (unsigned >> cut) & ((1 << (64 - cut)) - 1)
    head = (2 * np.int64(k // n) + 1 - np.int64(is_pos[k])) << (64 - cut)
    key[k] = (head | kept) ^ _INT64_MIN  # back to signed order, as torch sorts


@cuda.jit
def _repair(key, perm, scores):
    """Sort each run of equal keys (scores that differ only in the bits cut off) by
    descending score, ties by input order, by insertion."""
    k = cuda.grid(1)
    last = key.size - 1
    if k >= last or key[k + 1] != key[k] or (k > 0 and key[k - 1] == key[k]):
        return
    end = k + 1
    while end < last and key[end + 1] == key[k]:
        end += 1
    for a in range(k + 1, end + 1):
        ix = perm[a]
        x = scores[ix]
        b = a
        while b > k and (
            scores[perm[b - 1]] < x or (scores[perm[b - 1]] == x and perm[b - 1] > ix)
        ):
            perm[b] = perm[b - 1]
            b -= 1
        perm[b] = ix


@cuda.jit
def _divide(loss, s, spos, n_pos_of, c2_of, n, disc, ideal_of, rk):
    """Ranks of the places ``1..J`` of query ``blockIdx.x``'s negatives (J = N; for AP
    min(N, P)) into ``rk`` (at the places' sorted positions)."""
    q = cuda.blockIdx.x
    n_pos = n_pos_of[q]
    n_neg = n - n_pos
    if n_pos == 0 or n_neg == 0:
        return
    last = min(n_neg, n_pos) if loss == AP else n_neg
    base = q * n + n_pos - 1  # place j sits at base + j
    base_p = q * n  # the positives' spos
    c2 = c2_of[q]
    ideal = ideal_of[q]
    levels = 0
    while (1 << levels) <= last:
        levels += 1
    for level in range(levels):
        h = 1 << (levels - 1 - level)
        count = (last - h) // (2 * h) + 1 if last >= h else 0
        for t in range(cuda.threadIdx.x, count, cuda.blockDim.x):
            j = h * (2 * t + 1)
            lo = 1 if j == h else rk[base + j - h]
            hi = n_pos + 1 if j + h > last else rk[base + j + h]
            cs = c2 * s[base + j]
            rk[base + j] = _best_rank(loss, spos, base_p, n_pos, cs, j, lo, hi, disc, ideal)
        cuda.syncthreads()


@cuda.jit
def _sweep(s, spos, n_pos_of, c2_of, n, rk):
    """AP's places after P: each negative's rank is the first rank from that of place P on
    whose increment is negative (monotone there), found by binary search."""
    k = cuda.grid(1)
    q = k // n
    if q >= n_pos_of.size:
        return
    n_pos = n_pos_of[q]
    j = k - q * n - n_pos + 1  # the place, when a negative
    if n_pos == 0 or j <= n_pos:
        return
    cs = c2_of[q] * s[k]
    base_p = q * n
    a, b = rk[q * n + 2 * n_pos - 1], n_pos + 1  # the rank of place P bounds it below
    while a < b:
        m = (a + b) >> 1
        if spos[base_p + m - 1] - cs + (-m / ((j + m - 1.0) * (j + m) * n_pos)) >= 0.0:
            a = m + 1
        else:
            b = m
    rk[k] = a


@cuda.jit
def _finish(loss, s, perm, rk, n_pos_of, n, disc, ideal_of, grad, rank, part):
    """Gradient and rank of every score, in input order, and its part of the hinge: its term
    of the score term, ``2 w / (P N) * score`` with the integer weight ``w`` of
    `qs.inference._hinge` (0 for a score in its ground-truth place, however large),
    plus for a positive its term of the loss (its negatives above found by binary search
    over the non-decreasing ranks of the query's negatives)."""
    k = cuda.grid(1)
    q = k // n
    if q >= n_pos_of.size:
        return
    n_pos = n_pos_of[q]
    n_neg = n - n_pos
    out = perm[k]  # the score's place in the flat input
    local = k - q * n
    if n_pos == 0 or n_neg == 0:
        grad[out], rank[out], part[k] = 0.0, 0, 0.0
        return
    inv = 1.0 / (n_pos * n_neg)
    if local < n_pos:  # the positive of rank local + 1: negatives of rank at most that
        first = q * n + n_pos
        a, b = first, first + n_neg
        while a < b:
            m = (a + b) >> 1
            if rk[m] <= local + 1:
                a = m + 1
            else:
                b = m
        above = a - first
        g = (n_neg - 2.0 * above) * inv - 1.0 / n_pos
        w = -above
        rank[out] = 0
        if loss == AP:
            term = above / (local + 1.0 + above) / n_pos
        else:
            term = -disc[local + above] / ideal_of[q]
    else:
        r = rk[k]
        g = (n_pos + 2 - 2 * r) * inv + 1.0 / n_neg
        w = n_pos + 1 - r
        rank[out] = r
        term = 0.0
    grad[out] = g
    part[k] = term + 2.0 * (w * inv) * s[k]


def lai_cuda(scores, is_pos, loss):
    """`qs.torch._exact.lai_torch` by the kernels above: (hinge (Q,), gradient (Q, n),
    rank (Q, n) int64) for float64 ``scores`` (Q, n), bool ``is_pos``; ``loss`` "ap" or
    "ndcg". No step waits for the GPU. On CPU tensors only under numba's CUDA simulator."""
    q, n = scores.shape
    dev = scores.device
    total = q * n
    flat = scores.reshape(-1)
    n_pos = is_pos.sum(1)
    n_neg = n - n_pos
    valid = (n_pos > 0) & (n_neg > 0)
    c2 = 2.0 / (n_pos * n_neg).clamp(min=1).to(torch.float64)
    code = AP if loss == "ap" else NDCG
    if code == NDCG:
        d = LOSSES["ndcg"].discount(np.arange(1, n + 2))
        disc = torch.from_numpy(d).to(dev)
        ideal = torch.from_numpy(np.cumsum(d)).to(dev)[(n_pos - 1).clamp(min=0)]
    else:
        disc = torch.zeros(1, dtype=torch.float64, device=dev)
        ideal = torch.ones(q, dtype=torch.float64, device=dev)
    launch, a, width = _launcher(dev)
    blocks = math.ceil(total / width)
    key = torch.empty(total, dtype=torch.int64, device=dev)
    launch(
        _keys,
        blocks,
        width,
        a(flat.view(torch.int64)),
        a(is_pos.reshape(-1).view(torch.uint8)),
        n,
        (2 * q - 1).bit_length(),
        a(key),
    )
    key, perm = torch.sort(key, stable=True)
    launch(_repair, blocks, width, a(key), a(perm), a(flat))
    s = flat[perm]
    spos = (s.view(q, n) * c2[:, None]).reshape(-1)  # c2 s+ at the positives' places
    rk = torch.zeros(total, dtype=torch.int32, device=dev)
    launch(_divide, q, width, code, a(s), a(spos), a(n_pos), a(c2), n, a(disc), a(ideal), a(rk))
    if code == AP:
        launch(_sweep, blocks, width, a(s), a(spos), a(n_pos), a(c2), n, a(rk))
    grad = torch.empty(total, dtype=torch.float64, device=dev)
    rank = torch.empty(total, dtype=torch.int64, device=dev)
    part = torch.empty(total, dtype=torch.float64, device=dev)
    launch(
        _finish,
        blocks,
        width,
        code,
        a(s),
        a(perm),
        a(rk),
        a(n_pos),
        n,
        a(disc),
        a(ideal),
        a(grad),
        a(rank),
        a(part),
    )
    hinge = compensated_sum(part.view(q, n)) + (0.0 if code == AP else 1.0)
    return torch.where(valid, hinge, 0.0), grad.view(q, n), rank.view(q, n)


def _launcher(device):
    """(launch, as_array, threads per block): kernel launches on torch's current stream,
    arrays shared with torch without a copy (on the CPU, the simulator's arrays are the
    tensors' numpy views)."""
    if device.type == "cuda":
        stream = cuda.external_stream(torch.cuda.current_stream(device).cuda_stream)
        # sync=False: the kernels run on torch's stream, after the work that wrote their
        # inputs; numba's default waits on the host for that stream at every array
        return (
            lambda kernel, grid, block, *args: kernel[grid, block, stream](*args),
            lambda t: cuda.as_cuda_array(t, sync=False),
            THREADS,
        )
    return (
        lambda kernel, grid, block, *args: kernel[grid, block](*args),
        lambda t: t.numpy(),
        SIMULATED_THREADS,
    )
