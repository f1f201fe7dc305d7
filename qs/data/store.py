"""The on-disk box-feature store: one split of bags of boxes as chunked zarr arrays.

Layout (a zarr v3 group; format ``qsrank-boxstore``, `FORMAT_VERSION`):

- ``features`` (n_images, K_max, d) float16 or float32, chunks (chunk_images, K_max, d);
  ``features[i, :counts[i]]`` are image i's boxes, the rows after them zero padding.
- ``counts`` (n_images,) int32: valid boxes per image.
- ``boxes`` (n_images, K_max, 4) float32: x1 y1 x2 y2, 1-based inclusive pixels (zero padding).
- ``image_ids`` (n_images,) variable-length strings.
- ``labels`` (n_images, 20) int8: 1 when the image holds an object of the class, 0 when not,
  -1 unknown (every array above is chunked by the same blocks of images).
- Ground-truth objects, when known: ``gt_boxes`` (m, 4) float32, ``gt_class`` (m,) int8 (index
  into `CLASSES`), ``gt_difficult`` (m,) bool, ``gt_offsets`` (n_images + 1,) int64 (image i's
  objects are rows ``gt_offsets[i]:gt_offsets[i+1]``); one chunk each.

Group attributes: ``format``, ``format_version``, ``complete`` (the completion mark),
``source`` (where the data came from), ``source_kind`` (synthetic, rcnn, latent-list),
``classes``, ``split`` (or null), ``n_images``, ``k_max``, ``d``, ``dtype``, ``chunk_images``,
``compressor`` (zstd level 1 on every array), and ``checksums``: ``{array: {chunk key: sha256
of the chunk's stored bytes}}`` for every chunk of every array. Chunk keys are zarr's default
(``c/<block>/0/0`` for ``features``).

A store is written by `qs.data.store_writer.StoreWriter` into ``<STORE>.partial/``, one block
of images at a time, each block recorded with its checksums under ``progress/`` once its
chunks are on disk; an
interrupted conversion resumes there, skipping the blocks already written and intact. One
writer at a time holds a store's path (the lock file ``.<STORE name>.lock`` beside it). A
``.partial`` directory is made under a hidden name and renamed once it holds its progress
records, so one without them is not qsrank's and is never removed. The last step renames the
directory to ``<STORE>`` (that rename decides: a store is whole or absent) and then removes
the progress records, which the next writer of that path removes if a kill came first.

`open_store` reads every chunk through a zarr store that checks it against ``checksums`` as
it is read (`StoreDamaged` names the store and the chunk); `BoxStore.verify` checks them all.
"""

import asyncio
import functools
import hashlib
import json
import math
import os
import stat
from itertools import pairwise
from pathlib import Path

import numpy as np

from qs.data.files import check_regular

__all__ = ["FORMAT", "FORMAT_VERSION", "BoxStore", "StoreDamaged", "open_store"]

FORMAT = "qsrank-boxstore"
FORMAT_VERSION = 1
COMPRESSOR = {"name": "zstd", "level": 1}
IMAGE_ARRAYS = ("features", "counts", "boxes", "labels", "image_ids")
GT_ARRAYS = ("gt_boxes", "gt_class", "gt_difficult", "gt_offsets")
DTYPES = ("float16", "float32")
PARTIAL = ".partial"


