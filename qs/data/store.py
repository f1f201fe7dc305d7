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

A store is written by `StoreWriter` into ``<STORE>.partial/``, one block of images at a time,
each block recorded with its checksums under ``progress/`` once its chunks are on disk; an
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
import glob
import hashlib
import json
import os
import re
import shutil
from itertools import pairwise
from pathlib import Path

import numpy as np

from qs.data.lock import OutputLock
from qs.data.voc2007 import CLASSES

__all__ = ["FORMAT", "FORMAT_VERSION", "BoxStore", "StoreDamaged", "StoreWriter", "open_store"]

FORMAT = "qsrank-boxstore"
FORMAT_VERSION = 1
COMPRESSOR = {"name": "zstd", "level": 1}
IMAGE_ARRAYS = ("features", "counts", "boxes", "labels", "image_ids")
GT_ARRAYS = ("gt_boxes", "gt_class", "gt_difficult", "gt_offsets")
DTYPES = ("float16", "float32")
PARTIAL = ".partial"
_ZARR_TEMPORARY = re.compile(r".*\.[0-9a-f]{32}\.partial")  # zarr's file being written


class BoxStore:
    """A finished store, opened lazily: the arrays are zarr arrays, read only when indexed."""

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
            (group[n] for n in GT_ARRAYS) if has_gt else (None,) * 4)

    source = property(lambda self: self.attrs["source"])
    split = property(lambda self: self.attrs["split"])
    classes = property(lambda self: tuple(self.attrs["classes"]))
    n_images = property(lambda self: self.features.shape[0])
    k_max = property(lambda self: self.features.shape[1])
    d = property(lambda self: self.features.shape[2])
    dtype = property(lambda self: np.dtype(self.attrs["dtype"]))
    chunk_images = property(lambda self: self.features.chunks[0])

    def __repr__(self):
        return (f"BoxStore({str(self.path)!r}: {self.n_images} images x {self.k_max} boxes x "
                f"{self.d} {self.dtype}, split {self.split!r})")

    def dask_features(self):
        """``features`` as a Dask array with the store's chunks."""
        import dask.array as da

        return da.from_zarr(self.features)

    def verify(self, progress=False):
        """Recompute the checksum of every chunk of every array (with a progress bar when
        ``progress``); a `StoreDamaged` names each array and chunk whose stored bytes differ
        or are missing. Returns the chunks checked."""
        return len(self._recomputed(progress))

    def data_checksum(self, progress=False):
        """The SHA-256 of the data itself: of the JSON ``{array: {chunk key: sha256}}`` (keys
        sorted) with every chunk's SHA-256 recomputed from its bytes, so it verifies the store
        on the way (a damaged store has none: `StoreDamaged`)."""
        nested = {}
        for where, digest in self._recomputed(progress).items():
            name, _, key = where.partition("/")
            nested.setdefault(name, {})[key] = digest
        return hashlib.sha256(json.dumps(nested, sort_keys=True).encode()).hexdigest()

    def _recomputed(self, progress):
        """``{"array/chunk key": sha256}`` of every recorded chunk, read from the files."""
        from tqdm import tqdm

        expected = {f"{name}/{key}": digest for name, sums in self.attrs["checksums"].items()
                    for key, digest in sums.items()}
        found, bad = {}, []
        for where in tqdm(sorted(expected), desc=f"verifying {self.path}", unit="chunk",
                          leave=False, disable=not progress):
            found[where] = _file_sha256(self.path / where)
            if found[where] != expected[where]:
                name, _, key = where.partition("/")
                bad.append(f"{name} chunk {key}" + (" (missing)" if found[where] is None
                                                     else ""))
        if bad:
            shown = ", ".join(bad[:5]) + (f" and {len(bad) - 5} more" if len(bad) > 5 else "")
            raise StoreDamaged(f"{self.path}: {len(bad)} of {len(expected)} chunks fail their "
                               f"checksum: {shown}; the store is damaged, convert the data "
                               "again.")
        return found

    def to_detection_data(self, max_bytes=2 ** 30):
        """The whole store in memory as `DetectionData` (float32 features), for stores whose
        features take at most ``max_bytes`` as float32."""
        from qs.data.voc2007 import DetectionData

        counts = self.counts[:].astype(np.int64)
        size = int(counts.sum()) * self.d * 4
        if size > max_bytes:
            raise ValueError(f"{self.path}: the features take {size:,} bytes as float32, "
                             f"above max_bytes ({max_bytes:,}); read them by blocks "
                             "(dask_features) instead.")
        valid = np.arange(self.k_max) < counts[:, None]
        features, boxes = self.features[:], self.boxes[:]
        offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        if self.gt_offsets is None:
            objects = tuple((np.empty((0, 4)), np.empty(0, np.int64), np.empty(0, bool))
                            for _ in range(self.n_images))
        else:
            go, gb = self.gt_offsets[:], self.gt_boxes[:].astype(np.float64)
            gc, gd = self.gt_class[:].astype(np.int64), self.gt_difficult[:].astype(bool)
            objects = tuple((gb[a:b], gc[a:b], gd[a:b]) for a, b in pairwise(go))
        return DetectionData(features[valid].astype(np.float32), offsets,
                             boxes[valid].astype(np.float64),
                             np.array(self.image_ids[:].tolist(), dtype=str), objects,
                             self.source)


