"""`qsrank bench ltr`: on a generated LETOR-shaped store, (1) a lai_queries pass against ``X @ w``,
(2) AP-SVM training against LightGBM lambdarank, with its peak memory, (3) an out-of-core pass
against the in-memory one; medians over repeats (docs/benchmarks.md)."""

import multiprocessing
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from qsrank.pipelines._io import write_json, write_text
from qsrank.pipelines._measure import PeakMemory, clock, exact_rss, peak_bytes
from qsrank.pipelines._runner import run_dir
from qsrank.pipelines._tables import markdown_table

#: MSLR-WEB30K's shape: queries, documents, features
WEB30K = (31_531, 3_771_125, 136)
#: preset -> (queries in the store, queries of the in-memory parts); the median documents per
#: query is set so that the mean matches WEB30K's (make_letor's sizes are log-normal)
PRESETS = {
    "quick": (300, 300),
    "tenth": (3_153, 3_153),
    "web30k": (31_531, 31_531),
    "web30k-x10": (315_310, 31_531),
}
DOCS_MEDIAN = 106
LGBM_ROUNDS = 100
#: the problem whose oracle (one pass) is timed in memory and out of core alike
PROBLEM = {"C": 1.0, "loss": "ap", "method": "auto", "tol": 1e-3, "max_iter": 10, "callback": None}


def _partitions(path):
    """The ``.npy`` partitions of the store at ``path``, in row order."""
    return sorted((Path(path) / "X").glob("*.npy"))


def write_store(path, n_queries, partition_rows, n_features=WEB30K[2], seed=0):
    """A store of ``n_queries`` generated queries at ``path``: X as float32 ``.npy`` partitions of
    about ``partition_rows`` documents, y and groups in zarr; returns its documents."""
    import zarr

    from qs.data.letor import make_letor

    block_queries = max(1, round(partition_rows * WEB30K[0] / WEB30K[1]))
    (Path(path) / "X").mkdir(parents=True, exist_ok=True)
    for stale in _partitions(path):
        stale.unlink()
    root = zarr.open_group(str(Path(path) / "labels.zarr"), mode="w")
    arrays = None
    documents = 0
    for block, start in enumerate(range(0, n_queries, block_queries)):
        data = make_letor(
            min(block_queries, n_queries - start),
            docs_per_query=DOCS_MEDIAN,
            n_features=n_features,
            seed=[seed, block],
            dtype=np.float32,
        )
        np.save(Path(path) / "X" / f"{block:06d}.npy", data.X)
        parts = {"y": data.y.astype(np.int8), "groups": data.groups + start}
        if arrays is None:
            arrays = {
                name: root.create_array(
                    name,
                    shape=(0,) + a.shape[1:],
                    dtype=a.dtype,
                    chunks=(1 << 16,) + a.shape[1:],
                    compressors=None,
                )
                for name, a in parts.items()
            }
        for name, a in parts.items():
            arrays[name].append(a)
        documents += data.y.size
    return documents


def _labels(path):
    """The zarr group of the store's grades ``y`` and query ids ``groups``."""
    import zarr

    return zarr.open_group(str(Path(path) / "labels.zarr"), mode="r")


def _open(path, rows=None):
    root = _labels(path)
    stop = root["y"].shape[0] if rows is None else rows
    parts, taken = [], 0
    for part in _partitions(path):  # the partitions that hold the first ``stop`` rows
        if taken >= stop:
            break
        parts.append(np.load(part, mmap_mode="r")[: stop - taken])
        taken += parts[-1].shape[0]
    return np.concatenate(parts), root["y"][:stop], root["groups"][:stop]


def _spread(values):
    v = np.asarray(values)
    return {"median": float(np.median(v)), "min": float(v.min()), "max": float(v.max())}


def pass_ratio(X, y, groups, repeats, seed=0):
    """(1): the seconds of ``X @ w`` and of ``lai_queries`` on its scores, per repeat."""
    from qs.inference.queries import lai_queries
    from qs.ssvm.queries import query_offsets

    _, offsets = query_offsets(groups)
    pos = y > 0
    w = np.random.default_rng(seed).standard_normal(X.shape[1]).astype(X.dtype)
    scores = X @ w
    lai_queries(scores, pos, offsets, gradient=True, ranks=False)  # compiles
    rows = []
    for _ in range(repeats):
        start = time.perf_counter()
        scores = X @ w
        middle = time.perf_counter()
        lai_queries(scores, pos, offsets, gradient=True, ranks=False)
        rows.append((middle - start, time.perf_counter() - middle))
    return np.array(rows)


