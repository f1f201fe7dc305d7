"""The working sets of a lockstep training (`qs.ssvm.lockstep`): each class's boxes per image,
their features held once for all classes, in memory or in a file.

A box that several classes' working sets hold (an image's object is among the best boxes of
many classes) keeps one row of features in a `RowPool`, in the features' own type
(float16 features stay float16); each class's `Resident` set names its boxes and
their rows. The pool grows by blocks of rows (never by copying the rows it holds), and after
a pass keeps only the rows some working set still names, packed. With ``spill`` its rows lie
in a file instead, and a class's solve reads its own rows into memory
(`Resident.loaded`): at VOC2007's size that is what keeps 20 classes' working sets
from filling the memory.
"""

import tempfile
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from qs.ssvm.latent import Bags

__all__ = ["Resident", "RowPool"]

#: images and boxes in one key (boxes per image stay far below it)
KEY = 1 << 32
#: bytes of float64 a working set upcasts at a time when it scores its boxes
SCORE_BYTES = 64 << 20
#: bytes of one block of the pool's rows
BLOCK_BYTES = 64 << 20
#: rows read from the file through one map: the kernel maps the pages around each page read
#: too (up to 64 KB, fault-around), so that one map's pages stay within about 64 MB
READ_ROWS = 1024


class RowPool:
    """The features of every (image, box) some working set holds, one row each in a slot:
    `add_pass` adds a pass's rows, `compact` keeps only the rows the working sets
    name. The rows lie in blocks in memory, or with ``spill`` in a nameless file (in
    ``directory``; None: the system's temporary directory; removed when closed, or when the
    process ends however it ends), read ``READ_ROWS`` rows at a time: memory then holds no
    working set's rows but the copies a reader takes."""

    def __init__(
        self, d: int, dtype: npt.DTypeLike, directory: str | None = None, spill: bool = False
    ) -> None:
        self.d, self.dtype, self.directory = d, np.dtype(dtype), directory
        self.spill = spill
        self.row_bytes = d * self.dtype.itemsize
        self.per_block = max(1, BLOCK_BYTES // self.row_bytes)
        self.blocks: list[Any] = []  # a block is None once compact has copied it
        self.size = 0  # slots in use
        self._file: Any = None  # the spill file, once rows are spilled
        self._keys, self._slots = np.empty(0, np.int64), np.empty(0, np.int64)  # sorted keys

    @property
    def held(self) -> int:
        """How many rows the pool holds."""
        return self._keys.size

    @property
    def nbytes(self) -> int:
        """The bytes of the rows the pool holds."""
        return self.held * self.row_bytes

    def find(self, image: npt.ArrayLike, box: npt.ArrayLike) -> np.ndarray:
        """The rows of the boxes ``(image, box)`` (arrays of one shape), -1 for those not
        held (and for box -1)."""
        image, box = np.asarray(image, np.int64), np.asarray(box, np.int64)
        key = image * KEY + box
        if not self._keys.size:
            return np.full(key.shape, -1, np.int64)
        at = np.minimum(np.searchsorted(self._keys, key), self._keys.size - 1)
        return np.where((self._keys[at] == key) & (box >= 0), self._slots[at], -1)

    def take(self, slots: npt.ArrayLike) -> np.ndarray:
        """The features of the rows ``slots`` (any shape; -1 not allowed), shape ``slots.shape
        + (d,)``, in the pool's type."""
        slots = np.asarray(slots, np.int64)
        out = np.empty((slots.size, self.d), self.dtype)
        self._fill(out, slots.ravel())
        return out.reshape(slots.shape + (self.d,))

    def _fill(self, out, slots):
        """Copy the rows ``slots`` (1-d) into ``out[:slots.size]``."""
        if self.spill:
            for a in range(0, slots.size, READ_ROWS):
                part = slots[a : a + READ_ROWS]
                out[a : a + part.size] = self._read(part)
            return
        block, at = np.divmod(slots, self.per_block)
        for b in np.unique(block):
            mine = block == b
            out[: slots.size][mine] = self.blocks[b][at[mine]]

    def _read(self, slots):
        """The rows ``slots`` of the file, through a map of only the span of it they lie in,
        unmapped on return: the file's pages do not stay in the process's memory."""
        first, last = int(slots.min()), int(slots.max())
        span = np.memmap(
            self._file,
            self.dtype,
            "r",
            offset=first * self.row_bytes,
            shape=(last - first + 1, self.d),
        )
        return np.asarray(span[slots - first])

    def held_boxes(self, n: int) -> np.ndarray:
        """(n, h) the boxes of each of the ``n`` images the pool holds (-1: none), as
        `qs.top_boxes.class_top_boxes` takes them (``held``)."""
        image, box = np.divmod(self._keys, KEY)
        counts = np.bincount(image, minlength=n)
        out = np.full((n, max(1, int(counts.max(initial=0)))), -1, np.int64)
        out[image, np.arange(image.size) - np.repeat(np.cumsum(counts) - counts, counts)] = box
        return out

    def add_pass(self, top: Any) -> None:
        """Add the rows a `qs.top_boxes.ClassTopBoxes` pass returned (boxes the pool
        lacks, each once) in new slots, emptying its list of rows as they are copied, so that
        the pass's rows and the pool's copies of them are not all held at once."""
        image, box = np.asarray(top.image, np.int64), np.asarray(top.box, np.int64)
        if (self.find(image, box) >= 0).any():
            raise ValueError("a pass returned rows the pool holds already.")
        m = image.size
        slots = self.size + np.arange(m)
        if self.spill and m:
            if self._file is None:
                self._file = self._new_file()
            self._file.seek(self.size * self.row_bytes)
        self.size += m
        while not self.spill and len(self.blocks) * self.per_block < self.size:
            self.blocks.append(np.empty((self.per_block, self.d), self.dtype))
        at = 0
        while top.rows:
            rows = top.rows.pop(0).astype(self.dtype, copy=False)
            if self.spill:
                self._file.write(np.ascontiguousarray(rows).data)
            else:
                block, row = np.divmod(slots[at : at + rows.shape[0]], self.per_block)
                for b in np.unique(block):
                    mine = block == b
                    self.blocks[b][row[mine]] = rows[mine]
            at += rows.shape[0]
        if at != m:
            raise ValueError(f"a pass returned {at} rows for {m} boxes.")
        if self.spill and m:
            self._file.flush()
        keys = np.concatenate([self._keys, image * KEY + box])
        order = np.argsort(keys, kind="stable")
        self._keys, self._slots = keys[order], np.concatenate([self._slots, slots])[order]

    def compact(self, used: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Keep only the rows that one of the arrays of slots ``used`` names (-1 ignored),
        packed in slot order, a block at a time: into new blocks (each old block freed once
        its rows are copied, so that memory holds no more than it held, plus a block, and
        afterwards only the blocks the rows fill), or with ``spill`` into a new file (the
        old one then closed). Returns the arrays ``used`` with the rows' new slots."""
        named = np.zeros(self.size + 1, bool)  # the last entry stands for -1
        for slots in used:
            named[slots] = True
        keep = np.flatnonzero(named[:-1])
        new = np.full(self.size + 1, -1, np.int64)
        new[keep] = np.arange(keep.size)
        blocks, file = [], self._new_file() if self.spill and keep.size else None
        try:
            for a in range(0, keep.size, self.per_block):
                block = np.empty((self.per_block, self.d), self.dtype)
                part = keep[a : a + self.per_block]
                self._fill(block, part)
                if file is None:
                    blocks.append(block)
                    later = keep[a + self.per_block : a + self.per_block + 1]
                    for b in range(later[0] // self.per_block if later.size else len(self.blocks)):
                        self.blocks[b] = None  # no later row lies in it
                else:
                    file.write(block[: part.size].data)
            if file is not None:
                file.flush()
        except BaseException:
            if file is not None:
                file.close()
            raise
        self.close()
        self._file, self.blocks, self.size = file, blocks, keep.size
        held = named[self._slots]
        self._keys, self._slots = self._keys[held], new[self._slots[held]]
        return [new[slots] for slots in used]

    def _new_file(self):
        return tempfile.TemporaryFile(prefix="qsrank-rows-", dir=self.directory)

    def close(self) -> None:
        """Remove the file of the rows, if any (they are then void)."""
        if self._file is not None:
            self._file.close()
            self._file = None


class Resident(Bags):
    """A class's working set in memory as the latent problem's bags: ``index`` (n, K) boxes
    (-1: none) and ``slot`` (n, K) their rows in ``pool``. A negative's best box is the
    working set's best, the first box (by index) among equal scores, as a pass chooses.
    ``queries`` records each call's weights and the boxes chosen (-1 for the positives)."""

    def __init__(self, index, slot, pool):
        self.index, self.slot, self.pool = index, slot, pool
        self.shape = (index.shape[0], pool.d)
        self.queries = []

    def scores(self, w):
        """(n, K) the working set's scores under ``w`` (-inf where it holds no box)."""
        (n, k), d = self.index.shape, self.shape[1]
        out = np.empty((n, k))
        step = max(1, SCORE_BYTES // max(1, k * d * 8))
        for a in range(0, n, step):
            rows = self.pool.take(np.maximum(self.slot[a : a + step], 0))
            out[a : a + step] = np.matmul(rows.astype(np.float64, copy=False), w)
        return np.where(self.index >= 0, out, -np.inf)

    def chosen(self, w, is_pos, pos_rows, pos_X):
        scores = self.scores(w)
        high = scores.max(axis=1)
        every = np.arange(scores.shape[0])
        at = np.where(scores == high[:, None], self.index, np.iinfo(np.int64).max).argmin(axis=1)
        X = self.pool.take(self.slot[every, at]).astype(np.float64)
        X[is_pos] = pos_X
        self.queries.append(
            (np.array(w, dtype=np.float64), np.where(is_pos, -1, self.index[every, at]))
        )
        return X

    def loaded(self):
        """The working set with a copy of its rows in memory of its own (one read of the
        pool's file), for the many products of a solve; it records its queries in this
        one's ``queries``. Itself when its pool holds every row in memory."""
        if not self.pool.spill:
            return self
        named, local = np.unique(np.maximum(self.slot, 0), return_inverse=True)
        out = Resident(
            self.index,
            np.where(self.slot >= 0, local.reshape(self.slot.shape), -1),
            _Rows(self.pool.take(named)),
        )
        out.queries = self.queries
        return out

    def holds(self, boxes):
        """(n, t) whether each image's working set holds the boxes ``boxes`` (n, t)."""
        return (boxes[:, :, None] == self.index[:, None, :]).any(axis=2)

    def grown(self, index, slot):
        """The working set with the boxes ``index`` (n, m) in rows ``slot`` (n, m) added (-1
        and those it holds already left out)."""
        new = np.where(self.holds(index) | (index < 0), -1, index)
        for col in range(1, new.shape[1]):  # a box named twice is added once
            new[:, col] = np.where(
                (new[:, :col] == new[:, col : col + 1]).any(axis=1), -1, new[:, col]
            )
        keep = (new >= 0).any(axis=0)
        return Resident(
            np.concatenate([self.index, new[:, keep]], axis=1),
            np.concatenate([self.slot, np.where(new >= 0, slot, -1)[:, keep]], axis=1),
            self.pool,
        )


class _Rows:
    """Rows in memory, taken by their index (the copy `Resident.loaded` makes)."""

    def __init__(self, rows):
        self.rows, self.d = rows, rows.shape[1]

    def take(self, slots):
        return self.rows[slots]


def lacking_boxes(
    best: np.ndarray, lacking: np.ndarray, pool: RowPool
) -> tuple[np.ndarray, np.ndarray]:
    """``(index (n, m), slot (n, m))``: per image the boxes ``best`` names where ``lacking``,
    and their rows in ``pool`` (which holds them: the pass that found them added them)."""
    pairs = np.unique(np.stack([np.nonzero(lacking)[0], best[lacking]], axis=1), axis=0)
    counts = np.bincount(pairs[:, 0], minlength=best.shape[0])
    at = np.arange(pairs.shape[0]) - np.repeat(np.cumsum(counts) - counts, counts)
    index = np.full((best.shape[0], counts.max()), -1, np.int64)
    slot = np.full(index.shape, -1, np.int64)
    index[pairs[:, 0], at] = pairs[:, 1]
    slot[pairs[:, 0], at] = pool.find(pairs[:, 0], pairs[:, 1])
    return index, slot