class BoxStore:
    """A finished store, opened lazily: the arrays are zarr arrays, read only when indexed.

    `open_store` opens one and checks it; every chunk read is checked against its checksum.

    Parameters
    ----------
    path : str or pathlib.Path
        The store's directory.
    group : zarr.Group
        Its zarr group.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> from qs.data.convert import write_synthetic_store
    >>> tmp = tempfile.TemporaryDirectory()
    >>> store = open_store(write_synthetic_store(pathlib.Path(tmp.name) / "test.zarr",
    ...            split="test", scale=0.001, boxes_per_image=4, n_features=3))
    >>> store
    BoxStore('.../test.zarr': 20 images x 4 boxes x 3 float32, split 'test')
    >>> store.counts[:3].tolist(), store.labels.shape
    ([4, 4, 4], (20, 20))
    >>> tmp.cleanup()
    """

    def __init__(self, path, group):
        self.path = Path(path)
        self.group = group
        attrs = group.attrs.asdict()
        self.attrs = attrs
        self.features = group["features"]
        self.counts = group["counts"]
        self.boxes = group["boxes"]
        self.image_ids = group["image_ids"]
        self.labels = group["labels"]
        names = set(group.array_keys())
        has_gt = set(GT_ARRAYS) <= names
        self.gt_boxes, self.gt_class, self.gt_difficult, self.gt_offsets = (
            (group[n] for n in GT_ARRAYS) if has_gt else (None,) * 4
        )

    source = property(lambda self: self.attrs["source"])
    split = property(lambda self: self.attrs["split"])
    classes = property(lambda self: tuple(self.attrs["classes"]))
    n_images = property(lambda self: self.features.shape[0])
    k_max = property(lambda self: self.features.shape[1])
    d = property(lambda self: self.features.shape[2])
    dtype = property(lambda self: np.dtype(self.attrs["dtype"]))
    chunk_images = property(lambda self: self.features.chunks[0])

    def __repr__(self):
        return (
            f"BoxStore({str(self.path)!r}: {self.n_images} images x {self.k_max} boxes x "
            f"{self.d} {self.dtype}, split {self.split!r})"
        )

    def dask_features(self):
        """The features as a Dask array with the store's chunks.

        Returns
        -------
        dask.array.Array
            Of shape (n_images, k_max, d), read chunk by chunk when computed.

        Examples
        --------
        >>> import pathlib, tempfile
        >>> from qs.data.convert import write_synthetic_store
        >>> tmp = tempfile.TemporaryDirectory()
        >>> store = open_store(write_synthetic_store(pathlib.Path(tmp.name) / "test.zarr",
        ...                    split="test", scale=0.001, boxes_per_image=4, n_features=3))
        >>> features = store.dask_features()
        >>> features.shape, features.chunks[0]
        ((20, 4, 3), (20,))
        >>> tmp.cleanup()
        """
        import dask.array as da

        return da.from_zarr(self.features)

    def verify(self, progress=False):
        """Recompute the checksum of every chunk of every array.

        Parameters
        ----------
        progress : bool, default False
            Show a progress bar.

        Returns
        -------
        int
            The chunks checked.

        Raises
        ------
        StoreDamaged
            Naming each array and chunk whose stored bytes differ or are missing.

        Examples
        --------
        >>> import pathlib, tempfile
        >>> from qs.data.convert import write_synthetic_store
        >>> tmp = tempfile.TemporaryDirectory()
        >>> store = open_store(write_synthetic_store(pathlib.Path(tmp.name) / "test.zarr",
        ...                    split="test", scale=0.001, boxes_per_image=4, n_features=3))
        >>> store.verify()
        9
        >>> tmp.cleanup()
        """
        return len(self._recomputed(progress))

    def data_checksum(self, progress=False):
        """The SHA-256 of the data itself, verifying the store on the way.

        It is the SHA-256 of the JSON ``{array: {chunk key: sha256}}`` (keys sorted), every
        chunk's SHA-256 recomputed from its bytes.

        Parameters
        ----------
        progress : bool, default False
            Show a progress bar.

        Returns
        -------
        str
            The checksum, 64 hexadecimal digits.

        Raises
        ------
        StoreDamaged
            When a chunk is missing or its bytes differ from its recorded checksum.

        Examples
        --------
        >>> import pathlib, tempfile
        >>> from qs.data.convert import write_synthetic_store
        >>> tmp = tempfile.TemporaryDirectory()
        >>> store = open_store(write_synthetic_store(pathlib.Path(tmp.name) / "test.zarr",
        ...                    split="test", scale=0.001, boxes_per_image=4, n_features=3))
        >>> len(store.data_checksum())
        64
        >>> tmp.cleanup()
        """
        nested = {}
        for where, digest in self._recomputed(progress).items():
            name, _, key = where.partition("/")
            nested.setdefault(name, {})[key] = digest
        return hashlib.sha256(json.dumps(nested, sort_keys=True).encode()).hexdigest()

    def _recomputed(self, progress):
        """``{"array/chunk key": sha256}`` of every recorded chunk, read from the files."""
        from tqdm import tqdm

        expected = {
            f"{name}/{key}": digest
            for name, sums in self.attrs["checksums"].items()
            for key, digest in sums.items()
        }
        limits = {name: _chunk_limit(self.group[name]) for name in self.attrs["checksums"]}
        found, bad = {}, []
        for where in tqdm(
            sorted(expected),
            desc=f"verifying {self.path}",
            unit="chunk",
            leave=False,
            disable=not progress,
        ):
            name, _, key = where.partition("/")
            found[where], why = _chunk_sha256(self.path / where, limits[name])
            if found[where] != expected[where]:
                bad.append(f"{name} chunk {key}" + (f" ({why})" if why else ""))
        if bad:
            shown = ", ".join(bad[:5]) + (f" and {len(bad) - 5} more" if len(bad) > 5 else "")
            raise StoreDamaged(
                f"{self.path}: {len(bad)} of {len(expected)} chunks fail their "
                f"checksum: {shown}; the store is damaged, convert the data "
                "again."
            )
        return found

    def to_detection_data(self, max_bytes=2**30):
        """The whole store in memory as `DetectionData`, for a store that fits.

        Parameters
        ----------
        max_bytes : int, default 2**30
            The most bytes the features may take as float32.

        Returns
        -------
        DetectionData
            The features (float32, padding dropped), boxes, image ids, objects (empty without
            ground truth) and source (`qs.data.voc2007.DetectionData`).

        Raises
        ------
        ValueError
            When the features take more than ``max_bytes``.

        Examples
        --------
        >>> import pathlib, tempfile
        >>> from qs.data.convert import write_synthetic_store
        >>> tmp = tempfile.TemporaryDirectory()
        >>> store = open_store(write_synthetic_store(pathlib.Path(tmp.name) / "test.zarr",
        ...                    split="test", scale=0.001, boxes_per_image=4, n_features=3))
        >>> data = store.to_detection_data()
        >>> data.X.shape, data.offsets[:3].tolist()
        ((80, 3), [0, 4, 8])
        >>> tmp.cleanup()
        """
        from qs.data.voc2007 import DetectionData

        counts = self.counts[:].astype(np.int64)
        size = int(counts.sum()) * self.d * 4
        if size > max_bytes:
            raise ValueError(
                f"{self.path}: the features take {size:,} bytes as float32, "
                f"above max_bytes ({max_bytes:,}); read them by blocks "
                "(dask_features) instead."
            )
        valid = np.arange(self.k_max) < counts[:, None]
        features, boxes = self.features[:], self.boxes[:]
        offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        if self.gt_offsets is None:
            objects = tuple(
                (np.empty((0, 4)), np.empty(0, np.int64), np.empty(0, bool))
                for _ in range(self.n_images)
            )
        else:
            go, gb = self.gt_offsets[:], self.gt_boxes[:].astype(np.float64)
            gc, gd = self.gt_class[:].astype(np.int64), self.gt_difficult[:].astype(bool)
            objects = tuple((gb[a:b], gc[a:b], gd[a:b]) for a, b in pairwise(go))
        return DetectionData(
            features[valid].astype(np.float32),
            offsets,
            boxes[valid].astype(np.float64),
            np.array(self.image_ids[:].tolist(), dtype=str),
            objects,
            self.source,
        )


