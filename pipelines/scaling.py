"""Scaling benchmark (Mohapatra et al., CVPR 2018, Figures 2-3): seconds per loss-augmented
inference (LAI) call as the number of negatives, positives, or both grows, on seeded synthetic
scores.

Every LAI curve goes through the public ``qs.inference.lai``, so a ratio between curves
measures the algorithm, not the call path. Curve names follow the paper (0-1, ap, ap_qs,
ndcg, ndcg_qs) plus our own methods and outside references; ``*_auto_out`` is the default
writing into output arrays reused from call to call (``lai(..., out=)``), every other curve
allocates new ones per call. At each size every curve gets one cold call, timed apart
because it includes numba compilation or cache loading, then ``repeats`` rounds of one warm
timed sample of each curve in turn (a sample: an untimed call, then the mean of
back-to-back calls lasting about 2 ms). Every call reads the next of a rotation of different
seeded score vectors (at least 64 MB of them): a repeated input would be learnt by the
caches and the branch predictor, which training never lets happen. A curve whose predicted
time per call exceeds the budget is skipped at that size and every larger one.
"""

import itertools
import os
import time
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from tqdm import tqdm

from pipelines import _config
from pipelines._config import (
    check_choice,
    check_keys,
    check_mapping,
    check_number,
    dump_config,
    merge,
    new_run_dir,
)
from pipelines._io import atomic_path, read_csv, save_figure, write_text
from pipelines._provenance import recording_interruption, write_provenance
from pipelines._runs import claim_run_dir
from pipelines._tables import markdown_table
from pipelines._yaml import shown
from qs.inference import METHODS, lai
from qs.inference.batch import lai_batch

VARIES = ("negatives", "positives", "total", "share")
LOSSES = ("ap", "ndcg")

# (loss passed to lai, curve name, lai method); "ap" and "ndcg" are the paper's baselines.
LAI_CURVES = (
    ("01", "0-1", "zero_one"),
    ("ap", "ap", "yue"),
    ("ap", "ap_qs", "qs"),
    ("ap", "ap_search", "search"),
    ("ap", "ap_auto", "auto"),
    ("ap", "ap_auto_out", "auto"),
    ("ap", "sort_dc", "sort_dc"),
    ("ndcg", "ndcg", "chakrabarti"),
    ("ndcg", "ndcg_qs", "qs"),
    ("ndcg", "ndcg_auto", "auto"),
    ("ndcg", "ndcg_auto_out", "auto"),
    ("ndcg", "sort_dc", "sort_dc"),
)
# The default writing into output arrays that every call of the curve reuses (lai's out=), as
# a training loop may: the time of a call without the fresh pages of new outputs.
REUSED_OUTPUTS = frozenset({"ap_auto_out", "ndcg_auto_out"})
# Outside references, timed on the negatives alone (loss column "-").
REFERENCES = {
    "np.max": np.max,
    "np.partition": lambda neg: np.partition(neg, len(neg) // 2),
    "np.sort": np.sort,
}
# `vary: share`: the default (through lai and lai_batch), every other exact method whose cost
# is linear up to logarithms (the O(NP) scans are left out), and the 0-1 LAI, on a grid of
# negatives x share of positives. "batch" is the default through lai_batch, one query.
SHARE_CURVES = (
    ("01", "0-1", "zero_one"),
    ("ap", "ap_auto", "auto"),
    ("ap", "ap_batch", "batch"),
    ("ap", "ap_bucket", "bucket"),
    ("ap", "ap_bucket_sort", "bucket_sort"),
    ("ap", "ap_qs", "qs"),
    ("ap", "ap_search", "search"),
    ("ap", "sort_dc", "sort_dc"),
    ("ndcg", "ndcg_auto", "auto"),
    ("ndcg", "ndcg_batch", "batch"),
    ("ndcg", "ndcg_bucket", "bucket"),
    ("ndcg", "ndcg_bucket_sort", "bucket_sort"),
    ("ndcg", "ndcg_qs", "qs"),
    ("ndcg", "sort_dc", "sort_dc"),
)
CURVE_NAMES = tuple(dict.fromkeys([c[1] for c in LAI_CURVES] + list(REFERENCES)
                                  + [c[1] for c in SHARE_CURVES]))
SHARED = ("01", "-")  # loss column of the curves drawn beside every loss: 0-1 and references
QUADRATIC = frozenset({"yue", "chakrabarti"})  # O(NP) scans; all else predicted linear in N + P
COLORS = {"zero_one": "C0", "yue": "C1", "chakrabarti": "C1", "qs": "C2", "search": "C3",
          "auto": "C4", "sort_dc": "C5", "bucket": "C6", "bucket_sort": "k", "batch": "C4",
          "np.max": "C7", "np.partition": "C8", "np.sort": "C9"}
SKIPPED = "skipped (budget)"
#: the figures' legend names of the paper's baselines, which the curve names give as the loss
LABELS = {"ap": "ap (Yue et al.)", "ndcg": "ndcg (Chakrabarti et al.)"}
# What a sample measures. On a machine shared with other jobs, wall time inflates a call
# longer than the scheduler's time slice (it waits for the others) far more than a short one,
# and so the ratios between them; the process's CPU time does not wait (a threaded call counts
# the CPU time of all its threads).
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}
SAMPLE_S = 2e-3  # seconds of back-to-back calls per timed sample (one call if longer)
# Each call of a curve reads the next of a rotation of different score vectors of one size,
# together at least ROTATION_BYTES (beyond the caches; and the branch predictor cannot learn
# one input) and at least MIN_INPUTS of them: training never calls LAI twice on one input.
ROTATION_BYTES = 64 << 20
MIN_INPUTS = 2
MAX_INPUTS = 4096
TIMING_COLUMNS = ["vary", "loss", "curve", "method", "n_pos", "n_neg", "repeat", "seconds"]
COLD_COLUMNS = ["vary", "loss", "curve", "method", "n_pos", "n_neg", "seconds", "status"]

