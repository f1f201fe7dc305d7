"""Scale benchmark of the VOC2007 latent AP-SVM (Mohapatra et al., CVPR 2018, Section 4.2) up to
the paper's size, on the synthetic look-alike: time and memory, not accuracy.

(a) One outer step's scoring pass over ``images`` x ``boxes`` x ``features`` generated chunk by
    chunk as a lazy Dask array, beside one in-memory block scaled up, its peak memory measured
    in a fresh process (VmHWM: a spawned process inherits its parent's ``ru_maxrss``).
(a') With ``store``: the same pass read from a box-feature store, which must choose the same
    boxes as the generated one. (a'') The lockstep pass: each image's 10 best boxes per class.
(b) One LAI call on 10^6 or 10^7 pooled negatives, the default AP method against 0-1.
"""

import concurrent.futures
import multiprocessing
import time
from pathlib import Path

import numpy as np

from qs.data.voc2007 import CLASSES, SPLIT_SIZES, SyntheticVOC2007
from qs.detection import score_bags
from qs.inference import lai
from qs.top_boxes import class_top_boxes
from qsrank.pipelines._measure import median_time, peak_bytes
from qsrank.pipelines._provenance import provenance
from qsrank.pipelines._tables import markdown_table

SPLIT = "trainval"
#: boxes per image and class the lockstep pass keeps (configs/voc2007_large.yaml's working set)
LOCKSTEP_K = 10
#: a small default that runs in a few minutes on 2 cores; --images 5011 for the paper's size
DEFAULTS = {
    "images": 500,
    "boxes": 2000,
    "features": 4096,
    "classes": 20,
    "chunk_images": 4,
    "dtype": "float16",
    "seed": 0,
    "scheduler": None,
    "repeats": 5,
    "pooled": (10**6, 10**7),
    "positives": 300,
    "store": None,
}


def generator(cfg):
    """The `SyntheticVOC2007` whose trainval split has ``cfg["images"]`` images of
    ``cfg["boxes"]`` boxes x ``cfg["features"]`` features."""
    n = cfg["images"]
    if not len(CLASSES) <= n <= SPLIT_SIZES[SPLIT]:
        raise ValueError(
            f"images must lie in [{len(CLASSES)}, {SPLIT_SIZES[SPLIT]}] (every "
            f"class, at most VOC2007's trainval size); got {n}."
        )
    return SyntheticVOC2007(cfg["seed"], n / SPLIT_SIZES[SPLIT], cfg["boxes"], cfg["features"])


def generated_features(cfg):
    """The trainval features of :func:`generator`, a lazy Dask array of chunk_images images."""
    return generator(cfg).features(SPLIT, dtype=cfg["dtype"], chunk_images=cfg["chunk_images"])


def _weights(n_features, n_classes, seed):
    return np.random.default_rng([seed, 1]).normal(size=(n_features, n_classes))


def _measured_pass(cfg, store=None):
    """One scoring pass in this process, over the generated features or the store at
    ``store``: (seconds, peak resident bytes, bytes before, best boxes)."""
    if store is None:
        features, counts = generated_features(cfg), np.full(cfg["images"], cfg["boxes"])
    else:
        from qs.data.store import open_store

        opened = open_store(store)
        features, counts = opened.dask_features(), opened.counts[:]
    W = _weights(features.shape[2], cfg["classes"], cfg["seed"])
    before = peak_bytes()
    start = time.perf_counter()
    res = score_bags(features, counts, W, scheduler=cfg["scheduler"])
    seconds = time.perf_counter() - start
    return seconds, peak_bytes(), before, res.best


def _fresh_process_pass(cfg, store=None, measure=None):
    """``measure`` (:func:`_measured_pass` by default) in a fresh process, so that its peak
    memory is the pass's own."""
    spawn = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=spawn) as pool:
        return pool.submit(measure or _measured_pass, cfg, store).result()


