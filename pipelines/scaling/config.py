"""The scaling benchmark's curves, clocks and sizes: its built-in defaults, every key a config
may set, and their checks."""

import os
import time

import numpy as np

from pipelines import _config
from pipelines._config import check_choice, check_keys, check_mapping, check_number, merge
from pipelines._sizes import size_pairs
from pipelines._yaml import shown
from qs.inference import METHODS

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
    """Refuse sizes whose score vectors (`timing.make_data`: the rotation and its negatives)
    exceed the machine's memory, up front rather than as a MemoryError after the smaller sizes
    ran."""
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