# How each preset spaces its sizes: `points` log-spaced values from `start` to `stop` of the
# varied count, the other count `fixed` (or, for total, `neg_per_pos` negatives per positive);
# for share, every count of `negatives` with P = max(1, round(share N)) for every share.
SPEC_KEYS = {
    "share": ("negatives", "shares"),
    "negatives": ("fixed", "start", "stop", "points"),
    "positives": ("fixed", "start", "stop", "points"),
    "total": ("neg_per_pos", "start", "stop", "points"),
}

# Built-in defaults: every key a config may set; configs/scaling.yaml overrides a few.
DEFAULTS = {
    "seed": 0,
    "vary": "negatives",
    "loss": "all",
    "methods": None,
    "repeats": 5,
    "preset": "paper",
    "budget_s": 10.0,
    "clock": "wall",
    "scores": {"pos_mean": 1.0, "pos_std": 1.0, "neg_mean": 0.0, "neg_std": 1.0},
    "presets": {
        "paper": {
            "negatives": {"fixed": 227, "start": 2270, "stop": 1000000, "points": 8},
            "positives": {"fixed": 200, "start": 20, "stop": 2000, "points": 8},
            "total": {"neg_per_pos": 10, "start": 2497, "stop": 1100000, "points": 8},
            "share": {"negatives": [1000, 10000, 100000, 1000000, 10000000],
                      "shares": [0.0001, 0.001, 0.01, 0.05, 0.2, 0.5]},
        },
        "large": {
            "negatives": {"fixed": 1000, "start": 10000, "stop": 10000000, "points": 7},
            "positives": {"fixed": 100000, "start": 100, "stop": 100000, "points": 7},
            "total": {"neg_per_pos": 10, "start": 11000, "stop": 11000000, "points": 7},
        },
        "voc": {
            "negatives": {"fixed": 300, "start": 3000, "stop": 30000, "points": 3},
            "positives": {"fixed": 3000, "start": 30, "stop": 300, "points": 3},
            "total": {"neg_per_pos": 10, "start": 3300, "stop": 33000, "points": 3},
        },
        "quick": {
            "negatives": {"fixed": 5, "start": 20, "stop": 200, "points": 3},
            "positives": {"fixed": 20, "start": 2, "stop": 20, "points": 3},
            "total": {"neg_per_pos": 10, "start": 22, "stop": 220, "points": 3},
            "share": {"negatives": [200, 2000], "shares": [0.01, 0.5]},
        },
    },
}


# ---------------------------------------------------------------------------- config

def load_config(path=None, **overrides):
    """DEFAULTS, updated by the YAML file at `path`, then by the non-None `overrides`; checked.

    The file is checked on its own first, so its errors name the file.
    """
    return _config.load_config(path, DEFAULTS, resolve, overrides)


def resolve(config):
    """DEFAULTS updated by `config`; raises ValueError naming any unknown key or bad value."""
    check_keys(config, DEFAULTS, "")
    cfg = merge(DEFAULTS, config)
    check_keys(cfg["scores"], DEFAULTS["scores"], "scores")
    check_mapping(cfg["presets"], "presets")
    for name, preset in cfg["presets"].items():
        check_keys(preset, SPEC_KEYS, f"presets.{name}")
        for vary, spec in preset.items():
            check_keys(spec, SPEC_KEYS[vary], f"presets.{name}.{vary}")
    check_choice(cfg["vary"], "vary", VARIES)
    check_choice(cfg["clock"], "clock", tuple(CLOCKS))
    check_choice(cfg["loss"], "loss", LOSSES + ("all",))
    check_choice(cfg["preset"], "preset", tuple(cfg["presets"]))
    check_number(cfg["seed"], "seed", integer=True, low=0)
    check_number(cfg["repeats"], "repeats", integer=True, low=1)
    check_number(cfg["budget_s"], "budget_s", low=0, strict=True)
    for key, value in cfg["scores"].items():
        check_number(value, f"scores.{key}", low=None if key.endswith("mean") else 0, strict=True)
    methods = cfg["methods"]
    if methods is not None:
        if not isinstance(methods, list) or not methods:
            raise ValueError("methods must be a non-empty list of curve names or null; "
                             f"got {shown(methods)}")
        unknown = [m for m in methods if m not in CURVE_NAMES]
        if unknown:
            raise ValueError(f"unknown curve name(s) {', '.join(map(shown, unknown))} in methods; "
                             f"known: {', '.join(CURVE_NAMES)}")
    if not curves(cfg):
        raise ValueError(f"methods {methods} select no curve for loss {cfg['loss']!r}")
    for loss, name, method in curves(cfg):
        if name not in REFERENCES and method != "batch" and loss not in METHODS.get(method, ()):
            raise ValueError(f"curve {name!r} needs lai method {method!r} with loss {loss!r}, "
                             "which qs.inference does not offer")
    sizes(cfg)
    return cfg


