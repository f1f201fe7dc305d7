"""Scale benchmark of the VOC2007 latent AP-SVM (paper 000, Section 4.2, at the paper's size).

(a) One outer step's scoring pass: every box of ``images`` images x ``boxes`` boxes x
    ``features`` features, generated chunk by chunk from a seed as a Dask array (never held in
    memory), scored against 20 classes' weights at once by :func:`qs.detection.score_bags`
    (each image's best box per class). Its wall time is set beside the same work on one
    in-memory block scaled up by the number of blocks (the matrix products alone, and
    generation plus scoring), and its peak memory is measured in a fresh process (the
    process's maximum resident set, ``resource.getrusage``).
(b) Pooled negatives: one LAI call on ``positives`` positive boxes and 10^6 or 10^7 pooled
    negative boxes, the default AP method against the 0-1 LAI, medians over repeats (the
    first call of each, which loads or compiles the kernels, timed apart).

The features are seeded normal noise: this measures time and memory, not accuracy, and is not
the paper's data. ``python -m pipelines.voc2007_scale --images 5011`` runs the paper's size
(5011 images x 2000 boxes x 4096 features, 82 GB at float16).
"""

import concurrent.futures
import multiprocessing
import resource
import time

import click
import numpy as np

from pipelines._io import write_json
from pipelines._provenance import provenance
from pipelines._tables import markdown_table
from qs.detection import score_bags
from qs.inference import lai

#: a small default that runs in about a minute on 2 cores; --images 5011 for the paper's size
DEFAULTS = {"images": 500, "boxes": 2000, "features": 4096, "classes": 20, "chunk_images": 4,
            "dtype": "float16", "seed": 0, "scheduler": None, "repeats": 5,
            "pooled": (10**6, 10**7), "positives": 300}


def synthetic_features(n_images, n_boxes, n_features, *, seed=0, chunk_images=4,
                       dtype="float16"):
    """Seeded box features (n_images, n_boxes, n_features) as a lazy Dask array: each chunk of
    ``chunk_images`` images is generated when a task needs it, from ``(seed, chunk index)``,
    so the array is never held in memory. Values: random float16 bit patterns below 2 in
    magnitude (finite, signs and exponents spread), drawn at the speed of random integers:
    the pass measured is the scoring, not a normal sampler."""
    import dask.array as da

    chunks = (da.core.normalize_chunks(chunk_images, (n_images,))[0], (n_boxes,), (n_features,))
    return da.map_blocks(_feature_block, dtype=np.dtype(dtype), chunks=chunks,
                         meta=np.empty((0, 0, 0), dtype=dtype), seed=seed, dtype_out=dtype)


def _feature_block(block_info=None, *, seed, dtype_out):
    info = block_info[None]
    rng = np.random.default_rng([seed, *info["chunk-location"]])
    bits = rng.integers(0, 1 << 16, size=info["chunk-shape"], dtype=np.uint16)
    bits &= 0xBFFF  # exponent field below 31 - 15: |value| < 2, never inf or NaN
    return bits.view(np.float16).astype(dtype_out, copy=False)


def _weights(n_features, n_classes, seed):
    return np.random.default_rng([seed, 1]).normal(size=(n_features, n_classes))


def _median_time(fn, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def _measured_pass(cfg):
    """One scoring pass in this process: (seconds, peak resident bytes, bytes before)."""
    features = synthetic_features(cfg["images"], cfg["boxes"], cfg["features"],
                                  seed=cfg["seed"], chunk_images=cfg["chunk_images"],
                                  dtype=cfg["dtype"])
    counts = np.full(cfg["images"], cfg["boxes"])
    W = _weights(cfg["features"], cfg["classes"], cfg["seed"])
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    start = time.perf_counter()
    res = score_bags(features, counts, W, scheduler=cfg["scheduler"])
    seconds = time.perf_counter() - start
    assert res.best.shape == (cfg["images"], cfg["classes"])
    return seconds, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, before


def scoring_pass(cfg):
    """(a): the pass in a fresh process, and one in-memory block scaled up."""
    spawn = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=spawn) as pool:
        seconds, peak, before = pool.submit(_measured_pass, cfg).result()
    features = synthetic_features(cfg["images"], cfg["boxes"], cfg["features"],
                                  seed=cfg["seed"], chunk_images=cfg["chunk_images"],
                                  dtype=cfg["dtype"])
    n_blocks = features.numblocks[0]
    first = features.blocks[0]
    generate = _median_time(lambda: first.compute(scheduler="sync"), cfg["repeats"])
    block = first.compute(scheduler="sync")
    W = _weights(cfg["features"], cfg["classes"], cfg["seed"])
    counts = np.full(block.shape[0], cfg["boxes"])
    products = _median_time(lambda: np.matmul(block.astype(np.float64), W), cfg["repeats"])
    score = _median_time(lambda: score_bags(block, counts, W), cfg["repeats"])
    return {"images": cfg["images"], "boxes": cfg["boxes"], "features": cfg["features"],
            "classes": cfg["classes"], "dtype": cfg["dtype"], "blocks": n_blocks,
            "store_gb": features.nbytes / 1e9, "pass_s": seconds,
            "products_scaled_s": products * n_blocks, "score_scaled_s": score * n_blocks,
            "generate_scaled_s": generate * n_blocks, "peak_gb": peak / 1e9,
            "start_gb": before / 1e9}


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
            times[loss] = _median_time(
                lambda s=scores, y=labels, loss=loss: lai(s, y, loss=loss), repeats)
        rows.append((n_neg, times["ap"], times["01"]))
    return rows


