"""The working sets of a lockstep training (:mod:`qs.ssvm.lockstep`) in memory: each class's boxes
per image, their features held once for all classes.

A box that several classes' working sets hold (an image's object is among the best boxes of
many classes) keeps one row of features in a :class:`RowPool`, in the features' own type
(float16 features stay float16); each class's :class:`Resident` set names its boxes and
their rows. At VOC2007's size that is what lets 20 classes' working sets fit in memory.
"""

import numpy as np

from qs.ssvm.latent import _Bags

__all__ = ["RowPool", "Resident"]

#: images and boxes in one key (boxes per image stay far below it)
KEY = 1 << 32
#: bytes of float64 a working set upcasts at a time when it scores its boxes
SCORE_BYTES = 64 << 20


class RowPool:
    """The features of every (image, box) some working set holds, one row each, in the order
    they came; rows are added, never removed (working sets only grow)."""

    def __init__(self, d, dtype):
        self.rows = np.empty((16, d), dtype)
        self.size = 0
        self._keys, self._slots = np.empty(0, np.int64), np.empty(0, np.int64)  # sorted keys

    def find(self, image, box):
        """The rows of the boxes ``(image, box)`` (1-D arrays), -1 for those not held."""
        key = np.asarray(image, np.int64) * KEY + np.asarray(box, np.int64)
        if not self._keys.size:
            return np.full(key.shape, -1, np.int64)
        at = np.minimum(np.searchsorted(self._keys, key), self._keys.size - 1)
        return np.where(self._keys[at] == key, self._slots[at], -1)

    def add(self, image, box, rows):
        """The rows of the boxes ``(image, box)`` with features ``rows`` (m, d), added where
        not held yet (a box named twice is added once)."""
        image, box = np.asarray(image, np.int64), np.asarray(box, np.int64)
        slots = self.find(image, box)
        new = np.flatnonzero(slots < 0)
        if new.size:
            keys, first, inverse = np.unique(image[new] * KEY + box[new], return_index=True,
                                             return_inverse=True)
            end = self.size + keys.size
            if end > self.rows.shape[0]:
                grown = np.empty((max(end, self.rows.shape[0] * 3 // 2), self.rows.shape[1]),
                                 self.rows.dtype)
                grown[:self.size] = self.rows[:self.size]
                self.rows = grown
            self.rows[self.size:end] = rows[new[first]]
            slots[new] = self.size + inverse.ravel()
            self._keys = np.concatenate([self._keys, keys])
            self._slots = np.concatenate([self._slots, np.arange(self.size, end)])
            order = np.argsort(self._keys, kind="stable")
            self._keys, self._slots = self._keys[order], self._slots[order]
            self.size = end
        return slots

    def add_named(self, boxes, rows):
        """Rows (n, g) of the boxes ``boxes`` (n, g) of each image (-1: none, then -1) whose
        features are ``rows`` (n, g, d)."""
        named = boxes >= 0
        out = np.full(boxes.shape, -1, np.int64)
        out[named] = self.add(np.nonzero(named)[0], boxes[named], rows[named])
        return out

    def add_pass(self, top):
        """Rows (n, c, k) of a :class:`~qs.top_boxes.ClassTopBoxes` pass's top boxes."""
        taken = top.index >= 0
        image = np.empty(top.rows.shape[0], np.int64)
        box = np.empty(top.rows.shape[0], np.int64)
        image[top.slot[taken]] = np.nonzero(taken)[0]
        box[top.slot[taken]] = top.index[taken]
        mine = self.add(image, box, top.rows)
        return np.where(taken, mine[top.slot], -1)


class Resident(_Bags):
    """A class's working set in memory as the latent problem's bags: ``index`` (n, K) boxes
    (-1: none) and ``slot`` (n, K) their rows in ``pool``. A negative's best box is the
    working set's best, the first box (by index) among equal scores, as a pass chooses.
    ``queries`` records each call's weights and the boxes chosen (-1 for the positives)."""

    def __init__(self, index, slot, pool):
        self.index, self.slot, self.pool = index, slot, pool
        self.shape = (index.shape[0], pool.rows.shape[1])
        self.queries = []

    def scores(self, w):
        """(n, K) the working set's scores under ``w`` (-inf where it holds no box)."""
        (n, k), d = self.index.shape, self.shape[1]
        out = np.empty((n, k))
        step = max(1, SCORE_BYTES // max(1, k * d * 8))
        for a in range(0, n, step):
            rows = self.pool.rows[np.maximum(self.slot[a:a + step], 0)]
            out[a:a + step] = np.matmul(rows.astype(np.float64, copy=False), w)
        return np.where(self.index >= 0, out, -np.inf)

    def chosen(self, w, is_pos, pos_rows, pos_X):
        scores = self.scores(w)
        high = scores.max(axis=1)
        every = np.arange(scores.shape[0])
        at = np.where(scores == high[:, None], self.index, np.iinfo(np.int64).max).argmin(axis=1)
        X = self.pool.rows[self.slot[every, at]].astype(np.float64)
        X[is_pos] = pos_X
        self.queries.append((np.array(w, dtype=np.float64),
                             np.where(is_pos, -1, self.index[every, at])))
        return X

    def holds(self, boxes):
        """(n, t) whether each image's working set holds the boxes ``boxes`` (n, t)."""
        return (boxes[:, :, None] == self.index[:, None, :]).any(axis=2)

    def grown(self, index, slot):
        """The working set with the boxes ``index`` (n, m) in rows ``slot`` (n, m) added (-1
        and those it holds already left out)."""
        new = np.where(self.holds(index) | (index < 0), -1, index)
        for col in range(1, new.shape[1]):  # a box named twice is added once
            new[:, col] = np.where((new[:, :col] == new[:, col:col + 1]).any(axis=1), -1,
                                   new[:, col])
        keep = (new >= 0).any(axis=0)
        return Resident(np.concatenate([self.index, new[:, keep]], axis=1),
                        np.concatenate([self.slot, np.where(new >= 0, slot, -1)[:, keep]],
                                       axis=1), self.pool)


def lacking_boxes(best, lacking, missing, pool):
    """``(index (n, m), slot (n, m))``: per image the boxes ``best`` names where ``lacking``
    and their rows in ``pool``, added from the pass's ``missing`` boxes ``(image, box,
    features)``."""
    image, box, rows = missing
    key = image * KEY + box
    order = np.argsort(key)
    pairs = np.unique(np.stack([np.nonzero(lacking)[0], best[lacking]], axis=1), axis=0)
    found = order[np.searchsorted(key[order], pairs[:, 0] * KEY + pairs[:, 1])]
    counts = np.bincount(pairs[:, 0], minlength=best.shape[0])
    at = np.arange(pairs.shape[0]) - np.repeat(np.cumsum(counts) - counts, counts)
    index = np.full((best.shape[0], counts.max()), -1, np.int64)
    slot = np.full(index.shape, -1, np.int64)
    index[pairs[:, 0], at] = pairs[:, 1]
    slot[pairs[:, 0], at] = pool.add(pairs[:, 0], pairs[:, 1], rows[found])
    return index, slot
