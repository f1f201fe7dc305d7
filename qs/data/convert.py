"""Conversion of box-feature data into a store (`qs.data.store`), one block of images at a time.

A source says which images there are and reads one image on demand: `SyntheticSource` (the
seeded generator of `qs.data.voc2007`), `RcnnSource` (R-CNN per-image ``.mat`` caches,
optionally with VOC annotations) and `LatentListSource` (a latent AP-SVM list file and its
feature files). `convert` reads the images in worker processes, which spreads the reading over
the cores and keeps a reader that crashes (a corrupt ``.mat`` file can take scipy's or h5py's
reader down with a segmentation fault) from taking the conversion with it: the file is named
in a one-line error, and the blocks written before it are kept for a rerun to resume.
"""

import hashlib
import json
import multiprocessing
import os
import signal
import threading
import time
from collections import deque
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from itertools import pairwise
from pathlib import Path

import numpy as np

from qs.data.boxes import load_image_set, load_voc_annotation, mat_paths, read_rcnn_file
from qs.data.files import LIST_BYTES, read_bytes
from qs.data.formats import mat_shapes
from qs.data.latent_list import (
    annotated_objects,
    corner_boxes,
    latent_feature_files,
    parse_latent_list,
    read_latent_features,
)
from qs.data.store_writer import StoreWriter
from qs.data.voc2007 import CLASSES, SyntheticVOC2007

__all__ = ["LatentListSource", "RcnnSource", "ReaderCrash", "SyntheticSource",
           "benchmark_write", "convert", "write_synthetic_store"]

CHUNK_BYTES = 64 * 2 ** 20  # features per chunk, about: large enough to stream, small to hold
_FLOAT16_MAX = float(np.finfo(np.float16).max)


class ReaderCrash(ValueError):
    """A worker process died while reading an input file."""


class SyntheticSource:
    """The images of one split of `SyntheticVOC2007`."""

    kind = "synthetic"
    has_gt = True

    def __init__(self, generator, split, dtype="float32"):
        self.gen, self.split, self.dtype = generator, split, np.dtype(dtype)
        self.image_ids = generator.image_ids(split)
        self.k_max, self.d = generator.boxes_per_image, generator.n_features

    def describe(self):
        return self.gen.source(self.split)

    def name(self, i):
        return f"synthetic image {self.image_ids[i]}"

    def key(self, i):
        return json.dumps([vars(self.gen).get(f) for f in
                           ("seed", "scale", "boxes_per_image", "n_features", "signal",
                            "noise", "difficult_rate")] + [self.split, i])

    def read(self, i):
        X, boxes, objects = self.gen.image(self.split, i)
        return _as_dtype(self.name(i), X, self.dtype), boxes, objects