def _measured_lockstep_pass(cfg, store=None):
    """One lockstep pass over the generated features in this process: (seconds, peak
    resident bytes, bytes before, best boxes of the check columns)."""
    features, n = generated_features(cfg), cfg["images"]
    W = _weights(features.shape[2], cfg["classes"], cfg["seed"])
    check = (
        _weights(features.shape[2], cfg["classes"], cfg["seed"] + 1),
        np.zeros((n, cfg["classes"]), np.int64),
    )
    before = peak_bytes()
    start = time.perf_counter()
    res = class_top_boxes(
        features, np.full(n, cfg["boxes"]), W, LOCKSTEP_K, check=check, scheduler=cfg["scheduler"]
    )
    return time.perf_counter() - start, peak_bytes(), before, res.best


def scoring_pass(cfg):
    """(a): the generated pass in a fresh process, and one in-memory block scaled up."""
    seconds, peak, before, best = _fresh_process_pass(cfg)
    features = generated_features(cfg)
    n_blocks = features.numblocks[0]
    first = features.blocks[0]
    generate = median_time(lambda: first.compute(scheduler="sync"), cfg["repeats"])
    block = first.compute(scheduler="sync")
    W = _weights(cfg["features"], cfg["classes"], cfg["seed"])
    counts = np.full(block.shape[0], cfg["boxes"])
    products = median_time(lambda: np.matmul(block.astype(np.float64), W), cfg["repeats"])
    score = median_time(lambda: score_bags(block, counts, W), cfg["repeats"])
    lockstep_s, lockstep_peak, _, _ = _fresh_process_pass(cfg, measure=_measured_lockstep_pass)
    figures = {
        "images": cfg["images"],
        "boxes": cfg["boxes"],
        "features": cfg["features"],
        "classes": cfg["classes"],
        "dtype": cfg["dtype"],
        "blocks": n_blocks,
        "chunk_images": cfg["chunk_images"],
        "feature_gb": features.nbytes / 1e9,
        "pass_s": seconds,
        "products_scaled_s": products * n_blocks,
        "score_scaled_s": score * n_blocks,
        "generate_scaled_s": generate * n_blocks,
        "peak_gb": peak / 1e9,
        "start_gb": before / 1e9,
        "lockstep_pass_s": lockstep_s,
        "lockstep_peak_gb": lockstep_peak / 1e9,
        "boxes_per_s": cfg["images"] * cfg["boxes"] / lockstep_s,
    }
    return figures, best


def store_shape(path):
    """The settings of a generated pass shaped like the store at `path`, and the store."""
    from qs.data.store import open_store

    store = open_store(path)
    chunks = store.features.chunks[0]
    return {
        "images": store.n_images,
        "boxes": store.k_max,
        "features": store.d,
        "dtype": store.dtype.name,
        "chunk_images": chunks,
    }, store


def store_pass(cfg, generated_best):
    """(a'): the pass over the store at ``cfg["store"]`` in a fresh process; its figures, and
    whether it chose the same boxes as the generated pass (``generated_best``)."""
    path = Path(cfg["store"])
    _, store = store_shape(path)
    seconds, peak, before, best = _fresh_process_pass(cfg, str(path))
    feature_bytes = int(store.counts[:].astype(np.int64).sum()) * store.d * store.dtype.itemsize
    disk = sum(f.stat().st_size for f in (path / "features").rglob("*") if f.is_file())
    return {
        "store": str(path),
        "source": store.source,
        "disk_pass_s": seconds,
        "disk_peak_gb": peak / 1e9,
        "disk_start_gb": before / 1e9,
        "features_on_disk_gb": disk / 1e9,
        "read_mb_per_s": feature_bytes / 1e6 / seconds,
        "same_best": bool(np.array_equal(best, generated_best)),
    }


def pooled_lai(sizes, n_pos, repeats, seed=0):
    """(b): rows (pooled negatives, seconds per call of the default AP LAI, of the 0-1 LAI)."""
    rows = []
    for n_neg in sizes:
        rng = np.random.default_rng([seed, n_neg])
        # training's scores: the pooled negatives mostly below the positives
        scores = np.concatenate([rng.normal(1.0, 1.0, n_pos), rng.normal(-1.0, 1.0, n_neg)])
        labels = np.repeat(np.array([1, 0], dtype=np.int8), [n_pos, n_neg])
        times = {}
        for loss in ("ap", "01"):
            lai(scores, labels, loss=loss)  # first call: kernels loaded or compiled
            times[loss] = median_time(
                lambda s=scores, y=labels, loss=loss: lai(s, y, loss=loss), repeats
            )
        rows.append((n_neg, times["ap"], times["01"]))
    return rows