def curves(cfg):
    """The (loss, curve, method) triples to time, in table order."""
    losses = LOSSES if cfg["loss"] == "all" else (cfg["loss"],)
    if cfg["vary"] == "share":
        chosen = [c for c in SHARE_CURVES if c[0] in losses + ("01",)]
    else:
        chosen = [c for c in LAI_CURVES if c[0] in losses + ("01",)]
        chosen += [("-", name, name) for name in REFERENCES]
    return [c for c in chosen if cfg["methods"] is None or c[1] in cfg["methods"]]


def sizes(cfg):
    """The (n_pos, n_neg) pairs of the chosen preset and vary, smallest first."""
    vary = cfg["vary"]
    spec = cfg["presets"][cfg["preset"]].get(vary)
    where = f"presets.{cfg['preset']}.{vary}"
    if spec is None:
        raise ValueError(f"preset {cfg['preset']!r} defines no sizes for vary {vary!r} ({where})")
    missing = [key for key in SPEC_KEYS[vary] if key not in spec]
    if missing:
        raise ValueError(f"{where} lacks key(s) {', '.join(missing)}")
    if vary == "share":
        return share_pairs(spec, where)
    for key in SPEC_KEYS[vary]:
        check_number(spec[key], f"{where}.{key}", integer=True, low=1)
    grid = np.geomspace(spec["start"], spec["stop"], spec["points"])
    grid = [int(v) for v in np.unique(np.rint(grid).astype(np.int64))]
    pairs = size_pairs(vary, spec, grid, where)
    _check_memory(pairs, where)
    return pairs