class RcnnSource:
    """R-CNN per-image ``.mat`` caches: a directory (its ``*.mat`` files, sorted) or a list of
    files, or with ``image_set`` (a VOC image-set list) the files ``ID.mat`` of its ids in the
    directory. ``annotations``: a directory of VOC ``ID.xml`` files; their objects (difficult
    flags included) replace the caches' ``gt`` boxes, and every box is checked to lie inside
    its image. The files' shapes are read first (`scan`) to size the store."""

    kind = "rcnn"

    def __init__(self, paths_or_dir, dtype="float32", *, annotations=None, image_set=None):
        if image_set is not None:
            if not Path(paths_or_dir).is_dir():
                raise ValueError(f"With an image set, the source must be the directory of the "
                                 f"ID.mat files; {paths_or_dir} is not a directory.")
            ids, _ = load_image_set(image_set)
            self.paths = [Path(paths_or_dir) / f"{i}.mat" for i in ids]
            missing = [p.name for p in self.paths if not p.is_file()]
            if missing:
                raise ValueError(f"{image_set}: {len(missing)} of {len(ids)} images have no "
                                 f"cache in {paths_or_dir}: {', '.join(missing[:5])}"
                                 f"{' ...' if len(missing) > 5 else ''}.")
        else:
            self.paths = mat_paths(paths_or_dir)
        self.dtype = np.dtype(dtype)
        self.image_ids = np.array([p.stem for p in self.paths], dtype=str)
        self.notes, self.annotations = None, annotations
        self.split = Path(image_set).stem if image_set is not None else None
        if annotations is not None:
            self.notes = [load_voc_annotation(Path(annotations) / f"{i}.xml")
                          for i in self.image_ids]
        self.k_max = self.d = None
        self.has_gt = self.notes is not None

    def describe(self):
        where = {p.parent.resolve() for p in self.paths}
        text = (f"R-CNN .mat caches, {len(self.paths)} files in "
                f"{', '.join(map(str, sorted(where)))}")
        if self.notes is not None:
            text += f", VOC annotations in {Path(self.annotations).resolve()}"
        return text

    def name(self, i):
        return str(self.paths[i])

    def key(self, i):
        stat = self.paths[i].stat()
        return f"{self.paths[i].name} {stat.st_size} {stat.st_mtime_ns}"

    def shape(self, i):
        """``(K, d, holds gt and class)`` of file ``i`` from its headers."""
        path = self.paths[i]
        shapes = mat_shapes(path)
        if "feat" not in shapes or "boxes" not in shapes:
            raise ValueError(f"{path}: no variable {'feat' if 'feat' not in shapes else 'boxes'}"
                             f"; an R-CNN cache holds boxes and feat; this file holds "
                             f"{', '.join(sorted(shapes)) or 'none'}.")
        feat = shapes["feat"]
        if len(feat) != 2:
            raise ValueError(f"{path}: feat must be 2-D; got shape {feat}.")
        return int(feat[0]), int(feat[1]), {"gt", "class"} <= shapes.keys()

    def scan(self, workers=1, progress=False):
        """Read every file's shape (in worker processes): set ``k_max``, ``d`` and whether the
        caches hold ground truth; files disagreeing in d, or in holding gt, are an error."""
        shapes = dict(read_images(self, range(len(self.paths)), workers, "shape",
                                  progress and "scanning"))
        k, d, gt = (np.array([shapes[i][j] for i in range(len(self.paths))]) for j in range(3))
        wrong = np.flatnonzero(d != d[0])
        if wrong.size:
            raise ValueError(f"{self.paths[wrong[0]]}: feat has {d[wrong[0]]} columns, but "
                             f"{self.paths[0]} has {d[0]}; every file must hold the same "
                             "feature dimension.")
        if self.notes is None and gt.any() and not gt.all():
            raise ValueError(f"{self.paths[np.flatnonzero(gt != gt[0])[0]]} "
                             f"{'holds' if not gt[0] else 'lacks'} the variables gt and class, "
                             f"unlike {self.paths[0]}; the ground truth must come from every "
                             "file or none (or from --annotations).")
        self.k_max, self.d = max(int(k.max()), 1), int(d[0])
        self.has_gt = self.notes is not None or bool(gt.all())

    def read(self, i):
        feat, boxes, objects = read_rcnn_file(self.paths[i])
        if feat.shape[1] != self.d:
            raise ValueError(f"{self.paths[i]}: feat has {feat.shape[1]} columns, but "
                             f"{self.paths[0]} has {self.d}; every file must hold the same "
                             "feature dimension.")
        if feat.shape[0] > self.k_max:
            raise ValueError(f"{self.paths[i]}: holds {feat.shape[0]} boxes, more than when "
                             f"it was scanned ({self.k_max} at most); was it changed?")
        if self.notes is not None:
            note = self.notes[i]
            outside = np.flatnonzero((boxes[:, :2] < 1).any(axis=1) | (boxes[:, 2] > note.width)
                                     | (boxes[:, 3] > note.height))
            if outside.size:
                raise ValueError(f"{self.paths[i]}: boxes row {outside[0]} "
                                 f"{boxes[outside[0]].tolist()} (x1 y1 x2 y2) is outside image "
                                 f"{note.image_id!r} of {note.width} x {note.height} pixels.")
            objects = (note.boxes, note.classes, note.difficult)
        return _as_dtype(self.name(i), feat, self.dtype), boxes, objects