class StoreDamaged(ValueError):
    """A chunk of a store is missing or its bytes differ from its recorded checksum.

    A ValueError; the message names the store and each damaged chunk.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> from qs.data.convert import write_synthetic_store
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = write_synthetic_store(pathlib.Path(tmp) / "test.zarr", split="test",
    ...                                  scale=0.001, boxes_per_image=4, n_features=3)
    ...     _ = (path / "counts" / "c" / "0").write_bytes(b"damaged")
    ...     try:
    ...         open_store(path).verify()
    ...     except StoreDamaged as err:
    ...         message = str(err)
    >>> message
    '...: 1 of 9 chunks fail their checksum: counts chunk c/0; the store is damaged, ...'
    """


def _verified_store(path, checksums):
    """A read-only zarr store of directory ``path`` that checks every chunk it hands out
    against ``checksums`` (``{array: {chunk key: sha256}}``) while the bytes are in hand: a
    chunk missing or changed is a `StoreDamaged` naming the store and the chunk, never data
    read silently (zarr would fill a missing chunk with zeros)."""
    from zarr.storage import LocalStore

    sums = {
        f"{name}/{key}": digest for name, keys in checksums.items() for key, digest in keys.items()
    }
    return _verified(LocalStore(path, read_only=True), sums, str(path))


def _verified(store, sums, where):
    return _verified_class()(store, sums, where)