def _check_memory(pairs, where):
    """Refuse sizes whose score vectors (`_data`: the rotation and its negatives) exceed the
    machine's memory, up front rather than as a MemoryError after the smaller sizes ran."""
    n_pos, n_neg = max(pairs, key=sum)
    n = n_pos + n_neg
    count = int(np.clip(-(-ROTATION_BYTES // (8 * n)), MIN_INPUTS, MAX_INPUTS))
    need = count * 8 * (n + n_neg) + n
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # not POSIX: the MemoryError will say it
        return
    if need > total:
        raise ValueError(f"{where}: the largest size ({n_pos} positives, {n_neg} negatives) "
                         f"needs about {need / 1e9:,.0f} GB for its scores, more than this "
                         f"machine's {total / 1e9:,.0f} GB of memory; lower its stop")


def share_pairs(spec, where):
    """(n_pos, n_neg) of every count of negatives x share of positives, N then share order."""
    for key in ("negatives", "shares"):
        if not isinstance(spec[key], list) or not spec[key]:
            raise ValueError(f"{where}.{key} must be a non-empty list; got {spec[key]!r}")
    for n in spec["negatives"]:
        check_number(n, f"{where}.negatives", integer=True, low=1)
    for share in spec["shares"]:
        check_number(share, f"{where}.shares", low=0, strict=True)
    pairs = [(max(1, round(share * n)), n) for n in spec["negatives"] for share in spec["shares"]]
    return list(dict.fromkeys(pairs))  # small N: several shares round to one P


def size_pairs(vary, spec, values, where):
    """(n_pos, n_neg) pairs for ``values`` of the varied count: negatives or positives beside
    ``spec["fixed"]`` of the other, or totals split ``1 : spec["neg_per_pos"]``."""
    if vary == "negatives":
        return [(spec["fixed"], n) for n in values]
    if vary == "positives":
        return [(p, spec["fixed"]) for p in values]
    pairs = [(max(1, round(t / (1 + spec["neg_per_pos"]))), t) for t in values]
    if any(p >= t for p, t in pairs):
        raise ValueError(f"{where}: every total must leave at least one negative beside one "
                         "positive")
    return [(p, t - p) for p, t in pairs]


# ---------------------------------------------------------------------------- timing

def run(config, out_dir=None, progress=True):
    """Time every curve at every size, write the run directory, and return its path.

    `out_dir` None writes to results/scaling/<UTC time>-<vary>-<random>/ under the working
    directory, claimed (and checked writable) first; the results are written when the timings
    are complete, each file atomically.
    """
    cfg = resolve(config)
    out = claim_run_dir(out_dir or new_run_dir("scaling", cfg["vary"]), "scaling", "bench")
    with recording_interruption(out, cfg["seed"], _data_note(cfg), cfg):
        if cfg["vary"] == "share":
            _run_share(cfg, out, progress)
        else:
            timings, cold = _time_all(cfg, curves(cfg), sizes(cfg), progress)
            for name, frame in (("timings.csv", timings), ("compile.csv", cold)):
                with atomic_path(out / name) as tmp:
                    frame.to_csv(tmp, index=False)
            write_text(out / "config.yaml", dump_config(cfg))
            write_text(out / "summary.md", summary(cfg, timings, cold))
            plot(timings, out / "scaling")
    write_provenance(out, cfg["seed"], _data_note(cfg), cfg)
    return out


def _data(cfg, n_pos, n_neg):
    """Seeded synthetic score vectors (the rotation, see ROTATION_BYTES) and their 1/0
    labels, shuffled so no method profits from input order."""
    n = n_pos + n_neg
    rng = np.random.default_rng([cfg["seed"], n_pos, n_neg])
    s = cfg["scores"]
    labels = np.repeat(np.array([1, 0], dtype=np.int8), [n_pos, n_neg])
    order = rng.permutation(n)
    count = int(np.clip(-(-ROTATION_BYTES // (8 * n)), MIN_INPUTS, MAX_INPUTS))
    rotation = []
    for _ in range(count):
        scores = np.concatenate([rng.normal(s["pos_mean"], s["pos_std"], n_pos),
                                 rng.normal(s["neg_mean"], s["neg_std"], n_neg)])
        rotation.append(scores[order])
    return rotation, labels[order]


def _data_note(cfg):
    s = cfg["scores"]
    return (f"synthetic scores, not the paper's data: positives ~ N({s['pos_mean']:g}, "
            f"{s['pos_std']:g}^2), negatives ~ N({s['neg_mean']:g}, {s['neg_std']:g}^2), "
            f"seed {cfg['seed']}")


def _time_all(cfg, chosen, pairs, progress):
    """One cold call per size and curve, then `repeats` rounds of one warm sample of every
    curve in turn (round robin: a slow spell of the machine hits all curves alike, so their
    ratios hold); a sample is the mean of enough back-to-back calls to last about SAMPLE_S,
    so that short calls are timed above the clock's resolution, and follows an untimed call
    of the same curve, so that a sample of one long call is as warm as back-to-back calls:
    (timings, cold) frames."""
    rows, cold = [], []
    last = {}  # curve -> (n_pos, n_neg, median seconds) at its largest timed size
    with tqdm(total=len(pairs) * len(chosen), desc=f"bench {cfg['vary']}", unit="curve",
              disable=not progress) as bar:
        for n_pos, n_neg in pairs:
            rotation, labels = _data(cfg, n_pos, n_neg)
            negatives = [scores[labels == 0] for scores in rotation]
            calls = {}
            for curve in chosen:
                loss, name, method = curve
                bar.set_postfix_str(f"{name} P={n_pos} N={n_neg} (cold)")
                key = {"vary": cfg["vary"], "loss": loss, "curve": name, "method": method,
                       "n_pos": n_pos, "n_neg": n_neg}
                if _predicted(last.get(curve), method, n_pos, n_neg) > cfg["budget_s"]:
                    cold.append({**key, "seconds": np.nan, "status": SKIPPED})
                    bar.update()
                else:
                    call = _caller(curve, rotation, labels, negatives)
                    cold.append({**key, "seconds": _clock(call), "status": "ok"})
                    calls[curve] = key, call, max(1, min(1000, int(SAMPLE_S / _clock(call))))
            warm = {curve: [] for curve in calls}
            for _ in range(cfg["repeats"]):
                for curve, (_, call, number) in calls.items():
                    call()  # untimed: the curve's code and outputs warm, as in back-to-back calls
                    warm[curve].append(_clock(call, number, CLOCKS[cfg["clock"]]))
            for curve, (key, _, _) in calls.items():
                rows += [{**key, "repeat": r, "seconds": t} for r, t in enumerate(warm[curve])]
                last[curve] = (n_pos, n_neg, float(np.median(warm[curve])))
                bar.update()
    return pd.DataFrame(rows, columns=TIMING_COLUMNS), pd.DataFrame(cold, columns=COLD_COLUMNS)


def _predicted(last, method, n_pos, n_neg):
    """Seconds per call extrapolated from the curve's largest timed size (0 if none yet)."""
    if last is None:
        return 0.0
    p0, n0, seconds = last
    if method in QUADRATIC:
        return seconds * (n_pos * n_neg) / (p0 * n0)
    return seconds * (n_pos + n_neg) / (p0 + n0)


def _caller(curve, rotation, labels, negatives):
    """The curve's call, on the next input of the rotation at each call."""
    loss, name, method = curve
    if name in REFERENCES:
        fn, following = REFERENCES[name], itertools.cycle(negatives)
        return lambda: fn(next(following))
    following = itertools.cycle(rotation)
    if method == "batch":
        rows = labels[None]
        return lambda: lai_batch(next(following)[None], rows, loss=loss)
    if name in REUSED_OUTPUTS:
        out = np.empty(negatives[0].size, dtype=np.int32), np.empty(labels.size)
        return lambda: lai(next(following), labels, loss=loss, method=method, out=out)
    return lambda: lai(next(following), labels, loss=loss, method=method)


def _clock(call, number=1, timer=time.perf_counter):
    """Seconds per call, the mean of `number` back-to-back calls, by `timer` (CLOCKS)."""
    start = timer()
    for _ in range(number):
        call()
    return (timer() - start) / number


# ---------------------------------------------------------------------------- reports

def read_run(run_dir):
    """The (timings, cold) frames of a finished run, their columns checked."""
    run_dir = Path(run_dir)
    return (read_csv(run_dir / "timings.csv", TIMING_COLUMNS),
            read_csv(run_dir / "compile.csv", COLD_COLUMNS))


def _panels(frame):
    """One panel per loss present; just 0-1 and the references when no rank loss ran."""
    return [loss for loss in LOSSES if (frame["loss"] == loss).any()] or ["-"]


def _title(panel):
    return f"{panel} loss" if panel in LOSSES else "0-1 and references"


def _medians(timings, cold, panel, statistic="median"):
    """Median seconds per call (`statistic` "spread": the repeats' interquartile range over
    their median): rows (n_pos, n_neg), columns the panel's curves; NaN = skipped."""
    mine = cold[cold["loss"].isin((panel,) + SHARED)]
    names = list(dict.fromkeys(mine["curve"]))  # names are unique within a panel
    warm = timings[timings["loss"].isin((panel,) + SHARED)]
    seconds = warm.groupby(["n_pos", "n_neg", "curve"])["seconds"]
    table = seconds.median()
    if statistic == "spread":
        table = (seconds.quantile(0.75) - seconds.quantile(0.25)) / table
    table = table.unstack("curve")
    index = pd.MultiIndex.from_frame(mine[["n_pos", "n_neg"]].drop_duplicates())
    return table.reindex(index=index, columns=names)


def _size_table(table, blank):
    """A (n_pos, n_neg) x curve table in Markdown, values to 3 significant digits."""
    rows = [[str(p), str(n), *(blank if np.isnan(v) else f"{v:.3g}" for v in values)]
            for (p, n), values in zip(table.index, table.to_numpy())]
    return markdown_table(["n_pos", "n_neg", *table.columns], rows)


def median_tables(timings, cold):
    """Median seconds per LAI call, one Markdown table per loss (the compact stdout table)."""
    return "\n\n".join(f"{_title(panel)}: median seconds per call\n\n"
                       + _size_table(_medians(timings, cold, panel), SKIPPED)
                       for panel in _panels(cold))


def report(run_dir):
    """What `qsrank bench` prints of a finished run: the grid table of a share run, else the
    median tables."""
    grid = Path(run_dir) / "grid.csv"
    if grid.is_file():
        return share_markdown(pd.read_csv(grid, keep_default_na=False, na_values=[""]))
    return median_tables(*read_run(run_dir))


def summary(cfg, timings, cold):
    """summary.md: data note, medians, ratios to the paper's baseline and to 0-1, cold calls."""
    parts = [
        f"# Scaling of loss-augmented inference: varying the {cfg['vary']}",
        f"Data: {_data_note(cfg)}. Preset `{cfg['preset']}` (Mohapatra et al., CVPR 2018, "
        "Figures 2-3). Each "
        f"cell is the median of {cfg['repeats']} warm calls through `qs.inference.lai`, each on "
        "the next of a rotation of different score vectors of that size (at least "
        f"{ROTATION_BYTES >> 20} MB of them) "
        "(np.max, np.partition and np.sort run on the negatives alone). The first, cold call "
        "at each size, which includes numba compilation or cache loading, is not in the "
        f"medians; see the last table. `{SKIPPED}`: the call was predicted to take more than "
        f"{cfg['budget_s']:g} s, so it and every larger size were not run.",
    ]
    for panel in _panels(cold):
        table = _medians(timings, cold, panel)
        parts += [f"## {_title(panel)}", "Median seconds per call:", _size_table(table, SKIPPED),
                  "Spread of the repeats: interquartile range / median:",
                  _size_table(_medians(timings, cold, panel, "spread"), SKIPPED)]
        baseline = [(panel, f"the paper's baseline `{panel}`")] if panel in LOSSES else []
        for name, label in baseline + [("0-1", "`0-1`")]:
            if name in table.columns:
                parts += [f"Time relative to {label} (below 1 is faster):",
                          _size_table(table.div(table[name], axis=0), "n/a")]
    first = cold[cold["status"] == "ok"].drop_duplicates(["loss", "curve"])
    warm = timings.groupby(["loss", "curve", "n_pos", "n_neg"])["seconds"].median()
    rows = [[r.curve, r.loss, r.method, str(r.n_pos), str(r.n_neg), f"{r.seconds:.3g}",
             f"{warm[(r.loss, r.curve, r.n_pos, r.n_neg)]:.3g}"] for r in first.itertuples()]
    header = ["curve", "loss", "method", "n_pos", "n_neg", "cold first call (s, one call)",
              "warm median (s)"]
    parts += ["## Cold first call at the smallest size (numba compile or cache load included)",
              markdown_table(header, rows)]
    return "\n\n".join(parts) + "\n"


def plot(timings, stem):
    """Log-log median seconds per call against the varied count, a panel per loss, the
    band between the quartiles of the repeats around each curve.

    Writes `stem`.png and `stem`.pdf atomically and returns their paths.
    """
    vary = timings["vary"].iloc[0]
    grouped = timings.groupby(["loss", "curve", "method", "n_pos", "n_neg"], sort=False)
    med = grouped["seconds"].median().reset_index()
    med["q1"] = grouped["seconds"].quantile(0.25).to_numpy()
    med["q3"] = grouped["seconds"].quantile(0.75).to_numpy()
    med["x"] = {"negatives": med["n_neg"], "positives": med["n_pos"],
                "total": med["n_pos"] + med["n_neg"]}[vary]
    xlabel = {"negatives": f"negatives N (P = {med['n_pos'].iloc[0]})",
              "positives": f"positives P (N = {med['n_neg'].iloc[0]})",
              "total": "samples P + N"}[vary]
    panels = _panels(med)
    fig = Figure(figsize=(5.5 * len(panels), 4.2), layout="constrained")
    for ax, panel in zip(fig.subplots(1, len(panels), squeeze=False)[0], panels):
        mine = med[med["loss"].isin((panel,) + SHARED)]
        for (loss, curve, method), line in mine.groupby(["loss", "curve", "method"], sort=False):
            style = "--" if loss == "-" else ":" if curve in REUSED_OUTPUTS else "-"
            color = COLORS.get(method, "k")
            ax.plot(line["x"], line["seconds"], marker="o", markersize=3,
                    label=LABELS.get(curve, curve), color=color, linestyle=style)
            ax.fill_between(line["x"], line["q1"], line["q3"], color=color, alpha=0.15,
                            linewidth=0)
        ax.set(xscale="log", yscale="log", xlabel=xlabel,
               ylabel="seconds per LAI call,\nmedian and quartiles of the repeats",
               title=f"{_title(panel)} (synthetic scores)")
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize="small")
    return save_figure(fig, stem)


def redraw(run_dir, kind="bench"):
    """Redraw RUN_DIR/scaling.png and .pdf from RUN_DIR/timings.csv (a curve run or a share
    grid); return their paths."""
    if kind != "bench":
        raise ValueError(f"{run_dir} holds a scaling {kind} run, which draws no figure")
    timings = read_csv(Path(run_dir) / "timings.csv", TIMING_COLUMNS)
    if timings.empty:
        raise ValueError(f"{Path(run_dir) / 'timings.csv'} holds no timings to plot")
    if (timings["vary"] == "share").all():
        return plot_share(timings, Path(run_dir) / "scaling")
    return plot(timings, Path(run_dir) / "scaling")


# ---------------------------------------------------------------------------- share grid

#: cells with N times repeats above this run fewer repeats (at least 3): N = 10^7 cells take
#: seconds per call of the slower methods
SHARE_WORK = 2 * 10**7
SHARE_COLUMNS = ["loss", "n_neg", "share", "n_pos", "default_s", "default_spread",
                 "ns_per_score", "vs_zero_one", "vs_zero_one_spread", "fastest_other",
                 "vs_fastest_other", "vs_fastest_other_spread", "batch_vs_lai"]


def _share_repeats(cfg, n_neg):
    return min(cfg["repeats"], max(3, SHARE_WORK // n_neg))


def _predicted_share(last, method, n_pos, n_neg):
    """Seconds per call extrapolated from the curve's time at the same share and a smaller N:
    linear in N + P, but for search, whose scan past the concave ranks costs up to P^2."""
    if last is None:
        return 0.0
    p0, n0, seconds = last
    if method == "search":
        return seconds * (n_pos**2 + n_neg) / (p0**2 + n0)
    return seconds * (n_pos + n_neg) / (p0 + n0)


def _nearest_share(shares, n_pos, n_neg):
    """Index of the share a cell (n_pos, n_neg) was made from (the first, where several
    round to the same P)."""
    return min(range(len(shares)), key=lambda i: abs(max(1, round(shares[i] * n_neg)) - n_pos))


def _time_share(cfg, chosen, pairs, progress):
    """Every curve at every cell of the grid: a cold call, then rounds of one sample per curve
    in a seeded shuffled order (a slow spell of the machine hits all curves of a round, and
    no curve always follows the same one); a sample is one call when a call lasts more than
    SAMPLE_S, else the mean of back-to-back calls after an untimed one. (timings, cold)."""
    rows, cold = [], []
    last = {}  # (curve, share index) -> (n_pos, n_neg, median seconds) at the largest N so far
    shares = cfg["presets"][cfg["preset"]]["share"]["shares"]
    rng = np.random.default_rng(cfg["seed"])
    with tqdm(total=len(pairs) * len(chosen), desc="bench share", unit="curve",
              disable=not progress) as bar:
        for n_pos, n_neg in pairs:
            which = _nearest_share(shares, n_pos, n_neg)
            rotation, labels = _data(cfg, n_pos, n_neg)
            calls = {}
            for curve in chosen:
                loss, name, method = curve
                bar.set_postfix_str(f"{name} P={n_pos} N={n_neg} (cold)")
                key = {"vary": "share", "loss": loss, "curve": name, "method": method,
                       "n_pos": n_pos, "n_neg": n_neg}
                if _predicted_share(last.get((curve, which)), method, n_pos,
                                    n_neg) > cfg["budget_s"]:
                    cold.append({**key, "seconds": np.nan, "status": SKIPPED})
                    bar.update()
                    continue
                call = _caller(curve, rotation, labels, None)
                seconds = _clock(call)
                cold.append({**key, "seconds": seconds, "status": "ok"})
                calls[curve] = key, call, max(1, min(1000, int(SAMPLE_S / _clock(call))))
            warm = {curve: [] for curve in calls}
            for _ in range(_share_repeats(cfg, n_neg)):
                for t in rng.permutation(len(calls)):
                    curve = list(calls)[t]
                    _, call, number = calls[curve]
                    if number > 1:
                        call()  # untimed: warm, as in back-to-back calls
                    warm[curve].append(_clock(call, number, CLOCKS[cfg["clock"]]))
            for curve, (key, _, _) in calls.items():
                rows += [{**key, "repeat": r, "seconds": t} for r, t in enumerate(warm[curve])]
                last[curve, which] = (n_pos, n_neg, float(np.median(warm[curve])))
                bar.update()
            del rotation
    return pd.DataFrame(rows, columns=TIMING_COLUMNS), pd.DataFrame(cold, columns=COLD_COLUMNS)


def _run_share(cfg, out, progress):
    """`vary: share`: time the grid, write timings, the grid table (CSV and Markdown) and the
    figure."""
    pairs = sizes(cfg)
    timings, cold = _time_share(cfg, curves(cfg), pairs, progress)
    for name, frame in (("timings.csv", timings), ("compile.csv", cold)):
        with atomic_path(out / name) as tmp:
            frame.to_csv(tmp, index=False)
    write_text(out / "config.yaml", dump_config(cfg))
    table = share_table(timings, cfg["presets"][cfg["preset"]]["share"]["shares"])
    with atomic_path(out / "grid.csv") as tmp:
        table.to_csv(tmp, index=False)
    write_text(out / "summary.md", share_summary(cfg, table))
    plot_share(timings, out / "scaling")


def _ratio(a, b):
    """Median and (min, max) of the per-round ratios of two curves' samples (same round)."""
    ratios = np.asarray(a) / np.asarray(b)
    return float(np.median(ratios)), (float(ratios.min()), float(ratios.max()))


def share_table(timings, shares):
    """One row per loss and cell: the default's median time and spread (min-max over rounds),
    time per score, and its ratios to the 0-1 LAI and to the fastest other exact method
    (medians of per-round ratios, with their min-max), and lai_batch's time over lai's."""
    rows = []
    samples = {key: frame.sort_values("repeat")["seconds"].to_numpy()
               for key, frame in timings.groupby(["loss", "curve", "n_pos", "n_neg"])}
    zero_one = timings[timings["curve"] == "0-1"]
    for loss in LOSSES:
        mine = timings[timings["loss"] == loss]
        if mine.empty:
            continue
        default = f"{loss}_auto"
        for (n_pos, n_neg), cell in mine.groupby(["n_pos", "n_neg"], sort=False):
            if (loss, default, n_pos, n_neg) not in samples:
                continue
            own = samples[loss, default, n_pos, n_neg]
            share = shares[_nearest_share(shares, n_pos, n_neg)]
            row = {"loss": loss, "n_neg": n_neg, "share": share, "n_pos": n_pos,
                   "default_s": float(np.median(own)),
                   "default_spread": f"{own.min():.3g}-{own.max():.3g}",
                   "ns_per_score": 1e9 * float(np.median(own)) / (n_pos + n_neg)}
            if not zero_one[(zero_one["n_pos"] == n_pos) & (zero_one["n_neg"] == n_neg)].empty:
                mid, (lo, hi) = _ratio(own, samples["01", "0-1", n_pos, n_neg])
                row.update({"vs_zero_one": mid, "vs_zero_one_spread": f"{lo:.2f}-{hi:.2f}"})
            others = {c: samples[loss, c, n_pos, n_neg] for c in cell["curve"].unique()
                      if c not in (default, f"{loss}_batch")}
            if others:
                best = min(others, key=lambda c: np.median(others[c]))
                mid, (lo, hi) = _ratio(own, others[best])
                row.update({"fastest_other": best, "vs_fastest_other": mid,
                            "vs_fastest_other_spread": f"{lo:.2f}-{hi:.2f}"})
            if (loss, f"{loss}_batch", n_pos, n_neg) in samples:
                row["batch_vs_lai"] = _ratio(samples[loss, f"{loss}_batch", n_pos, n_neg],
                                             own)[0]
            rows.append(row)
    return pd.DataFrame(rows, columns=SHARE_COLUMNS)


def share_markdown(table):
    """The grid table in Markdown (ratios to 2 decimals, times to 3 significant digits)."""
    def fmt(value, spec):
        return "n/a" if pd.isna(value) else format(value, spec)

    rows = [[r.loss, str(r.n_neg), f"{r.share:g}", str(r.n_pos), fmt(r.default_s, ".3g"),
             r.default_spread, fmt(r.ns_per_score, ".3g"), fmt(r.vs_zero_one, ".2f"),
             "n/a" if pd.isna(r.vs_zero_one_spread) else r.vs_zero_one_spread, "n/a" if pd.isna(r.fastest_other)
             else r.fastest_other, fmt(r.vs_fastest_other, ".2f"),
             "n/a" if pd.isna(r.vs_fastest_other_spread) else r.vs_fastest_other_spread,
             fmt(r.batch_vs_lai, ".2f")] for r in table.itertuples(index=False)]
    header = ["loss", "N", "P/N", "P", "default (s)", "spread (s)", "ns per score",
              "default / 0-1", "spread", "fastest other exact", "default / it", "spread",
              "lai_batch / lai"]
    return markdown_table(header, rows)


def share_summary(cfg, table):
    """summary.md of a share grid: what was timed and the grid table."""
    return "\n\n".join([
        "# Loss-augmented inference across the share of positives",
        f"Data: {_data_note(cfg)}. N negatives and P = max(1, round(share N)) positives. The "
        "default is `lai(..., method=\"auto\")`; `lai_batch / lai` is the default through "
        "`lai_batch` (one query) over it. Each ratio is the median over rounds of the ratio "
        "of two samples of the same round (the curves run in a shuffled order in each round), "
        f"with its min-max; up to {cfg['repeats']} rounds, fewer where N is large "
        f"(N x rounds <= {SHARE_WORK:.0e}, at least 3), timed by the {cfg['clock']} clock "
        "(cpu: the process's CPU time, all threads). The fastest other exact method is the "
        "one of least median time among bucket, bucket_sort, qs, sort_dc and search (AP).",
        share_markdown(table)]) + "\n"


def plot_share(timings, stem):
    """Time per score against P/N, a panel per loss and count of negatives; every method and
    the 0-1 LAI. Writes `stem`.png and `stem`.pdf atomically and returns their paths."""
    med = timings.groupby(["loss", "curve", "method", "n_pos", "n_neg"], sort=False)["seconds"]
    med = med.median().reset_index()
    med["x"] = med["n_pos"] / med["n_neg"]
    med["per_score"] = med["seconds"] / (med["n_pos"] + med["n_neg"])
    losses = [loss for loss in LOSSES if (med["loss"] == loss).any()]
    counts = sorted(med["n_neg"].unique())
    fig = Figure(figsize=(3.6 * len(counts), 3.3 * len(losses)), layout="constrained")
    axes = fig.subplots(len(losses), len(counts), squeeze=False)
    for row, loss in zip(axes, losses):
        for ax, n_neg in zip(row, counts):
            mine = med[med["loss"].isin((loss, "01")) & (med["n_neg"] == n_neg)]
            for (_, curve, method), line in mine.groupby(["loss", "curve", "method"], sort=False):
                style = ":" if method == "batch" else "--" if method == "zero_one" else "-"
                ax.plot(line["x"], line["per_score"], marker="o", markersize=3,
                        label=LABELS.get(curve, curve),
                        color=COLORS.get(method, "k"), linestyle=style,
                        linewidth=2.2 if method == "auto" else 1.0)
            ax.set(xscale="log", yscale="log", xlabel="share of positives P/N",
                   ylabel="median seconds per score",
                   title=f"{loss}, N = {n_neg:.0e} (synthetic scores)")
            ax.grid(True, which="major", alpha=0.3)
            ax.legend(fontsize="xx-small")
    return save_figure(fig, stem)
