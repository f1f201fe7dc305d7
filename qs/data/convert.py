"""Conversion of box-feature data into a store (`qs.data.store`), one block of images at a time.

A source (`qs.data.sources`) says which images there are and reads one image on demand.
`convert` reads the images in worker processes, which spreads the reading over
the cores and keeps a reader that crashes (a corrupt ``.mat`` file can take scipy's or h5py's
reader down with a segmentation fault) from taking the conversion with it: the file is named
in a one-line error, and the blocks written before it are kept for a rerun to resume.
"""

import hashlib
import os
import time
from pathlib import Path

import numpy as np

from qs.data.reading import ReaderCrash, read_images
from qs.data.sources import SyntheticSource
from qs.data.store_writer import StoreWriter
from qs.data.voc2007 import CLASSES, SyntheticVOC2007

__all__ = ["ReaderCrash", "benchmark_write", "convert", "write_synthetic_store"]

CHUNK_BYTES = 64 * 2**20  # features per chunk, about: large enough to stream, small to hold
_FLOAT16_MAX = float(np.finfo(np.float16).max)


def convert(source, out, *, chunk_images=None, workers=1, split=None, progress=False, stats=None):
    """Write a source of box features into a store, block by block.

    An interrupted conversion of the same data, left in ``<out>.partial``, is resumed from
    its blocks already written and intact.

    Parameters
    ----------
    source : SyntheticSource, RcnnSource or LatentListSource
        The images to store (`qs.data.sources`).
    out : str or pathlib.Path
        The store's directory; it must not exist.
    chunk_images : int or None, default None
        Images per chunk; None: about 64 MiB of features per chunk.
    workers : int, default 1
        Processes reading the images (0: read here, without crash isolation).
    split : str or None, default None
        The store's split name; None: the source's own, if any.
    progress : bool, default False
        Show a progress bar.
    stats : dict or None, default None
        Receives ``blocks_written``, ``blocks_resumed``, ``feature_bytes`` (written, before
        compression), ``write_s`` (seconds writing and checksumming blocks) and ``total_s``.

    Returns
    -------
    pathlib.Path
        The finished store.

    Raises
    ------
    ValueError
        When ``out`` exists, a block would not fit in memory, or an image cannot be read or
        written (the blocks written before it are kept for a rerun).
    ReaderCrash
        When a reader process dies on a file, naming it.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> from qs.data.sources import SyntheticSource
    >>> from qs.data.store import open_store
    >>> source = SyntheticSource(SyntheticVOC2007(scale=0.001, boxes_per_image=4), "test")
    >>> stats = {}
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     store = open_store(convert(source, pathlib.Path(tmp) / "test.zarr", workers=0,
    ...                                chunk_images=8, stats=stats))
    ...     shape, split = store.features.shape, store.split
    >>> shape, split, stats["blocks_written"]
    ((20, 4, 64), 'test', 3)
    """
    start = time.perf_counter()
    if hasattr(source, "scan") and source.k_max is None:
        source.scan(workers, progress)
    n = source.image_ids.size
    if chunk_images is None:
        chunk_images = CHUNK_BYTES // max(source.k_max * source.d * source.dtype.itemsize, 1)
    chunk_images = int(max(1, min(n, chunk_images)))
    keys = [
        hashlib.sha256(
            "\n".join(source.key(i) for i in range(a, min(a + chunk_images, n))).encode()
        ).hexdigest()
        for a in range(0, n, chunk_images)
    ]
    _check_block_fits(chunk_images, source)
    writer = StoreWriter(
        out,
        source.image_ids,
        k_max=source.k_max,
        d=source.d,
        dtype=source.dtype.name,
        chunk_images=chunk_images,
        split=split or source.split,
        has_gt=source.has_gt,
        block_keys=keys,
        attrs={"source_kind": source.kind},
    )
    try:
        pending = writer.pending()
        images = [i for b in pending for i in range(*writer.block_range(b))]
        resumed = writer.n_blocks - len(pending)
        write_s = _write_blocks(
            writer,
            pending,
            read_images(
                source,
                images,
                workers,
                "read",
                progress
                and (
                    f"converting ({resumed} of {writer.n_blocks} blocks already written)"
                    if resumed
                    else "converting"
                ),
            ),
        )
        try:
            path = writer.finish(source.describe())
        except OSError as err:
            raise ValueError(
                f"{err.strerror or err} finishing the store in {writer.partial} "
                "(every block is kept: rerun to finish it)."
            ) from None
    finally:
        writer.close()
    if stats is not None:
        stats.update(
            blocks_written=len(pending),
            blocks_resumed=resumed,
            write_s=write_s,
            feature_bytes=len(images) * writer.k_max * writer.d * writer.dtype.itemsize,
            total_s=time.perf_counter() - start,
        )
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
        what = str(err) or (
            f"out of memory holding a block of {writer.chunk_images} images "
            "(use fewer images per chunk)"
        )
        raise kind(
            f"{what} ({len(writer.done)} of {writer.n_blocks} blocks are kept in "
            f"{writer.partial}: rerun to resume.)"
        ) from None
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
        raise ValueError(
            f"One block of {chunk_images} images x {source.k_max} boxes x "
            f"{source.d} features takes {block:,} bytes, more than this "
            f"machine's memory ({memory:,} bytes); use fewer boxes, features or "
            "images per chunk."
        )


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
        features[row, : X.shape[0]] = X
        boxes[row, : X.shape[0]] = box
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
        raise ValueError(
            f"{err.strerror or err} writing block {b} of the store into {writer.partial}"
        ) from None
    return time.perf_counter() - began