class LatentListSource:
    """A latent AP-SVM list file (`qs.data.latent_list.load_latent_list` gives the layouts) with its
    ``STEM_id.feature`` files in ``feature_dir`` (default: beside it), ``n_features`` wide;
    one stored image per example of ``layout``. ``annotations``: a directory of VOC
    ``STEM.xml`` files for the objects and image sizes."""

    kind = "latent-list"

    def __init__(self, path, n_features, dtype="float32", *, layout="pooled", feature_dir=None,
                 annotations=None):
        self.path, self.layout = Path(path), layout
        if n_features is None or n_features < 1:
            raise ValueError("A latent list file needs its feature dimension (n_features, "
                             f"--features); got {n_features!r}.")
        self.feature_dir = self.path.parent if feature_dir is None else Path(feature_dir)
        raw = read_bytes(self.path, "the latent list file", LIST_BYTES)
        self.sha256 = hashlib.sha256(raw).hexdigest()
        examples = parse_latent_list(self.path, raw.decode("utf-8", errors="replace"), layout)
        if not examples:
            raise ValueError(f"{self.path}: the list holds no images.")
        files = latent_feature_files(self.path, self.feature_dir, examples)
        counts = [e.box_ids.size for e in examples]
        starts = np.concatenate([[0], np.cumsum(counts)])
        self.files = [[f.name for f in files[a:b]] for a, b in pairwise(starts)]
        boxes = corner_boxes(examples)
        self.boxes = [boxes[a:b] for a, b in pairwise(starts)]
        notes = None
        if annotations is not None:
            notes = {e.stem: load_voc_annotation(Path(annotations) / f"{e.stem}.xml")
                     for e in examples}
        self.objects = annotated_objects(self.path, examples, boxes, notes)
        self.annotations, self.split = annotations, None
        self.has_gt = annotations is not None
        self.image_ids = np.array([e.stem for e in examples], dtype=str)
        self.k_max, self.d, self.dtype = max(max(counts), 1), int(n_features), np.dtype(dtype)

    def describe(self):
        text = (f"latent AP-SVM list {self.path.resolve()} ({self.layout} layout, sha256 "
                f"{self.sha256}), feature files in {self.feature_dir.resolve()}")
        if self.annotations is not None:
            text += f", VOC annotations in {Path(self.annotations).resolve()}"
        return text

    def name(self, i):
        return f"the feature files of image {self.image_ids[i]!r} in {self.feature_dir}"

    def key(self, i):
        return json.dumps([self.image_ids[i], self.files[i], self.boxes[i].tolist(), self.d])

    def read(self, i):
        X = read_latent_features([self.feature_dir / f for f in self.files[i]], self.d)
        objects = self.objects[i] if self.has_gt else None
        return _as_dtype(self.name(i), X, self.dtype), self.boxes[i], objects


def convert(source, out, *, chunk_images=None, workers=1, split=None, progress=False,
            stats=None):
    """Write ``source`` into the store ``out`` and return its path; resumes an interrupted
    conversion of the same data in ``out.partial``.

    ``workers``: processes reading the images (0: read here, without crash isolation);
    ``chunk_images``: images per chunk (default: about 64 MiB of features per chunk);
    ``split``: the store's split name (default: the source's own, if any); ``stats``: a dict
    that receives ``blocks_written``, ``blocks_resumed``, ``feature_bytes`` (written, as
    stored before compression), ``write_s`` (seconds in writing and checksumming blocks) and
    ``total_s``.
    """
    start = time.perf_counter()
    if hasattr(source, "scan") and source.k_max is None:
        source.scan(workers, progress)
    n = source.image_ids.size
    if chunk_images is None:
        chunk_images = CHUNK_BYTES // max(source.k_max * source.d * source.dtype.itemsize, 1)
    chunk_images = int(max(1, min(n, chunk_images)))
    keys = [hashlib.sha256("\n".join(source.key(i) for i in range(a, min(a + chunk_images, n)))
                           .encode()).hexdigest() for a in range(0, n, chunk_images)]
    _check_block_fits(chunk_images, source)
    writer = StoreWriter(out, source.image_ids, k_max=source.k_max, d=source.d,
                         dtype=source.dtype.name, chunk_images=chunk_images,
                         split=split or source.split, has_gt=source.has_gt,
                         block_keys=keys, attrs={"source_kind": source.kind})
    try:
        pending = writer.pending()
        images = [i for b in pending for i in range(*writer.block_range(b))]
        resumed = writer.n_blocks - len(pending)
        write_s = _write_blocks(writer, pending, read_images(
            source, images, workers, "read", progress and (
                f"converting ({resumed} of {writer.n_blocks} blocks already written)"
                if resumed else "converting")))
        try:
            path = writer.finish(source.describe())
        except OSError as err:
            raise ValueError(f"{err.strerror or err} finishing the store in {writer.partial} "
                             "(every block is kept: rerun to finish it).") from None
    finally:
        writer.close()
    if stats is not None:
        stats.update(blocks_written=len(pending), blocks_resumed=resumed, write_s=write_s,
                     feature_bytes=len(images) * writer.k_max * writer.d
                     * writer.dtype.itemsize, total_s=time.perf_counter() - start)
    return path