class StoreDamaged(ValueError):
    """A chunk of a store is missing or its bytes differ from its recorded checksum."""


def _verified_store(path, checksums):
    """A read-only zarr store of directory ``path`` that checks every chunk it hands out
    against ``checksums`` (``{array: {chunk key: sha256}}``) while the bytes are in hand: a
    chunk missing or changed is a `StoreDamaged` naming the store and the chunk, never data
    read silently (zarr would fill a missing chunk with zeros)."""
    from zarr.storage import LocalStore

    sums = {f"{name}/{key}": digest for name, keys in checksums.items()
            for key, digest in keys.items()}
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
            if whole is None or await asyncio.to_thread(  # hashed off zarr's event loop
                    _sha256, whole.as_numpy_array()) != expected:
                name, _, chunk = key.partition("/")
                raise StoreDamaged(
                    f"{self.where}: {name} chunk {chunk} "
                    f"{'is missing' if whole is None else 'fails its checksum'}; the store is "
                    f"damaged (qsrank load verify {self.where} checks every chunk): convert "
                    "the data again.")
            return whole if byte_range is None else await self._store.get(key, prototype,
                                                                          byte_range)

        async def _get_many(self, requests):
            for key, prototype, byte_range in requests:
                yield key, await self.get(key, prototype, byte_range)

    return VerifiedStore


def open_store(path):
    """Open the store at `path` (nothing is read but its metadata); every chunk read from it
    later is checked against its checksum (`StoreDamaged`). A half-written store, a directory
    that is no store, or a store of another format version is a ValueError."""
    import zarr

    path = Path(path)
    if path.name.endswith(PARTIAL):
        raise ValueError(f"{path} is an unfinished conversion, not a store; rerun the "
                         f"conversion with --out {str(path)[:-len(PARTIAL)]} to finish it.")
    if not path.is_dir():
        partial = _partial(path)
        hint = (f"; {partial} holds an unfinished conversion: rerun it to finish"
                if partial.is_dir() else "")
        raise ValueError(f"No box store at {path}{hint}.")
    try:
        group = zarr.open_group(path, mode="r")
        attrs = group.attrs.asdict()
    except Exception as err:  # zarr raises several kinds on a directory that is no store
        raise ValueError(f"{path} is not a box store (no readable zarr group: "
                         f"{type(err).__name__}).") from None
    if attrs.get("format") != FORMAT:
        raise ValueError(f"{path} is a zarr group but not a {FORMAT} store (no format "
                         "attribute).")
    version = attrs.get("format_version")
    if version != FORMAT_VERSION:
        raise ValueError(f"{path} is a store of format version {version}; this qsrank reads "
                         f"version {FORMAT_VERSION}: convert the data again with this "
                         "version's `qsrank load cnn`.")
    if attrs.get("complete") is not True:
        raise ValueError(f"{path} has no completion mark: it was not written by a finished "
                         "conversion; convert the data again.")
    missing = [n for n in IMAGE_ARRAYS if n not in set(group.array_keys())]
    if missing:
        raise ValueError(f"{path} lacks the arrays {', '.join(missing)}; the store is "
                         "damaged, convert the data again.")
    sums = attrs.get("checksums")
    if not isinstance(sums, dict) or not all(isinstance(v, dict) for v in sums.values()):
        raise StoreDamaged(f"{path} has no readable checksums; the store is damaged, convert "
                           "the data again.")
    return BoxStore(path, zarr.open_group(_verified_store(path, sums), mode="r"))