@functools.cache
def _verified_class():
    """The zarr store wrapper of `_verified_store` (made on first use: zarr loads lazily)."""
    from zarr.storage import WrapperStore

    class VerifiedStore(WrapperStore):
        def __init__(self, store, sums, where):
            super().__init__(store)
            self.sums, self.where = sums, where

        def _with_store(self, store):
            return type(self)(store, self.sums, self.where)

        def __reduce__(self):  # pickled for dask's worker processes
            return _verified, (self._store, self.sums, self.where)

        async def get(self, key, prototype, byte_range=None):
            expected = self.sums.get(key)
            if expected is None:
                return await self._store.get(key, prototype, byte_range)
            whole = await self._store.get(key, prototype)
            if (
                whole is None
                or await asyncio.to_thread(  # hashed off zarr's event loop
                    _sha256, whole.as_numpy_array()
                )
                != expected
            ):
                name, _, chunk = key.partition("/")
                raise StoreDamaged(
                    f"{self.where}: {name} chunk {chunk} "
                    f"{'is missing' if whole is None else 'fails its checksum'}; the store is "
                    f"damaged (qsrank load verify {self.where} checks every chunk): convert "
                    "the data again."
                )
            return (
                whole if byte_range is None else await self._store.get(key, prototype, byte_range)
            )

        async def _get_many(self, requests):
            for key, prototype, byte_range in requests:
                yield key, await self.get(key, prototype, byte_range)

    return VerifiedStore


def open_store(path: str | Path) -> BoxStore:
    """Open a box-feature store, reading nothing but its metadata.

    Every chunk read from it later is checked against its checksum (`StoreDamaged`).

    Parameters
    ----------
    path : str or pathlib.Path
        The store's directory.

    Returns
    -------
    BoxStore
        The store, its arrays read lazily.

    Raises
    ------
    ValueError
        On a half-written store, a directory that is no store, or a store of another format
        version.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> from qs.data.convert import write_synthetic_store
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = pathlib.Path(tmp) / "trainval.zarr"
    ...     _ = write_synthetic_store(path, scale=0.01, boxes_per_image=4, n_features=8)
    ...     store = open_store(path)
    ...     shape = store.features.shape
    >>> shape, store.split
    ((50, 4, 8), 'trainval')
    """
    import zarr

    path = Path(path)
    if path.name.endswith(PARTIAL):
        raise ValueError(
            f"{path} is an unfinished conversion, not a store; rerun the "
            f"conversion with --out {str(path)[: -len(PARTIAL)]} to finish it."
        )
    if not path.is_dir():
        partial = partial_path(path)
        hint = (
            f"; {partial} holds an unfinished conversion: rerun it to finish"
            if partial.is_dir()
            else ""
        )
        raise ValueError(f"No box store at {path}{hint}.")
    for meta in (path / "zarr.json", *sorted(path.glob("*/zarr.json"))):
        if os.path.lexists(meta):  # zarr would wait on a FIFO there, or read a device
            check_regular(meta, "the store's metadata")
    try:
        group = zarr.open_group(path, mode="r")
        attrs = group.attrs.asdict()
    except Exception as err:  # zarr raises several kinds on a directory that is no store
        raise ValueError(
            f"{path} is not a box store (no readable zarr group: {type(err).__name__})."
        ) from None
    if attrs.get("format") != FORMAT:
        raise ValueError(f"{path} is a zarr group but not a {FORMAT} store (no format attribute).")
    version = attrs.get("format_version")
    if version != FORMAT_VERSION:
        raise ValueError(
            f"{path} is a store of format version {version}; this qsrank reads "
            f"version {FORMAT_VERSION}: convert the data again with this "
            "version's `qsrank load cnn`."
        )
    if attrs.get("complete") is not True:
        raise ValueError(
            f"{path} has no completion mark: it was not written by a finished "
            "conversion; convert the data again."
        )
    missing = [n for n in IMAGE_ARRAYS if n not in set(group.array_keys())]
    if missing:
        raise ValueError(
            f"{path} lacks the arrays {', '.join(missing)}; the store is "
            "damaged, convert the data again."
        )
    sums = attrs.get("checksums")
    if not isinstance(sums, dict) or not all(isinstance(v, dict) for v in sums.values()):
        raise StoreDamaged(
            f"{path} has no readable checksums; the store is damaged, convert the data again."
        )
    check_layout(path, group, attrs)
    return BoxStore(path, zarr.open_group(_verified_store(path, sums), mode="r"))