def _write_blocks(writer, pending, records):
    """Write the blocks ``pending`` from ``records``; returns the seconds the writing took.
    An error keeps the blocks written, and says so."""
    write_s = 0.0
    try:
        for b in pending:
            write_s += _write_block(writer, b, records)
    except (ValueError, MemoryError) as err:
        kind = ReaderCrash if isinstance(err, ReaderCrash) else ValueError
        what = str(err) or (f"out of memory holding a block of {writer.chunk_images} images "
                            "(use fewer images per chunk)")
        raise kind(f"{what} ({len(writer.done)} of {writer.n_blocks} blocks are kept in "
                   f"{writer.partial}: rerun to resume.)") from None
    finally:
        records.close()
    return write_s


def _check_block_fits(chunk_images, source):
    """Refuse, before anything is written, a block of images larger than this machine's
    memory: the writer holds one block at a time."""
    block = chunk_images * source.k_max * (source.d * source.dtype.itemsize + 16)
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # not known on this system
        return
    if block > memory:
        raise ValueError(f"One block of {chunk_images} images x {source.k_max} boxes x "
                         f"{source.d} features takes {block:,} bytes, more than this "
                         f"machine's memory ({memory:,} bytes); use fewer boxes, features or "
                         "images per chunk.")


def _write_block(writer, b, records):
    """Assemble block ``b`` from the next records and write it; returns the seconds the
    writing took."""
    start, stop = writer.block_range(b)
    n, k_max, d = stop - start, writer.k_max, writer.d
    features = np.zeros((n, k_max, d), writer.dtype)
    boxes = np.zeros((n, k_max, 4), np.float32)
    counts = np.zeros(n, np.int32)
    objects = [] if writer.has_gt else None
    for row in range(n):
        _, (X, box, obj) = next(records)  # in image order
        counts[row] = X.shape[0]
        features[row, :X.shape[0]] = X
        boxes[row, :X.shape[0]] = box
        if objects is not None:
            objects.append(obj)
    labels = None
    if objects is not None:
        labels = np.zeros((n, len(CLASSES)), np.int8)
        for row, (_, cls, _) in enumerate(objects):
            labels[row, np.asarray(cls, dtype=np.int64)] = 1
    began = time.perf_counter()
    try:
        writer.write_block(b, features, counts, boxes, labels, objects)
    except OSError as err:  # a full disk, above all
        raise ValueError(f"{err.strerror or err} writing block {b} of the store into "
                         f"{writer.partial}") from None
    return time.perf_counter() - began


def write_synthetic_store(path, *, split="trainval", seed=0, scale=0.05, boxes_per_image=40,
                          n_features=64, dtype="float32", chunk_images=None, workers=0,
                          progress=False, stats=None, **generator):
    """Write one split of the synthetic VOC2007 look-alike (`SyntheticVOC2007`, extra keywords
    passed to it) straight into a store, block by block; the same data as
    `make_voc2007_detection` gives in memory. Returns the store's path."""
    gen = SyntheticVOC2007(seed, scale, boxes_per_image, n_features, **generator)
    return convert(SyntheticSource(gen, split, dtype), path, chunk_images=chunk_images,
                   workers=workers, progress=progress, stats=stats)


def benchmark_write(path, *, scale=0.1, boxes_per_image=2000, n_features=512,
                    dtype="float16", workers=2, chunk_images=None, keep=False):
    """Write a synthetic store at ``path`` and measure it: ``{"images", "feature_bytes" (as
    stored, before compression), "disk_bytes", "total_s", "write_s" (writing and checksumming
    blocks, the generator's time excluded), "mb_per_s" (feature MB per second of the whole
    conversion), "write_mb_per_s" (per second of writing)}``. The defaults write about 1 GB;
    ``scale=1.0`` about 10 GB. The store is removed afterwards unless ``keep``."""
    import shutil

    stats = {}
    path = write_synthetic_store(path, scale=scale, boxes_per_image=boxes_per_image,
                                 n_features=n_features, dtype=dtype, workers=workers,
                                 chunk_images=chunk_images, stats=stats)
    disk = sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file())
    images = SyntheticVOC2007(scale=scale, boxes_per_image=boxes_per_image,
                              n_features=n_features).n_images("trainval")
    if not keep:
        shutil.rmtree(path)
    mb = stats["feature_bytes"] / 1e6
    return {"images": images, "feature_bytes": stats["feature_bytes"], "disk_bytes": disk,
            "total_s": stats["total_s"], "write_s": stats["write_s"],
            "mb_per_s": mb / stats["total_s"], "write_mb_per_s": mb / stats["write_s"]}


# --- reading in worker processes -----------------------------------------------------------