def run(**settings):
    """Every measurement; ``settings`` override :data:`DEFAULTS` (with ``store``, the store's
    shape replaces images, boxes, features, dtype and chunk_images). Returns the figures."""
    unknown = set(settings) - set(DEFAULTS)
    if unknown:
        raise ValueError(f"unknown settings {sorted(unknown)}; known: {sorted(DEFAULTS)}.")
    cfg = {**DEFAULTS, **settings}
    if cfg["store"] is not None:
        cfg.update(store_shape(cfg["store"])[0])
    gen = generator(cfg)
    results = {
        "settings": {**cfg, "pooled": list(cfg["pooled"])},
        "provenance": provenance(cfg["seed"], gen.source(SPLIT)),
    }
    results["scoring_pass"], best = scoring_pass(cfg)
    if cfg["store"] is not None:
        results["store_pass"] = store_pass(cfg, best)
    results["pooled_lai"] = pooled_lai(cfg["pooled"], cfg["positives"], cfg["repeats"], cfg["seed"])
    return results


def report(results):
    """Markdown tables of :func:`run`'s figures."""
    a = results["scoring_pass"]
    rows = []
    head = (
        f"Scoring pass: {a['images']} images x {a['boxes']} boxes x {a['features']} "
        f"features ({a['dtype']}, {a['feature_gb']:.1f} GB, {a['blocks']} blocks of "
        f"{a['chunk_images']} images), {a['classes']} classes; peak memory of the "
        f"generated pass {a['peak_gb']:.2f} GB (at start {a['start_gb']:.2f} GB)"
    )
    base = a["pass_s"]
    if "store_pass" in results:
        s = results["store_pass"]
        base = s["disk_pass_s"]
        rows.append(("Dask pass, read from the store", f"{base:.1f}", "1.00"))
        head += (
            f"; of the pass from disk {s['disk_peak_gb']:.2f} GB (at start "
            f"{s['disk_start_gb']:.2f} GB)\n\nStore: {s['store']} ({s['source']}), "
            f"features {s['features_on_disk_gb']:.2f} GB on disk, read at "
            f"{s['read_mb_per_s']:.1f} MB/s (uncompressed feature bytes per second of the "
            f"pass); same best boxes as the generated pass: "
            f"{'yes' if s['same_best'] else 'no'}"
        )
    rows.append(
        ("Dask pass, generated chunk by chunk", f"{a['pass_s']:.1f}", f"{base / a['pass_s']:.2f}")
    )
    rows.append(
        (
            f"lockstep pass (top {LOCKSTEP_K} per class, one check per class), "
            f"peak {a['lockstep_peak_gb']:.2f} GB",
            f"{a['lockstep_pass_s']:.1f}",
            f"{base / a['lockstep_pass_s']:.2f}",
        )
    )
    for label, seconds in (
        ("matrix products on one block x blocks", a["products_scaled_s"]),
        ("scoring one block x blocks", a["score_scaled_s"]),
        ("generating + scoring one block x blocks", a["generate_scaled_s"] + a["score_scaled_s"]),
    ):
        rows.append((label, f"{seconds:.1f}", f"{base / seconds:.2f}"))
    pooled = [
        (f"{n:.0e}", f"{ap * 1e3:.1f}", f"{zo * 1e3:.1f}", f"{ap / zo:.2f}")
        for n, ap, zo in results["pooled_lai"]
    ]
    return (
        head
        + "\n\n"
        + markdown_table(["", "seconds", "first pass / this"], rows)
        + "\n\n"
        + f"Pooled negatives, {results['settings']['positives']} positives, "
        "median ms per LAI call\n\n"
        + markdown_table(["pooled negatives", "AP (default)", "0-1", "AP / 0-1"], pooled)
    )