def training(X, y, groups, repeats, threads, C):
    """(2): per repeat, (AP-SVM s, LightGBM s, AP-SVM peak extra bytes, AP-SVM passes)."""
    import lightgbm

    from qs.estimators import RankSVM
    from qs.ssvm.queries import query_offsets

    _, offsets = query_offsets(groups)
    exact_rss()
    rows = []
    for _ in range(repeats):
        with PeakMemory(None, "cpu") as peak:
            start = time.perf_counter()
            model = RankSVM(loss="ap", C=C).fit(X, y, groups)
            svm_s = time.perf_counter() - start
        ranker = lightgbm.LGBMRanker(
            objective="lambdarank", n_estimators=LGBM_ROUNDS, n_jobs=threads, verbose=-1
        )
        start = time.perf_counter()
        ranker.fit(X, y, group=np.diff(offsets))
        rows.append((svm_s, time.perf_counter() - start, peak.peak or 0, model.n_iter_))
    return np.array(rows, dtype=np.float64)


def _out_of_core_child(path, repeats, seed):
    """In a fresh process: the out-of-core pass's seconds per repeat, peak resident bytes before and
    after, and the partitions."""
    from qs.ssvm.out_of_core import DaskQueryProblem, npy_partitions

    root = _labels(path)
    groups, y = root["groups"][:], root["y"][:]
    X = npy_partitions(_partitions(path))
    prob = DaskQueryProblem(X, y > 0, groups, scheduler="threads", **PROBLEM)
    w = np.random.default_rng(seed).standard_normal(X.shape[1])
    before = peak_bytes()
    prob.most_violated(w)  # compiles
    times = [clock(lambda: prob.most_violated(w)) for _ in range(repeats)]
    return times, before, peak_bytes(), len(X.chunks[0])


def in_memory_pass(X, y, groups, repeats, seed=0):
    """The in-memory pass (:class:`~qs.ssvm.queries.QueryProblem`'s oracle), per repeat."""
    from qs.ssvm.queries import QueryProblem, query_offsets

    _, offsets = query_offsets(groups)
    prob = QueryProblem(X, y > 0, offsets, **PROBLEM)
    w = np.random.default_rng(seed).standard_normal(X.shape[1])
    prob.most_violated(w)
    return [clock(lambda: prob.most_violated(w)) for _ in range(repeats)]


