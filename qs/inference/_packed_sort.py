"""The negatives sorted by numpy: each score's bits and its place packed into one unsigned
64-bit key, so that ``np.sort`` of the keys (a vectorised sort of plain integers, which numba
cannot call) orders the negatives with their places, where ``np.argsort`` of the scores
takes several times as long from about 10^5 scores.

A key is the score's bits mapped to an unsigned integer that falls as the score rises (the
sort ascends; -0.0 taken as 0.0), its lowest `place_bits` bits replaced by the place, so
keys sort by descending score, ties in input order, except among scores that agree in all
but those low bits: `unpack_sorted` sorts such runs by the exact scores.
"""

import numpy as np

from qs._numba import jit
from qs.inference._sorting import insertion_sort_pairs, sort_pairs

_SIGN = np.uint64(1 << 63)
_ALL = np.uint64((1 << 64) - 1)
#: runs of keys with equal high bits longer than this are merge-sorted (else by insertion)
SHORT_RUN = 32


def place_bits(n):
    """Bits that hold a place among ``n`` negatives."""
    return max(1, int(n - 1).bit_length())


@jit
def pack_descending(bits, n_bits, keys):
    """The keys of the scores whose float64 bits are ``bits`` into ``keys`` (uint64)."""
    low = np.uint64((1 << n_bits) - 1)
    for q in range(bits.size):
        b = bits[q]
        if b == _SIGN:
            b = np.uint64(0)
        rising = b ^ _ALL if b & _SIGN else b | _SIGN
        keys[q] = ((rising ^ _ALL) & ~low) | np.uint64(q)


@jit
def unpack_sorted(keys, n_bits, v, key, v_sorted, key_sorted):
    """The negatives ``v`` (keys ``key``) in the order of the sorted ``keys``, into
    ``v_sorted``, ``key_sorted``; runs whose keys agree above the place bits sorted by
    descending score, ties by ascending key (input order)."""
    low = np.uint64((1 << n_bits) - 1)
    n = keys.size
    start = 0
    unsorted = False
    for t in range(n):
        q = keys[t] & low
        v_sorted[t] = v[q]
        key_sorted[t] = key[q]
        if t > 0 and (keys[t] & ~low) == (keys[t - 1] & ~low):
            unsorted |= v_sorted[t] > v_sorted[t - 1]
        else:
            if unsorted:
                _sort_run(v_sorted, key_sorted, start, t)
            start = t
            unsorted = False
    if unsorted:
        _sort_run(v_sorted, key_sorted, start, n)


@jit
def _sort_run(v, key, lo, hi):
    """Sort ``v[lo:hi]`` descending, ties by ascending ``key``."""
    if hi - lo <= SHORT_RUN:
        insertion_sort_pairs(v, key, lo, hi - 1)
    else:
        m = hi - lo
        sort_pairs(v[lo:hi], key[lo:hi], np.empty(m), np.empty(m, dtype=np.int64))


def packed_sort(values):
    """The packed keys of the float64 ``values``, sorted by ``np.sort``, and the number of place
    bits in them."""
    keys = np.empty(values.size, dtype=np.uint64)
    n_bits = place_bits(values.size)
    pack_descending(values.view(np.uint64), n_bits, keys)
    keys.sort()
    return keys, n_bits