def partial_path(path):
    path = Path(path)
    return path.with_name(path.name + PARTIAL)


def _sha256(data):
    return hashlib.sha256(data).hexdigest()


def file_sha256(path, limit=None):
    """sha256 of a regular file's bytes, or None when it is missing, not a regular file (a
    FIFO, a device: never waited on nor read without end) or larger than ``limit`` bytes."""
    return _chunk_sha256(path, limit)[0]


def _chunk_sha256(path, limit):
    """``(sha256 or None, why not)`` of the regular file ``path``, reading at most ``limit``
    + 1 bytes (no bound when None)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        return None, "missing"
    except OSError as err:
        return None, err.strerror
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None, "not a regular file"
        h, left = hashlib.sha256(), math.inf if limit is None else limit + 1
        while left > 0:
            block = fh.read(int(min(1 << 22, left)))
            if not block:
                break
            h.update(block)
            left -= len(block)
    if left <= 0:
        return None, f"larger than the {limit:,} bytes a chunk of its shape can take"
    return h.hexdigest(), None


def _chunk_limit(array):
    """The most bytes a stored chunk of the zarr ``array`` can take: its values compressed
    by zstd, which at worst adds a little to its input; None for variable-length strings."""
    if array.dtype.kind not in "biuf":
        return None
    raw = math.prod(array.chunks) * array.dtype.itemsize
    return raw + raw // 128 + 1024


def check_layout(path, group, attrs):
    """Refuse a store whose arrays' metadata disagree with what its attributes record (the
    counts, sizes and dtype the conversion wrote), or whose checksums do not cover exactly
    the chunks of each image array: a store whose metadata was edited to say 10^12 images
    would otherwise pass `BoxStore.verify` (every recorded chunk intact) and be read as
    zeros."""

    def fail(what):
        raise StoreDamaged(f"{path}: {what}; the store is damaged, convert the data again.")

    sizes = {k: attrs.get(k) for k in ("n_images", "k_max", "d", "chunk_images")}
    if (
        not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in sizes.values())
        or sizes["chunk_images"] < 1
        or attrs.get("dtype") not in DTYPES
        or not isinstance(attrs.get("classes"), list)
    ):
        fail(
            "its attributes (n_images, k_max, d, chunk_images, dtype, classes) are not "
            "what a conversion writes"
        )
    n, k, d, ci = (sizes[key] for key in ("n_images", "k_max", "d", "chunk_images"))
    n_classes = len(attrs["classes"])
    layout = {
        "features": ((n, k, d), (ci, k, d), attrs["dtype"]),
        "counts": ((n,), (ci,), "int32"),
        "boxes": ((n, k, 4), (ci, k, 4), "float32"),
        "labels": ((n, n_classes), (ci, n_classes), "int8"),
        "image_ids": ((n,), (ci,), None),
    }
    sums = attrs["checksums"]
    for name, (shape, chunks, dtype) in layout.items():
        array = group[name]
        if (
            tuple(array.shape) != shape
            or tuple(array.chunks) != chunks
            or (dtype is not None and array.dtype != np.dtype(dtype))
        ):
            fail(
                f"{name} has shape {tuple(array.shape)}, chunks {tuple(array.chunks)} and "
                f"dtype {array.dtype}; its attributes record {shape}, {chunks}, "
                f"{dtype or 'strings'}"
            )
        blocks = -(-n // ci)
        keys = sums.get(name, {})
        expected = {
            "c/" + "/".join([str(b)] + ["0"] * (len(shape) - 1))
            for b in range(min(blocks, len(keys) + 1))
        }
        if len(keys) != blocks or set(keys) != expected:
            fail(
                f"the checksums of {name} cover {len(keys)} chunks, not the {blocks} of its "
                f"{n} images"
            )
    names = set(group.array_keys())
    if set(GT_ARRAYS) <= names:
        m = group["gt_boxes"].shape[0]
        gt = {"gt_boxes": (m, 4), "gt_class": (m,), "gt_difficult": (m,), "gt_offsets": (n + 1,)}
        for name, shape in gt.items():
            if tuple(group[name].shape) != shape:
                fail(
                    f"{name} has shape {tuple(group[name].shape)}; expected {shape} "
                    f"({m} objects over {n} images)"
                )