def run(
    out=None,
    preset="quick",
    repeats=5,
    train_repeats=3,
    partition_rows=1 << 18,
    C=1.0,
    store=None,
    seed=0,
):
    """Run the benchmark at ``preset`` into ``out`` (default runs/ltr_bench/<run-id>); return (it,
    the report). ``store``: where the data go (default: a temporary directory)."""
    import numba

    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; known: {', '.join(PRESETS)}")
    threads = numba.get_num_threads()
    settings = {
        "preset": preset,
        "repeats": repeats,
        "train_repeats": train_repeats,
        "C": C,
        "partition_rows": partition_rows,
        "threads": threads,
        "cpu_count": os.cpu_count(),
    }
    note = "synthetic LETOR-shaped queries (qs.data.letor.make_letor)"
    with run_dir("ltr_bench", "bench", out, {**settings, "seed": seed}, note, settings) as out:
        n_queries, memory_queries = PRESETS[preset]
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(store) if store else Path(tmp) / "ltr"
            documents = write_store(path, n_queries, partition_rows, seed=seed)
            memory_rows = int(np.searchsorted(_labels(path)["groups"][:], memory_queries))
            X, y, groups = _open(path, memory_rows)
            data_bytes = X.nbytes
            passes = pass_ratio(X, y, groups, repeats, seed)
            trains = training(X, y, groups, train_repeats, threads, C)
            memory_s = np.array(in_memory_pass(X, y, groups, repeats, seed))
            del X, y, groups
            with multiprocessing.get_context("spawn").Pool(1) as pool:
                ooc_s, ooc_before, ooc_peak, n_parts = pool.apply(
                    _out_of_core_child, (str(path), repeats, seed)
                )
        ooc_s = np.array(ooc_s)
        per_doc_ooc, per_doc_mem = ooc_s / documents, memory_s / memory_rows
        results = {
            "preset": preset,
            "documents": documents,
            "queries": n_queries,
            "in_memory_documents": memory_rows,
            "in_memory_queries": memory_queries,
            "features": WEB30K[2],
            "data_bytes": int(data_bytes),
            "threads": threads,
            "repeats": repeats,
            "train_repeats": train_repeats,
            "C": C,
            "scores_s": _spread(passes[:, 0]),
            "lai_s": _spread(passes[:, 1]),
            "lai_over_scores": _spread(passes[:, 1] / passes[:, 0]),
            "svm_fit_s": _spread(trains[:, 0]),
            "lgbm_fit_s": _spread(trains[:, 1]),
            "svm_over_lgbm": _spread(trains[:, 0] / trains[:, 1]),
            "svm_passes": int(trains[0, 3]),
            "svm_peak_extra_bytes": _spread(trains[:, 2]),
            "svm_peak_over_data": _spread(trains[:, 2] / data_bytes),
            "in_memory_pass_s_per_doc": _spread(per_doc_mem),
            "out_of_core_pass_s_per_doc": _spread(per_doc_ooc),
            "out_of_core_over_in_memory": _spread(per_doc_ooc / np.median(per_doc_mem)),
            "partitions": n_parts,
            "partition_rows": partition_rows,
            "out_of_core_peak_bytes": int(ooc_peak),
            "out_of_core_start_bytes": int(ooc_before),
        }
        write_json(out / "results.json", results)
        report = report_text(results)
        write_text(out / "report.md", report)
    return out, report


def report_text(r):
    """The Markdown report of a run's results."""

    def cell(s, scale=1.0, fmt="{:.3g}"):
        return (
            f"{fmt.format(s['median'] * scale)} ({fmt.format(s['min'] * scale)}-"
            f"{fmt.format(s['max'] * scale)})"
        )

    rows = [
        ("scores X @ w (float32), s", cell(r["scores_s"]), ""),
        ("lai_queries pass (AP, gradient), s", cell(r["lai_s"]), ""),
        ("LAI / X @ w", cell(r["lai_over_scores"]), "<= 1"),
        (f"AP-SVM fit to tol ({r['svm_passes']} passes), s", cell(r["svm_fit_s"]), ""),
        (f"LightGBM lambdarank {LGBM_ROUNDS} rounds, s", cell(r["lgbm_fit_s"]), ""),
        ("AP-SVM / LightGBM", cell(r["svm_over_lgbm"]), "<= 1"),
        ("AP-SVM fit peak extra memory / data bytes", cell(r["svm_peak_over_data"]), "<= 1.5"),
        ("in-memory pass, ns per document", cell(r["in_memory_pass_s_per_doc"], 1e9), ""),
        ("out-of-core pass, ns per document", cell(r["out_of_core_pass_s_per_doc"], 1e9), ""),
        ("out of core / in memory (per document)", cell(r["out_of_core_over_in_memory"]), "<= 2"),
        (
            "out-of-core process peak memory, GB",
            f"{r['out_of_core_peak_bytes'] / 1e9:.2f} "
            f"(at start {r['out_of_core_start_bytes'] / 1e9:.2f})",
            "<= 4 at web30k-x10",
        ),
    ]
    head = (
        f"# Learning to rank at scale: preset {r['preset']}\n\n"
        f"{r['in_memory_queries']} queries, {r['in_memory_documents']} documents, "
        f"{r['features']} float32 features ({r['data_bytes'] / 1e9:.2f} GB) in memory; "
        f"out of core {r['queries']} queries, {r['documents']} documents in "
        f"{r['partitions']} partitions of about {r['partition_rows']} rows (.npy files "
        f"memory-mapped, Dask's threaded scheduler); {r['threads']} threads; medians over "
        f"{r['repeats']} repeats ({r['train_repeats']} for the fits), smallest-largest in "
        "parentheses.\n"
    )
    return head + "\n" + markdown_table(["measure", "value", "target"], rows) + "\n"