def run(**settings):
    """Both measurements; ``settings`` override :data:`DEFAULTS`. Returns a dict of figures."""
    unknown = set(settings) - set(DEFAULTS)
    if unknown:
        raise ValueError(f"unknown settings {sorted(unknown)}; known: {sorted(DEFAULTS)}.")
    cfg = {**DEFAULTS, **settings}
    return {"settings": {**cfg, "pooled": list(cfg["pooled"])},
            "provenance": provenance(cfg["seed"], "synthetic normal box features (seeded), not "
                                     "the paper's data"),
            "scoring_pass": scoring_pass(cfg),
            "pooled_lai": pooled_lai(cfg["pooled"], cfg["positives"], cfg["repeats"],
                                     cfg["seed"])}


def report(results):
    """Markdown tables of :func:`run`'s figures."""
    a = results["scoring_pass"]
    rows = [("Dask pass (generated chunk by chunk)", f"{a['pass_s']:.1f}", "1.00"),
            ("matrix products on one block x blocks", f"{a['products_scaled_s']:.1f}",
             f"{a['pass_s'] / a['products_scaled_s']:.2f}"),
            ("scoring one block x blocks", f"{a['score_scaled_s']:.1f}",
             f"{a['pass_s'] / a['score_scaled_s']:.2f}"),
            ("generating + scoring one block x blocks",
             f"{a['generate_scaled_s'] + a['score_scaled_s']:.1f}",
             f"{a['pass_s'] / (a['generate_scaled_s'] + a['score_scaled_s']):.2f}")]
    head = (f"Scoring pass: {a['images']} images x {a['boxes']} boxes x {a['features']} "
            f"features ({a['dtype']}, {a['store_gb']:.1f} GB, {a['blocks']} blocks), "
            f"{a['classes']} classes; peak memory {a['peak_gb']:.2f} GB (at start "
            f"{a['start_gb']:.2f} GB)\n\n")
    pooled = [(f"{n:.0e}", f"{ap * 1e3:.1f}", f"{zo * 1e3:.1f}", f"{ap / zo:.2f}")
              for n, ap, zo in results["pooled_lai"]]
    return (head + markdown_table(["", "seconds", "pass / this"], rows) + "\n\n"
            + f"Pooled negatives, {results['settings']['positives']} positives, median ms per "
              "LAI call\n\n"
            + markdown_table(["pooled negatives", "AP (default)", "0-1", "AP / 0-1"], pooled))


@click.command()
@click.option("--images", type=click.IntRange(1), default=DEFAULTS["images"], show_default=True)
@click.option("--boxes", type=click.IntRange(1), default=DEFAULTS["boxes"], show_default=True)
@click.option("--features", type=click.IntRange(1), default=DEFAULTS["features"],
              show_default=True)
@click.option("--chunk-images", type=click.IntRange(1), default=DEFAULTS["chunk_images"],
              show_default=True)
@click.option("--dtype", type=click.Choice(["float16", "float32"]), default=DEFAULTS["dtype"],
              show_default=True)
@click.option("--scheduler", default=None, metavar="ADDRESS",
              help="a dask.distributed scheduler's address (default: the threaded scheduler)")
@click.option("--repeats", type=click.IntRange(1), default=DEFAULTS["repeats"], show_default=True)
@click.option("--pooled", type=click.IntRange(1), multiple=True, default=DEFAULTS["pooled"],
              show_default=True, help="pooled negative boxes (repeat the option)")
@click.option("--out", type=click.Path(dir_okay=False), default=None,
              help="also write the figures as JSON here")
def main(images, boxes, features, chunk_images, dtype, scheduler, repeats, pooled, out):
    """Print the scale benchmark's tables (a Dask pass at any size, pooled-negative LAI)."""
    try:
        results = run(images=images, boxes=boxes, features=features, chunk_images=chunk_images,
                      dtype=dtype, scheduler=scheduler, repeats=repeats, pooled=pooled)
    except ValueError as err:
        raise click.ClickException(str(err)) from None
    if out:
        write_json(out, results)
    click.echo(report(results))


if __name__ == "__main__":
    main()