def write_synthetic_store(
    path,
    *,
    split="trainval",
    seed=0,
    scale=0.05,
    boxes_per_image=40,
    n_features=64,
    dtype="float32",
    chunk_images=None,
    workers=0,
    progress=False,
    stats=None,
    **generator,
):
    """Write one split of the synthetic VOC2007 look-alike straight into a store, block by block.

    The same data as `qs.data.voc2007.make_voc2007_detection` gives in memory.

    Parameters
    ----------
    path : str or pathlib.Path
        The store's directory; it must not exist.
    split : str, default "trainval"
        "trainval" or "test".
    seed : int, default 0
        The generator's seed.
    scale : float, default 0.05
        The fraction of VOC2007's image count, in (0, 1].
    boxes_per_image : int, default 40
        Candidate boxes per image.
    n_features : int, default 64
        Features per box.
    dtype : str, default "float32"
        The stored features' type: "float16", "float32" or "float64".
    chunk_images : int or None, default None
        Images per chunk, as `convert` takes it.
    workers : int, default 0
        Processes generating the images (0: here).
    progress : bool, default False
        Show a progress bar.
    stats : dict or None, default None
        Receives the conversion's figures, as `convert` gives them.
    **generator
        Further settings of `qs.data.voc2007.SyntheticVOC2007` (``signal``, ``noise``,
        ``difficult_rate``, ``components``).

    Returns
    -------
    pathlib.Path
        The finished store.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> from qs.data.store import open_store
    >>> from qs.data.voc2007 import make_voc2007_detection
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = write_synthetic_store(pathlib.Path(tmp) / "test.zarr", split="test",
    ...                                  scale=0.001, boxes_per_image=4, n_features=3)
    ...     stored = open_store(path).to_detection_data()
    >>> memory = make_voc2007_detection(scale=0.001, boxes_per_image=4, n_features=3)["test"]
    >>> np.array_equal(stored.X, memory.X)
    True
    """
    gen = SyntheticVOC2007(seed, scale, boxes_per_image, n_features, **generator)
    return convert(
        SyntheticSource(gen, split, dtype),
        path,
        chunk_images=chunk_images,
        workers=workers,
        progress=progress,
        stats=stats,
    )


def benchmark_write(
    path,
    *,
    scale=0.1,
    boxes_per_image=2000,
    n_features=512,
    dtype="float16",
    workers=2,
    chunk_images=None,
    keep=False,
):
    """Write a synthetic trainval store and measure the writing.

    The defaults write about 1 GB of features; ``scale=1.0`` about 10 GB.

    Parameters
    ----------
    path : str or pathlib.Path
        The store's directory; it must not exist.
    scale : float, default 0.1
        The fraction of VOC2007's image count, in (0, 1].
    boxes_per_image : int, default 2000
        Candidate boxes per image.
    n_features : int, default 512
        Features per box.
    dtype : str, default "float16"
        The stored features' type: "float16", "float32" or "float64".
    workers : int, default 2
        Processes generating the images (0: here).
    chunk_images : int or None, default None
        Images per chunk, as `convert` takes it.
    keep : bool, default False
        Keep the store; by default it is removed afterwards.

    Returns
    -------
    dict
        ``images``, ``feature_bytes`` (before compression), ``disk_bytes``, ``total_s``,
        ``write_s`` (writing and checksumming blocks, the generator's time excluded),
        ``mb_per_s`` (feature MB per second of the whole conversion) and
        ``write_mb_per_s`` (per second of writing).

    Examples
    --------
    >>> import pathlib, tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     figures = benchmark_write(pathlib.Path(tmp) / "bench.zarr", scale=0.001,
    ...                               boxes_per_image=4, n_features=3, workers=0)
    ...     kept = (pathlib.Path(tmp) / "bench.zarr").exists()
    >>> figures["images"], figures["feature_bytes"], kept
    (20, 480, False)
    """
    import shutil

    stats = {}
    path = write_synthetic_store(
        path,
        scale=scale,
        boxes_per_image=boxes_per_image,
        n_features=n_features,
        dtype=dtype,
        workers=workers,
        chunk_images=chunk_images,
        stats=stats,
    )
    disk = sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file())
    images = SyntheticVOC2007(
        scale=scale, boxes_per_image=boxes_per_image, n_features=n_features
    ).n_images("trainval")
    if not keep:
        shutil.rmtree(path)
    mb = stats["feature_bytes"] / 1e6
    return {
        "images": images,
        "feature_bytes": stats["feature_bytes"],
        "disk_bytes": disk,
        "total_s": stats["total_s"],
        "write_s": stats["write_s"],
        "mb_per_s": mb / stats["total_s"],
        "write_mb_per_s": mb / stats["write_s"],
    }


# --- reading in worker processes -----------------------------------------------------------
