"""The scaling benchmark's curves, clocks and sizes, and its config schema."""

import os
import time
from typing import Literal

import numpy as np
from pydantic import conint, model_validator

from qs.inference import METHODS
from qsrank.pipelines import _config
from qsrank.pipelines import _schema as S
from qsrank.pipelines._sizes import size_pairs

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
# Outside reference of `vary: share`, timed on all the scores that lai gets (loss column "-"):
# the order of the scores that an exact LAI has to learn, by numpy's argsort.
SHARE_REFERENCES = {"np.argsort": np.argsort}
# `vary: share`: the default (through lai, and lai_batch on one query: "batch"), every other
# exact method linear up to logarithms (no O(NP) scans), and the 0-1 LAI.
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
    ("-", "np.argsort", "np.argsort"),
)
CURVE_NAMES = tuple(
    dict.fromkeys([c[1] for c in LAI_CURVES] + list(REFERENCES) + [c[1] for c in SHARE_CURVES])
)
SHARED = ("01", "-")  # loss column of the curves drawn beside every loss: 0-1 and references
QUADRATIC = frozenset({"yue", "chakrabarti"})  # O(NP) scans; all else predicted linear in N + P
COLORS = {
    "zero_one": "C0",
    "yue": "C1",
    "chakrabarti": "C1",
    "qs": "C2",
    "search": "C3",
    "auto": "C4",
    "sort_dc": "C5",
    "bucket": "C6",
    "bucket_sort": "k",
    "batch": "C4",
    "np.max": "C7",
    "np.partition": "C8",
    "np.sort": "C9",
    "np.argsort": "C9",
}
SKIPPED = "skipped (budget)"
#: the figures' legend names of the paper's baselines, which the curve names give as the loss
LABELS = {"ap": "ap (Yue et al.)", "ndcg": "ndcg (Chakrabarti et al.)"}
# What a sample measures. On a shared machine, wall time inflates calls longer than the
# scheduler's time slice, and so the ratios; CPU time (of all threads) does not wait.
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}
SAMPLE_S = 2e-3  # seconds of back-to-back calls per timed sample (one call if longer)
# Each call reads the next of a rotation of score vectors of one size, at least ROTATION_BYTES
# (beyond the caches and the branch predictor) and MIN_INPUTS: training never repeats an input.
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
PRESETS = {
    "paper": {
        "negatives": {"fixed": 227, "start": 2270, "stop": 1000000, "points": 8},
        "positives": {"fixed": 200, "start": 20, "stop": 2000, "points": 8},
        "total": {"neg_per_pos": 10, "start": 2497, "stop": 1100000, "points": 8},
        "share": {
            "negatives": [1000, 10000, 100000, 1000000, 10000000],
            "shares": [0.0001, 0.001, 0.01, 0.05, 0.2, 0.5],
        },
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
}
PRESETS_EXPECTED = (
    "per preset name, a mapping of negatives, positives and total ({fixed or "
    "neg_per_pos, start, stop, points}: counts >= 1) and share ({negatives: "
    "counts >= 1, shares: numbers > 0})"
)


class Scores(S.Section):
    pos_mean: S.real() = S.key(1.0, "mean of the positives' normal scores")
    pos_std: S.real(gt=0) = S.key(1.0, "their standard deviation")
    neg_mean: S.real() = S.key(0.0, "mean of the negatives' normal scores")
    neg_std: S.real(gt=0) = S.key(1.0, "their standard deviation")


class Config(S.Section):
    """The scaling benchmark: every key a config may set; configs/scaling.yaml sets a few."""

    seed: conint(ge=0) = S.key(0, "seed of the synthetic scores")
    vary: Literal[tuple(VARIES)] = S.key(
        "negatives", "which count grows (share: the grid of negatives x share of positives)"
    )
    loss: Literal[tuple(LOSSES + ("all",))] = S.key("all", "the losses timed")
    methods: S.names(CURVE_NAMES) | None = S.key(
        None, "curves to time; null: every curve of the losses"
    )
    repeats: conint(ge=1) = S.key(5, "warm timed samples per size and curve")
    preset: str = S.key("paper", "the sizes: a name in presets")
    budget_s: S.real(gt=0) = S.key(
        10.0, "skip a curve once a call is predicted to take longer (seconds)"
    )
    clock: Literal[tuple(CLOCKS)] = S.key("wall", "wall, or cpu: the process's CPU time")
    scores: Scores = S.key(Scores, "the synthetic scores")
    presets: S.presets(
        PRESETS,
        SPEC_KEYS,
        {"shares": S.distinct(S.real(gt=0)), "negatives": S.distinct(conint(ge=1))},
        PRESETS_EXPECTED,
    ) = S.key(PRESETS, "per preset and vary: how the sizes are spaced")

    @model_validator(mode="after")
    def _consistent(self):
        cfg = self.model_dump()
        if cfg["preset"] not in cfg["presets"]:
            raise ValueError(
                f"preset: expected one of {', '.join(cfg['presets'])}; got {S.shown(cfg['preset'])}"
            )
        if not curves(cfg):
            raise ValueError(f"methods {cfg['methods']} select no curve for loss {cfg['loss']!r}")
        for loss, name, method in curves(cfg):
            if loss != "-" and method != "batch" and loss not in METHODS.get(method, ()):
                raise ValueError(
                    f"curve {name!r} needs lai method {method!r} with loss "
                    f"{loss!r}, which qs.inference does not offer"
                )
        sizes(cfg)
        return self


def load_config(path=None, **overrides):
    """The defaults updated by the YAML file at `path`, then the non-None `overrides`; checked."""
    return _config.load_config(path, {}, resolve, overrides)


def resolve(config):
    """The defaults updated by `config`; a one-line ValueError naming any bad key or value."""
    return S.validate(Config, config)


def curves(cfg):
    """The (loss, curve, method) triples to time, in table order."""
    losses = LOSSES if cfg["loss"] == "all" else (cfg["loss"],)
    if cfg["vary"] == "share":
        chosen = [c for c in SHARE_CURVES if c[0] in losses + SHARED]
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
    if vary == "share":
        pairs = [
            (max(1, round(share * n)), n) for n in spec["negatives"] for share in spec["shares"]
        ]
        return list(dict.fromkeys(pairs))  # small N: several shares round to one P
    grid = np.geomspace(spec["start"], spec["stop"], spec["points"])
    grid = [int(v) for v in np.unique(np.rint(grid).astype(np.int64))]
    pairs = size_pairs(vary, spec, grid, where)
    _check_memory(pairs, where)
    return pairs


def rotation_count(n):
    """How many score vectors of `n` scores a rotation holds (see ROTATION_BYTES)."""
    return int(np.clip(-(-ROTATION_BYTES // (8 * n)), MIN_INPUTS, MAX_INPUTS))


def _check_memory(pairs, where):
    """Refuse sizes whose score vectors exceed the machine's memory, before smaller sizes run."""
    n_pos, n_neg = max(pairs, key=sum)
    n = n_pos + n_neg
    need = rotation_count(n) * 8 * (n + n_neg) + n
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # not POSIX: the MemoryError will say it
        return
    if need > total:
        raise ValueError(
            f"{where}: the largest size ({n_pos} positives, {n_neg} negatives) "
            f"needs about {need / 1e9:,.0f} GB for its scores, more than this "
            f"machine's {total / 1e9:,.0f} GB of memory; lower its stop"
        )
