"""The scaling benchmark's timing: seeded score vectors in a rotation, a cold call and rounds of
warm samples per curve and size."""

import itertools

import numpy as np
import pandas as pd
from tqdm import tqdm

from qs.inference import lai
from qs.inference.batch import lai_batch
from qsrank.pipelines._measure import clock
from qsrank.pipelines.scaling.config import (
    CLOCKS,
    COLD_COLUMNS,
    QUADRATIC,
    REFERENCES,
    REUSED_OUTPUTS,
    SAMPLE_S,
    SHARE_REFERENCES,
    SKIPPED,
    TIMING_COLUMNS,
    rotation_count,
)


def make_data(cfg, n_pos, n_neg):
    """Seeded synthetic score vectors (the rotation) and their shuffled 1/0 labels."""
    n = n_pos + n_neg
    rng = np.random.default_rng([cfg["seed"], n_pos, n_neg])
    s = cfg["scores"]
    labels = np.repeat(np.array([1, 0], dtype=np.int8), [n_pos, n_neg])
    order = rng.permutation(n)
    rotation = []
    for _ in range(rotation_count(n)):
        scores = np.concatenate(
            [
                rng.normal(s["pos_mean"], s["pos_std"], n_pos),
                rng.normal(s["neg_mean"], s["neg_std"], n_neg),
            ]
        )
        rotation.append(scores[order])
    return rotation, labels[order]


def data_note(cfg):
    s = cfg["scores"]
    return (
        f"synthetic scores, not the paper's data: positives ~ N({s['pos_mean']:g}, "
        f"{s['pos_std']:g}^2), negatives ~ N({s['neg_mean']:g}, {s['neg_std']:g}^2), "
        f"seed {cfg['seed']}"
    )


def time_all(cfg, chosen, pairs, progress):
    """`time_grid` in table order: round robin over the curves (a slow spell hits all alike), each
    sample about SAMPLE_S of back-to-back calls after an untimed call."""
    return time_grid(
        cfg, chosen, pairs, progress, predict=_predicted, repeats=lambda n_neg: cfg["repeats"]
    )


def time_grid(cfg, chosen, pairs, progress, *, predict, repeats, rng=None, group=None):
    """Every curve at every size: a cold call (skipped, with larger sizes, when `predict` from the
    curve's largest timed size in its `group` exceeds the budget), then `repeats(n_neg)` rounds
    of a warm sample per curve, shuffled per round with `rng`. (timings, cold) frames."""
    rows, cold = [], []
    last = {}  # (curve, group) -> (n_pos, n_neg, median seconds) at its largest timed size
    references = any(curve[1] in REFERENCES for curve in chosen)
    with tqdm(
        total=len(pairs) * len(chosen),
        desc=f"bench {cfg['vary']}",
        unit="curve",
        disable=not progress,
    ) as bar:
        for n_pos, n_neg in pairs:
            which = group(n_pos, n_neg) if group else None
            rotation, labels = make_data(cfg, n_pos, n_neg)
            negatives = [s[labels == 0] for s in rotation] if references else None
            calls = {}
            for curve in chosen:
                loss, name, method = curve
                bar.set_postfix_str(f"{name} P={n_pos} N={n_neg} (cold)")
                key = {
                    "vary": cfg["vary"],
                    "loss": loss,
                    "curve": name,
                    "method": method,
                    "n_pos": n_pos,
                    "n_neg": n_neg,
                }
                if predict(last.get((curve, which)), method, n_pos, n_neg) > cfg["budget_s"]:
                    cold.append({**key, "seconds": np.nan, "status": SKIPPED})
                    bar.update()
                    continue
                call = caller(curve, rotation, labels, negatives)
                cold.append({**key, "seconds": clock(call), "status": "ok"})
                calls[curve] = key, call, max(1, min(1000, int(SAMPLE_S / clock(call))))
            warm = {curve: [] for curve in calls}
            for _ in range(repeats(n_neg)):
                order = (
                    list(calls)
                    if rng is None
                    else [list(calls)[t] for t in rng.permutation(len(calls))]
                )
                for curve in order:
                    _, call, number = calls[curve]
                    if rng is None or number > 1:
                        call()  # untimed: warm, as in back-to-back calls
                    warm[curve].append(clock(call, number, CLOCKS[cfg["clock"]]))
            for curve, (key, _, _) in calls.items():
                rows += [{**key, "repeat": r, "seconds": t} for r, t in enumerate(warm[curve])]
                last[curve, which] = (n_pos, n_neg, float(np.median(warm[curve])))
                bar.update()
            del rotation, negatives
    return pd.DataFrame(rows, columns=TIMING_COLUMNS), pd.DataFrame(cold, columns=COLD_COLUMNS)


def _predicted(last, method, n_pos, n_neg):
    """Seconds per call extrapolated from the curve's largest timed size (0 if none yet)."""
    if last is None:
        return 0.0
    p0, n0, seconds = last
    if method in QUADRATIC:
        return seconds * (n_pos * n_neg) / (p0 * n0)
    return seconds * (n_pos + n_neg) / (p0 + n0)


def caller(curve, rotation, labels, negatives):
    """The curve's call, on the next input of the rotation at each call."""
    loss, name, method = curve
    if name in REFERENCES:
        fn, following = REFERENCES[name], itertools.cycle(negatives)
        return lambda: fn(next(following))
    following = itertools.cycle(rotation)
    if name in SHARE_REFERENCES:
        fn = SHARE_REFERENCES[name]
        return lambda: fn(next(following))
    if method == "batch":
        rows = labels[None]
        return lambda: lai_batch(next(following)[None], rows, loss=loss)
    if name in REUSED_OUTPUTS:
        out = np.empty(negatives[0].size, dtype=np.int32), np.empty(labels.size)
        return lambda: lai(next(following), labels, loss=loss, method=method, out=out)
    return lambda: lai(next(following), labels, loss=loss, method=method)