class StoreWriter:
    """Writes one store block by block into ``<path>.partial/`` and renames it when done.

    ``settings``: the store's shape and kind (``k_max``, ``d``, ``dtype``, ``chunk_images``,
    ``split``, ``has_labels``, ``has_gt``); an unfinished conversion in ``<path>.partial/``
    made under other settings is refused (one whose ``k_max`` is larger is reused as it is).
    ``image_ids``: every image, in order. ``block_keys``: per block of images, a text that
    identifies its inputs; a block already written is skipped when its key and checksums
    still match.
    """

    def __init__(self, path, image_ids, *, k_max, d, dtype, chunk_images, split, has_gt,
                 block_keys, attrs=None):
        import zarr

        self.path = Path(path)
        self.partial = _partial(self.path)
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
        settings = {"format_version": FORMAT_VERSION, "d": int(d), "dtype": str(dtype),
                    "chunk_images": int(chunk_images), "split": split, "has_gt": self.has_gt,
                    "compressor": COMPRESSOR}
        self.lock = OutputLock(self.path.with_name(f".{self.path.name}.lock"),
                               f"the store {self.path}").acquire()
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
            raise ValueError(f"{self.path} exists; remove it or choose another --out (a "
                             "store is never overwritten).")
        if not self.partial.exists():
            self._create(zarr, n, k_max, settings)
        else:
            progress = _read_json(self.partial / "progress.json")
            if not isinstance(progress, dict) or not (self.partial / "progress").is_dir():
                raise ValueError(f"{self.partial} exists but holds no unfinished conversion "
                                 "qsrank can resume (no progress records); it is left as it "
                                 "is: remove it or choose another --out.")
            kept = {k: v for k, v in progress.items() if k != "k_max"}
            if kept != settings or progress.get("k_max", -1) < k_max:
                raise ValueError(
                    f"{self.partial} holds an unfinished conversion made with other settings "
                    f"({_diff(progress, {**settings, 'k_max': k_max})}); remove it to start "
                    "over, or rerun with the settings it was begun with.")
            self.group = zarr.open_group(self.partial, mode="r+")
            for name in IMAGE_ARRAYS:  # the image list may have changed (a file removed)
                arr = self.group[name]
                if arr.shape[0] != n:
                    arr.resize((n,) + arr.shape[1:])
            self.group["image_ids"][:] = self.image_ids

    def close(self):
        """Release the store's lock (`finish` does; call it when giving up before)."""
        self.lock.release()

    def _create(self, zarr, n, k_max, settings):
        """Make the empty store in a hidden directory, then rename it to ``<path>.partial``:
        a partial directory always holds its progress records."""
        self.partial.parent.mkdir(parents=True, exist_ok=True)
        building = self.partial.with_name(f".{self.partial.name}.{os.getpid()}.tmp")
        group = zarr.open_group(building, mode="w-")
        c, d = settings["chunk_images"], settings["d"]
        opts = {"compressors": zarr.codecs.ZstdCodec(level=COMPRESSOR["level"]),
                "config": {"write_empty_chunks": True}}
        group.create_array("features", shape=(n, k_max, d), chunks=(c, k_max, d),
                           dtype=settings["dtype"], **opts)
        group.create_array("counts", shape=(n,), chunks=(c,), dtype="int32", **opts)
        group.create_array("boxes", shape=(n, k_max, 4), chunks=(c, k_max, 4), dtype="float32",
                           **opts)
        group.create_array("labels", shape=(n, len(CLASSES)), chunks=(c, len(CLASSES)),
                           dtype="int8", fill_value=-1, **opts)
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
        """Images ``start, stop`` of block ``b``."""
        return b * self.chunk_images, min((b + 1) * self.chunk_images, self.image_ids.size)

    def pending(self):
        """The blocks still to write, in order."""
        return [b for b in range(self.n_blocks) if b not in self.done]

    def _blocks_done(self):
        """Blocks recorded under the same key, same image ids and intact chunks; the records of
        any other block (stale, or beyond the image list) are removed."""
        done = set()
        for record_path in sorted((self.partial / "progress").glob("*.json")):
            record = _read_json(record_path)
            b = int(record_path.stem) if record_path.stem.isdigit() else -1
            ok = (isinstance(record, dict) and 0 <= b < self.n_blocks
                  and record.get("key") == self.block_keys[b]
                  and record.get("ids") == self.image_ids[slice(*self.block_range(b))].tolist()
                  and all(_file_sha256(self._chunk_file(name, b)) == digest
                          for name, digest in record.get("checksums", {}).items())
                  and set(record.get("checksums", {})) == set(IMAGE_ARRAYS) - {"image_ids"})
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
        """Write block ``b``: ``features`` (n_b, K_max, d) and ``boxes`` (n_b, K_max, 4) padded
        with zeros past each image's ``counts``; ``labels`` (n_b, 20) int8 or None (unknown);
        ``objects``: per image ``(boxes (m, 4), class (m,), difficult (m,))`` when the store
        has ground truth. Then record the block's checksums."""
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
        record = {"key": self.block_keys[b], "ids": self.image_ids[start:stop].tolist(),
                  "checksums": {name: _file_sha256(self._chunk_file(name, b))
                                for name in IMAGE_ARRAYS if name != "image_ids"}}
        if objects is not None:
            record["objects"] = [[np.asarray(o, dtype=float).reshape(-1, 4).tolist(),
                                  np.asarray(c).astype(int).tolist(),
                                  np.asarray(f).astype(bool).tolist()] for o, c, f in objects]
        _write_json(self.partial / "progress" / f"{b:06d}.json", record)
        self.done.add(b)

    def finish(self, source):
        """Write the ground truth, the checksums and the completion mark, then rename the
        directory to the store's path: that rename decides; the progress records the store
        then still holds are removed after it, or by the next writer of this path if a kill
        comes first. Releases the lock. Returns the path."""
        import zarr

        if self.pending():
            raise ValueError(f"{len(self.pending())} blocks of {self.partial} are not written "
                             "yet.")
        records = [_read_json(self.partial / "progress" / f"{b:06d}.json")
                   for b in range(self.n_blocks)]
        if self.has_gt:
            self._write_ground_truth(zarr, [obj for r in records for obj in r["objects"]])
        checksums = {name: {} for name in IMAGE_ARRAYS + (GT_ARRAYS if self.has_gt else ())}
        for b, record in enumerate(records):
            for name, digest in record["checksums"].items():
                checksums[name][self._key(name, b)] = digest
        for name in ("image_ids",) + (GT_ARRAYS if self.has_gt else ()):
            arr = self.group[name]
            for b in range(arr.nchunks):
                checksums[name][self._key(name, b)] = _file_sha256(self._chunk_file(name, b))
        self.group.attrs.update({
            "format": FORMAT, "format_version": FORMAT_VERSION, "source": source,
            "classes": list(CLASSES), "split": self.split, "n_images": int(self.image_ids.size),
            "k_max": self.k_max, "d": self.d, "dtype": self.dtype.name,
            "chunk_images": self.chunk_images, "compressor": COMPRESSOR, **self.attrs,
            "checksums": checksums, "complete": True})
        if self.path.exists():
            raise ValueError(f"{self.path} appeared during the conversion; the finished store "
                             f"is left in {self.partial}.")
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
        opts = {"compressors": zarr.codecs.ZstdCodec(level=COMPRESSOR["level"]),
                "config": {"write_empty_chunks": True}, "overwrite": True}
        for name, a in zip(GT_ARRAYS, (boxes, cls, difficult, offsets)):
            arr = self.group.create_array(name, shape=a.shape, dtype=a.dtype,
                                          chunks=(max(1, a.shape[0]),) + a.shape[1:], **opts)
            arr[...] = a