def read_images(source, indices, workers, method="read", progress=None):
    """Yield ``(i, source.<method>(i))`` for ``indices`` in order, read by ``workers``
    processes (0: here). A worker that dies is traced to its image by reading the images it
    may have held one per process; the one that kills its process raises `ReaderCrash`."""
    from tqdm import tqdm

    indices = list(indices)
    items = (((i, getattr(source, method)(i)) for i in indices) if workers == 0
             else _pooled(source, indices, workers, method))
    with tqdm(total=len(indices), desc=progress or None, unit="image", leave=False,
              disable=not progress) as bar:
        try:
            for item in items:
                bar.update()  # before the yield: the reader of the last image stops here
                yield item
        finally:
            items.close()  # a pool still running is shut down


def _context():
    """Worker processes forked from a clean server process that has this module loaded (no
    fork of a process running zarr's threads; cheaper than spawning each), else spawned."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload([__name__])
    return ctx


def _pooled(source, indices, workers, method):
    ctx = _context()
    # the workers hold the reading end of a pipe whose writing end only this process holds:
    # when it ends, however (SIGKILL included), they read EOF and exit (`_watch`)
    lifeline, alive = ctx.Pipe(duplex=False)
    try:
        yield from _pooled_reads(ctx, lifeline, source, indices, workers, method)
    finally:
        alive.close()
        lifeline.close()


def _pooled_reads(ctx, lifeline, source, indices, workers, method):
    todo = deque(indices)
    while todo:
        pool = ProcessPoolExecutor(workers, mp_context=ctx, initializer=_init_worker,
                                   initargs=(source, lifeline))
        window = deque()
        try:
            while todo or window:
                try:
                    while todo and len(window) < 2 * workers:
                        window.append((todo[0], pool.submit(_call_source, method, todo[0])))
                        todo.popleft()
                    i, future = window[0]
                    result = future.result()
                except BrokenProcessPool:  # a worker died
                    break
                window.popleft()
                yield i, result
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
        # the pool broke: every image still in the window is suspect; read them one per process
        while window:
            i, future = window.popleft()
            if future.done() and not future.cancelled() and future.exception() is None:
                yield i, future.result()
            elif (future.done() and not future.cancelled()
                  and not isinstance(future.exception(), BrokenProcessPool)):
                raise future.exception()
            else:
                yield i, _isolated(ctx, lifeline, source, method, i)


_SOURCE = None


def _init_worker(source, lifeline):
    global _SOURCE
    _SOURCE = source
    _watch(lifeline)


def _watch(lifeline):
    """End this worker process as soon as the converting process is gone: EOF on
    ``lifeline``, a pipe whose writing end that process alone holds."""
    def wait():
        try:
            lifeline.recv_bytes()
        except (EOFError, OSError):
            pass
        os._exit(1)

    threading.Thread(target=wait, name="qsrank-lifeline", daemon=True).start()


def _call_source(method, i):
    return getattr(_SOURCE, method)(i)


def _isolated(ctx, lifeline, source, method, i):
    """``source.<method>(i)`` in a process of its own; `ReaderCrash` if that process dies."""
    receive, send = ctx.Pipe(duplex=False)
    process = ctx.Process(target=_isolated_main, args=(send, lifeline, source, method, i))
    process.start()
    send.close()
    try:
        ok, payload = receive.recv()
    except EOFError:
        process.join()
        code = process.exitcode
        how = (f"killed by {signal.Signals(-code).name}" if code is not None and code < 0
               else f"exit status {code}")
        raise ReaderCrash(f"{source.name(i)}: the reader process died ({how}) reading this "
                          "file, which is likely corrupt; remove or replace it.") from None
    finally:
        receive.close()
    process.join()
    if not ok:
        raise payload
    return payload


def _isolated_main(send, lifeline, source, method, i):
    _watch(lifeline)
    try:
        result = True, getattr(source, method)(i)
    except Exception as err:  # sent back to be raised in the parent
        result = False, err
    send.send(result)
    send.close()
    os._exit(0)


def _as_dtype(name, X, dtype):
    """Features as ``dtype``; float16 refuses values beyond its range."""
    if dtype == np.float16:
        big = np.flatnonzero(np.abs(X.ravel()) > _FLOAT16_MAX)
        if big.size:
            raise ValueError(f"{name}: feature value {float(X.ravel()[big[0]]):g} is beyond "
                             f"float16 (at most {_FLOAT16_MAX:g}); convert with --dtype "
                             "float32.")
    return X.astype(dtype, copy=False)
