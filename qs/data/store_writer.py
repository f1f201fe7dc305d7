"""Writing a box-feature store (`qs.data.store` describes the layout): `StoreWriter` puts
one block of images at a time into ``<STORE>.partial/`` with its checksums, resumes an
interrupted conversion from the blocks already written and intact, and renames the directory
into place once every block is there.
"""

import glob
import json
import os
import re
import shutil
from pathlib import Path

import numpy as np

from qs.data.files import read_json
from qs.data.lock import OutputLock
from qs.data.store import (
    COMPRESSOR,
    DTYPES,
    FORMAT,
    FORMAT_VERSION,
    GT_ARRAYS,
    IMAGE_ARRAYS,
    file_sha256,
    partial_path,
)
from qs.data.voc2007 import CLASSES

__all__ = ["StoreWriter"]

_ZARR_TEMPORARY = re.compile(r".*\.[0-9a-f]{32}\.partial")  # zarr's file being written


class StoreWriter:
    """Writes one store block by block into ``<path>.partial/`` and renames it when done.

    The writer holds the store's lock (`qs.data.lock.OutputLock`) from its creation until
    `finish` or `close`. An unfinished conversion in ``<path>.partial/`` made under other
    settings is refused (one whose ``k_max`` is larger is reused as it is); one made under
    the same settings is resumed.

    Parameters
    ----------
    path : str or pathlib.Path
        The store's directory; it must not exist.
    image_ids : array-like of str
        Every image, in order.
    k_max : int
        The most boxes of an image.
    d : int
        Features per box.
    dtype : str
        The features' type: "float16", "float32" or "float64".
    chunk_images : int
        Images per block (and per chunk of every array).
    split : str or None
        The split's name.
    has_gt : bool
        Whether the store holds ground-truth objects.
    block_keys : sequence of str
        Per block, a text that identifies its inputs; a block already written is skipped
        when its key and checksums still match.
    attrs : dict or None, default None
        More attributes of the store.

    Raises
    ------
    ValueError
        On a bad setting, an existing store at ``path``, or an unfinished conversion made
        under other settings.
    OutputBusy
        When another writer holds the store's lock.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> from qs.data.store import open_store
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     writer = StoreWriter(pathlib.Path(tmp) / "test.zarr", ["a", "b", "c"], k_max=2,
    ...                          d=3, dtype="float32", chunk_images=2, split="test",
    ...                          has_gt=False, block_keys=["block 0", "block 1"])
    ...     for b in writer.pending():
    ...         n = len(range(*writer.block_range(b)))
    ...         writer.write_block(b, np.ones((n, 2, 3)), [2] * n, np.ones((n, 2, 4)))
    ...     store = open_store(writer.finish("three images of ones"))
    ...     shape = store.features.shape
    >>> shape, store.source
    ((3, 2, 3), 'three images of ones')
    """

    def __init__(
        self,
        path,
        image_ids,
        *,
        k_max,
        d,
        dtype,
        chunk_images,
        split,
        has_gt,
        block_keys,
        attrs=None,
    ):
        import zarr

        self.path = Path(path)
        self.partial = partial_path(self.path)
        if str(dtype) not in DTYPES:
            raise ValueError(f"dtype must be one of {', '.join(DTYPES)}; got {dtype!r}.")
        if chunk_images < 1:
            raise ValueError(f"chunk_images must be >= 1; got {chunk_images}.")
        self.image_ids = np.asarray(image_ids, dtype=str)
        n = self.image_ids.size
        if n == 0:
            raise ValueError("No images to store.")
        self.block_keys = list(block_keys)
        if len(self.block_keys) != -(-n // chunk_images):
            raise ValueError("block_keys must give one key per block of chunk_images images.")
        self.has_gt = bool(has_gt)
        self.attrs = dict(attrs or {})
        settings = {
            "format_version": FORMAT_VERSION,
            "d": int(d),
            "dtype": str(dtype),
            "chunk_images": int(chunk_images),
            "split": split,
            "has_gt": self.has_gt,
            "compressor": COMPRESSOR,
        }
        self.lock = OutputLock(
            self.path.with_name(f".{self.path.name}.lock"), f"the store {self.path}"
        ).acquire()
        self.d, self.dtype, self.chunk_images = int(d), np.dtype(dtype), int(chunk_images)
        self.split = split
        try:
            self._open(zarr, n, int(k_max), settings)
            self.k_max = self.group["features"].shape[1]
            self.done = self._blocks_done()
        except BaseException:
            self.close()
            raise

    def _open(self, zarr, n, k_max, settings):
        """Under the lock: clean what a killed writer left, then begin or resume."""
        _remove_stale_temporaries(self.path, self.partial)
        if self.path.exists():
            _finish_cleanup(self.path)
            raise ValueError(
                f"{self.path} exists; remove it or choose another --out (a "
                "store is never overwritten)."
            )
        if not self.partial.exists():
            self._create(zarr, n, k_max, settings)
        else:
            progress = read_json(self.partial / "progress.json")
            if not isinstance(progress, dict) or not (self.partial / "progress").is_dir():
                raise ValueError(
                    f"{self.partial} exists but holds no unfinished conversion "
                    "qsrank can resume (no progress records); it is left as it "
                    "is: remove it or choose another --out."
                )
            kept = {k: v for k, v in progress.items() if k != "k_max"}
            if kept != settings or progress.get("k_max", -1) < k_max:
                raise ValueError(
                    f"{self.partial} holds an unfinished conversion made with other settings "
                    f"({_diff(progress, {**settings, 'k_max': k_max})}); remove it to start "
                    "over, or rerun with the settings it was begun with."
                )
            self.group = zarr.open_group(self.partial, mode="r+")
            for name in IMAGE_ARRAYS:  # the image list may have changed (a file removed)
                arr = self.group[name]
                if arr.shape[0] != n:
                    arr.resize((n,) + arr.shape[1:])
            self.group["image_ids"][:] = self.image_ids

    def close(self):
        """Release the store's lock; `finish` does, call it when giving up before.

        The blocks written stay in ``<path>.partial/`` for a later writer to resume.

        Examples
        --------
        >>> import pathlib, tempfile
        >>> tmp = tempfile.TemporaryDirectory()
        >>> writer = StoreWriter(pathlib.Path(tmp.name) / "test.zarr", ["a", "b", "c"], k_max=2,
        ...                      d=3, dtype="float32", chunk_images=2, split="test",
        ...                      has_gt=False, block_keys=["block 0", "block 1"])
        >>> writer.write_block(0, np.ones((2, 2, 3)), [2, 1], np.ones((2, 2, 4)))
        >>> writer.close()
        >>> again = StoreWriter(writer.path, ["a", "b", "c"], k_max=2, d=3, dtype="float32",
        ...                     chunk_images=2, split="test", has_gt=False,
        ...                     block_keys=["block 0", "block 1"])
        >>> again.pending()
        [1]
        >>> again.close()
        >>> tmp.cleanup()
        """
        self.lock.release()

    def _create(self, zarr, n, k_max, settings):
        """Make the empty store in a hidden directory, then rename it to ``<path>.partial``:
        a partial directory always holds its progress records."""
        self.partial.parent.mkdir(parents=True, exist_ok=True)
        building = self.partial.with_name(f".{self.partial.name}.{os.getpid()}.tmp")
        group = zarr.open_group(building, mode="w-")
        c, d = settings["chunk_images"], settings["d"]
        opts = {
            "compressors": zarr.codecs.ZstdCodec(level=COMPRESSOR["level"]),
            "config": {"write_empty_chunks": True},
        }
        group.create_array(
            "features", shape=(n, k_max, d), chunks=(c, k_max, d), dtype=settings["dtype"], **opts
        )
        group.create_array("counts", shape=(n,), chunks=(c,), dtype="int32", **opts)
        group.create_array(
            "boxes", shape=(n, k_max, 4), chunks=(c, k_max, 4), dtype="float32", **opts
        )
        group.create_array(
            "labels",
            shape=(n, len(CLASSES)),
            chunks=(c, len(CLASSES)),
            dtype="int8",
            fill_value=-1,
            **opts,
        )
        group.create_array("image_ids", shape=(n,), chunks=(c,), dtype=str, **opts)
        group["image_ids"][:] = self.image_ids
        (building / "progress").mkdir()
        _write_json(building / "progress.json", {**settings, "k_max": k_max})
        os.rename(building, self.partial)
        self.group = zarr.open_group(self.partial, mode="r+")

    @property
    def n_blocks(self):
        return len(self.block_keys)

    def block_range(self, b):
        """The images of one block.

        Parameters
        ----------
        b : int
            The block's index.

        Returns
        -------
        tuple of int
            ``(start, stop)``: the block holds images ``start`` to ``stop - 1``.

        Examples
        --------
        >>> import pathlib, tempfile
        >>> tmp = tempfile.TemporaryDirectory()
        >>> writer = StoreWriter(pathlib.Path(tmp.name) / "test.zarr", ["a", "b", "c"], k_max=2,
        ...                      d=3, dtype="float32", chunk_images=2, split="test",
        ...                      has_gt=False, block_keys=["block 0", "block 1"])
        >>> writer.block_range(0), writer.block_range(1)
        ((0, 2), (2, 3))
        >>> writer.close()
        >>> tmp.cleanup()
        """
        return b * self.chunk_images, min((b + 1) * self.chunk_images, self.image_ids.size)

    def pending(self):
        """The blocks still to write, in order.

        Returns
        -------
        list of int
            Their indices.

        Examples
        --------
        >>> import pathlib, tempfile
        >>> tmp = tempfile.TemporaryDirectory()
        >>> writer = StoreWriter(pathlib.Path(tmp.name) / "test.zarr", ["a", "b", "c"], k_max=2,
        ...                      d=3, dtype="float32", chunk_images=2, split="test",
        ...                      has_gt=False, block_keys=["block 0", "block 1"])
        >>> writer.pending()
        [0, 1]
        >>> writer.write_block(0, np.ones((2, 2, 3)), [2, 1], np.ones((2, 2, 4)))
        >>> writer.pending()
        [1]
        >>> writer.close()
        >>> tmp.cleanup()
        """
        return [b for b in range(self.n_blocks) if b not in self.done]

    def _blocks_done(self):
        """Blocks recorded under the same key, same image ids and intact chunks; the records of
        any other block (stale, or beyond the image list) are removed."""
        done = set()
        for record_path in sorted((self.partial / "progress").glob("*.json")):
            record = read_json(record_path)
            b = int(record_path.stem) if record_path.stem.isdigit() else -1
            ok = (
                isinstance(record, dict)
                and 0 <= b < self.n_blocks
                and record.get("key") == self.block_keys[b]
                and record.get("ids") == self.image_ids[slice(*self.block_range(b))].tolist()
                and all(
                    file_sha256(self._chunk_file(name, b)) == digest
                    for name, digest in record.get("checksums", {}).items()
                )
                and set(record.get("checksums", {})) == set(IMAGE_ARRAYS) - {"image_ids"}
            )
            if ok:
                done.add(b)
            else:
                record_path.unlink()
        return done

    def _chunk_file(self, name, b):
        arr = self.group[name]
        key = arr.metadata.chunk_key_encoding.encode_chunk_key((b,) + (0,) * (arr.ndim - 1))
        return self.partial / name / key

    def write_block(self, b, features, counts, boxes, labels=None, objects=None):
        """Write one block of images, then record its checksums.

        Parameters
        ----------
        b : int
            The block's index.
        features : ndarray of shape (n_b, K_max, d)
            Its images' box features, zeros past each image's count.
        counts : array-like of shape (n_b,), int
            The boxes of each image.
        boxes : ndarray of shape (n_b, K_max, 4)
            The boxes x1 y1 x2 y2, zeros past each image's count.
        labels : ndarray of shape (n_b, 20), int8, or None, default None
            The image labels; None: unknown (-1).
        objects : list of tuple or None, default None
            Per image ``(boxes (m, 4), class (m,), difficult (m,))``, exactly when the store
            has ground truth.

        Raises
        ------
        ValueError
            When ``objects`` is given without ground truth in the store, or missing with it.

        Examples
        --------
        >>> import pathlib, tempfile
        >>> tmp = tempfile.TemporaryDirectory()
        >>> writer = StoreWriter(pathlib.Path(tmp.name) / "test.zarr", ["a", "b", "c"], k_max=2,
        ...                      d=3, dtype="float32", chunk_images=2, split="test",
        ...                      has_gt=False, block_keys=["block 0", "block 1"])
        >>> writer.write_block(1, np.ones((1, 2, 3)), [2], np.ones((1, 2, 4)))
        >>> writer.pending()
        [0]
        >>> writer.close()
        >>> tmp.cleanup()
        """
        start, stop = self.block_range(b)
        if self.has_gt != (objects is not None):
            raise ValueError("objects must be given exactly when the store has ground truth.")
        for name in IMAGE_ARRAYS:  # a chunk is written whole: no bytes left from before
            if name != "image_ids":
                self._chunk_file(name, b).unlink(missing_ok=True)
        self.group["features"][start:stop] = features
        self.group["counts"][start:stop] = counts
        self.group["boxes"][start:stop] = boxes
        if labels is None:
            labels = np.full((stop - start, len(CLASSES)), -1, np.int8)
        self.group["labels"][start:stop] = labels
        record = {
            "key": self.block_keys[b],
            "ids": self.image_ids[start:stop].tolist(),
            "checksums": {
                name: file_sha256(self._chunk_file(name, b))
                for name in IMAGE_ARRAYS
                if name != "image_ids"
            },
        }
        if objects is not None:
            record["objects"] = [
                [
                    np.asarray(o, dtype=float).reshape(-1, 4).tolist(),
                    np.asarray(c).astype(int).tolist(),
                    np.asarray(f).astype(bool).tolist(),
                ]
                for o, c, f in objects
            ]
        _write_json(self.partial / "progress" / f"{b:06d}.json", record)
        self.done.add(b)

    def finish(self, source):
        """Complete the store: write the ground truth, the checksums and the completion mark.

        Then the directory is renamed to the store's path: that rename decides. The progress
        records the store still holds are removed after it, or by the next writer of this
        path if a kill comes first. Releases the lock.

        Parameters
        ----------
        source : str
            Where the data came from, kept as the store's ``source``.

        Returns
        -------
        pathlib.Path
            The store's path.

        Raises
        ------
        ValueError
            When a block is not written yet, or the path appeared during the conversion.

        Examples
        --------
        >>> import pathlib, tempfile
        >>> tmp = tempfile.TemporaryDirectory()
        >>> writer = StoreWriter(pathlib.Path(tmp.name) / "test.zarr", ["a", "b", "c"], k_max=2,
        ...                      d=3, dtype="float32", chunk_images=2, split="test",
        ...                      has_gt=False, block_keys=["block 0", "block 1"])
        >>> for b in writer.pending():
        ...     n = len(range(*writer.block_range(b)))
        ...     writer.write_block(b, np.zeros((n, 2, 3)), [1] * n, np.zeros((n, 2, 4)))
        >>> path = writer.finish("three images of zeros")
        >>> path.name, writer.partial.exists()
        ('test.zarr', False)
        >>> tmp.cleanup()
        """
        import zarr

        if self.pending():
            raise ValueError(f"{len(self.pending())} blocks of {self.partial} are not written yet.")
        records = [
            read_json(self.partial / "progress" / f"{b:06d}.json") for b in range(self.n_blocks)
        ]
        if self.has_gt:
            self._write_ground_truth(zarr, [obj for r in records for obj in r["objects"]])
        checksums = {name: {} for name in IMAGE_ARRAYS + (GT_ARRAYS if self.has_gt else ())}
        for b, record in enumerate(records):
            for name, digest in record["checksums"].items():
                checksums[name][self._key(name, b)] = digest
        for name in ("image_ids",) + (GT_ARRAYS if self.has_gt else ()):
            arr = self.group[name]
            for b in range(arr.nchunks):
                checksums[name][self._key(name, b)] = file_sha256(self._chunk_file(name, b))
        self.group.attrs.update(
            {
                "format": FORMAT,
                "format_version": FORMAT_VERSION,
                "source": source,
                "classes": list(CLASSES),
                "split": self.split,
                "n_images": int(self.image_ids.size),
                "k_max": self.k_max,
                "d": self.d,
                "dtype": self.dtype.name,
                "chunk_images": self.chunk_images,
                "compressor": COMPRESSOR,
                **self.attrs,
                "checksums": checksums,
                "complete": True,
            }
        )
        if self.path.exists():
            raise ValueError(
                f"{self.path} appeared during the conversion; the finished store "
                f"is left in {self.partial}."
            )
        os.rename(self.partial, self.path)
        _finish_cleanup(self.path)
        self.close()
        return self.path

    def _key(self, name, b):
        arr = self.group[name]
        return arr.metadata.chunk_key_encoding.encode_chunk_key((b,) + (0,) * (arr.ndim - 1))

    def _write_ground_truth(self, zarr, objects):
        boxes = np.array([b for o in objects for b in o[0]], dtype=np.float32).reshape(-1, 4)
        cls = np.array([c for o in objects for c in o[1]], dtype=np.int8)
        difficult = np.array([f for o in objects for f in o[2]], dtype=bool)
        offsets = np.concatenate([[0], np.cumsum([len(o[1]) for o in objects])]).astype(np.int64)
        opts = {
            "compressors": zarr.codecs.ZstdCodec(level=COMPRESSOR["level"]),
            "config": {"write_empty_chunks": True},
            "overwrite": True,
        }
        for name, a in zip(GT_ARRAYS, (boxes, cls, difficult, offsets)):
            arr = self.group.create_array(
                name,
                shape=a.shape,
                dtype=a.dtype,
                chunks=(max(1, a.shape[0]),) + a.shape[1:],
                **opts,
            )
            arr[...] = a


def _finish_cleanup(path):
    """Remove the progress records a finished store at ``path`` may still hold."""
    attrs = (read_json(path / "zarr.json") or {}).get("attributes", {})
    if (
        (path / "progress.json").is_file()
        and attrs.get("format") == FORMAT
        and attrs.get("complete") is True
    ):
        shutil.rmtree(path / "progress", ignore_errors=True)
        (path / "progress.json").unlink()


def _remove_stale_temporaries(path, partial):
    """Remove what a killed writer of ``path`` left half-made: its hidden directory of a
    store being created, the temporary files of progress records and of zarr's chunk writes
    (``NAME.<32 hex digits>.partial``). Called under the lock, so no writer is using them."""
    for building in path.parent.glob(f".{glob.escape(partial.name)}.*.tmp"):
        if building.is_dir() and building.name[len(partial.name) + 2 : -4].isdigit():
            shutil.rmtree(building)
    if partial.is_dir():
        for tmp in (partial / "progress").glob("*.json.tmp"):
            tmp.unlink()
        (partial / "progress.json.tmp").unlink(missing_ok=True)
        for tmp in partial.rglob("*.partial"):
            if tmp.is_file() and _ZARR_TEMPORARY.fullmatch(tmp.name):
                tmp.unlink()


def _write_json(path, obj):
    """Write JSON atomically (temp file, then rename)."""
    tmp = Path(f"{path}.tmp")
    tmp.write_text(json.dumps(obj), encoding="utf-8")
    os.replace(tmp, path)


def _diff(have, want):
    return "; ".join(
        f"{k}: {have.get(k)!r} there, {want[k]!r} now" for k in want if have.get(k) != want[k]
    )