def _finish_cleanup(path):
    """Remove the progress records a finished store at ``path`` may still hold."""
    attrs = (_read_json(path / "zarr.json") or {}).get("attributes", {})
    if ((path / "progress.json").is_file() and attrs.get("format") == FORMAT
            and attrs.get("complete") is True):
        shutil.rmtree(path / "progress", ignore_errors=True)
        (path / "progress.json").unlink()


def _remove_stale_temporaries(path, partial):
    """Remove what a killed writer of ``path`` left half-made: its hidden directory of a
    store being created, the temporary files of progress records and of zarr's chunk writes
    (``NAME.<32 hex digits>.partial``). Called under the lock, so no writer is using them."""
    for building in path.parent.glob(f".{glob.escape(partial.name)}.*.tmp"):
        if building.is_dir() and building.name[len(partial.name) + 2:-4].isdigit():
            shutil.rmtree(building)
    if partial.is_dir():
        for tmp in (partial / "progress").glob("*.json.tmp"):
            tmp.unlink()
        (partial / "progress.json.tmp").unlink(missing_ok=True)
        for tmp in partial.rglob("*.partial"):
            if tmp.is_file() and _ZARR_TEMPORARY.fullmatch(tmp.name):
                tmp.unlink()


def _partial(path):
    path = Path(path)
    return path.with_name(path.name + PARTIAL)


def _sha256(data):
    return hashlib.sha256(data).hexdigest()


def _file_sha256(path):
    """sha256 of a file's bytes, or None when it is missing."""
    h = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 22), b""):
                h.update(block)
    except FileNotFoundError:
        return None
    return h.hexdigest()


def _read_json(path):
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _write_json(path, obj):
    """Write JSON atomically (temp file, then rename)."""
    tmp = Path(f"{path}.tmp")
    tmp.write_text(json.dumps(obj), encoding="utf-8")
    os.replace(tmp, path)


def _diff(have, want):
    return "; ".join(f"{k}: {have.get(k)!r} there, {want[k]!r} now" for k in want
                     if have.get(k) != want[k])
