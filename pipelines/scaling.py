"""Scaling benchmark (paper 000, Figures 2-3): seconds per loss-augmented inference (LAI)
call as the number of negatives, positives, or both grows, on seeded synthetic scores.

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
from pipelines._io import atomic_path, save_figure, write_text
from pipelines._provenance import write_provenance
from pipelines._runs import claim_run_dir
from pipelines._tables import markdown_table
from qs.inference import METHODS, lai

VARIES = ("negatives", "positives", "total")
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
CURVE_NAMES = tuple(dict.fromkeys([c[1] for c in LAI_CURVES] + list(REFERENCES)))
SHARED = ("01", "-")  # loss column of the curves drawn beside every loss: 0-1 and references
QUADRATIC = frozenset({"yue", "chakrabarti"})  # O(NP) scans; all else predicted linear in N + P
COLORS = {"zero_one": "C0", "yue": "C1", "chakrabarti": "C1", "qs": "C2", "search": "C3",
          "auto": "C4", "sort_dc": "C5", "np.max": "C7", "np.partition": "C8", "np.sort": "C9"}
SKIPPED = "skipped (budget)"
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
# varied count, the other count `fixed` (or, for total, `neg_per_pos` negatives per positive).
SPEC_KEYS = {
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
    "scores": {"pos_mean": 1.0, "pos_std": 1.0, "neg_mean": 0.0, "neg_std": 1.0},
    "presets": {
        "paper": {
            "negatives": {"fixed": 227, "start": 2270, "stop": 1000000, "points": 8},
            "positives": {"fixed": 200, "start": 20, "stop": 2000, "points": 8},
            "total": {"neg_per_pos": 10, "start": 2497, "stop": 1100000, "points": 8},
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
                             f"got {methods!r}")
        unknown = [m for m in methods if m not in CURVE_NAMES]
        if unknown:
            raise ValueError(f"unknown curve name(s) {', '.join(map(repr, unknown))} in methods; "
                             f"known: {', '.join(CURVE_NAMES)}")
    if not curves(cfg):
        raise ValueError(f"methods {methods} select no curve for loss {cfg['loss']!r}")
    for loss, name, method in curves(cfg):
        if name not in REFERENCES and loss not in METHODS.get(method, ()):
            raise ValueError(f"curve {name!r} needs lai method {method!r} with loss {loss!r}, "
                             "which qs.inference does not offer")
    sizes(cfg)
    return cfg


def curves(cfg):
    """The (loss, curve, method) triples to time, in table order."""
    losses = LOSSES if cfg["loss"] == "all" else (cfg["loss"],)
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
    timings, cold = _time_all(cfg, curves(cfg), sizes(cfg), progress)
    for name, frame in (("timings.csv", timings), ("compile.csv", cold)):
        with atomic_path(out / name) as tmp:
            frame.to_csv(tmp, index=False)
    write_text(out / "config.yaml", dump_config(cfg))
    write_provenance(out, cfg["seed"], _data_note(cfg), cfg)
    write_text(out / "summary.md", summary(cfg, timings, cold))
    plot(timings, out / "scaling")
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
                    warm[curve].append(_clock(call, number))
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
    if name in REUSED_OUTPUTS:
        out = np.empty(negatives[0].size, dtype=np.int32), np.empty(labels.size)
        return lambda: lai(next(following), labels, loss=loss, method=method, out=out)
    return lambda: lai(next(following), labels, loss=loss, method=method)


def _clock(call, number=1):
    """Seconds per call, the mean of `number` back-to-back calls."""
    start = time.perf_counter()
    for _ in range(number):
        call()
    return (time.perf_counter() - start) / number


# ---------------------------------------------------------------------------- reports

def _read_csv(path, columns):
    frame = pd.read_csv(path, keep_default_na=False, na_values=[""])
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(f"{path} lacks column(s) {', '.join(missing)}")
    return frame


def read_run(run_dir):
    """The (timings, cold) frames of a finished run, their columns checked."""
    run_dir = Path(run_dir)
    return (_read_csv(run_dir / "timings.csv", TIMING_COLUMNS),
            _read_csv(run_dir / "compile.csv", COLD_COLUMNS))


def _panels(frame):
    """One panel per loss present; just 0-1 and the references when no rank loss ran."""
    return [loss for loss in LOSSES if (frame["loss"] == loss).any()] or ["-"]


def _title(panel):
    return f"{panel} loss" if panel in LOSSES else "0-1 and references"


def _medians(timings, cold, panel):
    """Median seconds per call: rows (n_pos, n_neg), columns the panel's curves; NaN = skipped."""
    mine = cold[cold["loss"].isin((panel,) + SHARED)]
    names = list(dict.fromkeys(mine["curve"]))  # names are unique within a panel
    warm = timings[timings["loss"].isin((panel,) + SHARED)]
    table = warm.groupby(["n_pos", "n_neg", "curve"])["seconds"].median().unstack("curve")
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


def summary(cfg, timings, cold):
    """summary.md: data note, medians, ratios to the paper's baseline and to 0-1, cold calls."""
    parts = [
        f"# Scaling of loss-augmented inference: varying the {cfg['vary']}",
        f"Data: {_data_note(cfg)}. Preset `{cfg['preset']}` (paper 000, Figures 2-3). Each "
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
        parts += [f"## {_title(panel)}", "Median seconds per call:", _size_table(table, SKIPPED)]
        baseline = [(panel, f"the paper's baseline `{panel}`")] if panel in LOSSES else []
        for name, label in baseline + [("0-1", "`0-1`")]:
            if name in table.columns:
                parts += [f"Time relative to {label} (below 1 is faster):",
                          _size_table(table.div(table[name], axis=0), "n/a")]
    first = cold[cold["status"] == "ok"].drop_duplicates(["loss", "curve"])
    warm = timings.groupby(["loss", "curve", "n_pos", "n_neg"])["seconds"].median()
    rows = [[r.curve, r.loss, r.method, str(r.n_pos), str(r.n_neg), f"{r.seconds:.3g}",
             f"{warm[(r.loss, r.curve, r.n_pos, r.n_neg)]:.3g}"] for r in first.itertuples()]
    header = ["curve", "loss", "method", "n_pos", "n_neg", "cold first call (s)", "warm median (s)"]
    parts += ["## Cold first call at the smallest size (numba compile or cache load included)",
              markdown_table(header, rows)]
    return "\n\n".join(parts) + "\n"


def plot(timings, stem):
    """Log-log median seconds per call against the varied count, a panel per loss.

    Writes `stem`.png and `stem`.pdf atomically and returns their paths.
    """
    vary = timings["vary"].iloc[0]
    med = timings.groupby(["loss", "curve", "method", "n_pos", "n_neg"], sort=False)["seconds"]
    med = med.median().reset_index()
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
            ax.plot(line["x"], line["seconds"], marker="o", markersize=3, label=curve,
                    color=COLORS.get(method, "k"), linestyle=style)
        ax.set(xscale="log", yscale="log", xlabel=xlabel, ylabel="median seconds per LAI call",
               title=_title(panel))
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize="small")
    return save_figure(fig, stem)


def plot_run(run_dir):
    """Redraw RUN_DIR/scaling.png and .pdf from RUN_DIR/timings.csv; return their paths."""
    timings = _read_csv(Path(run_dir) / "timings.csv", TIMING_COLUMNS)
    if timings.empty:
        raise ValueError(f"{Path(run_dir) / 'timings.csv'} holds no timings to plot")
    return plot(timings, Path(run_dir) / "scaling")
