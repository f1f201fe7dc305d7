"""Replaying the LAI calls of a training: the inputs of every call, recorded as the solver makes
them, timed again in rounds, so that a training's total LAI time is a median with a spread
over rounds rather than one measurement.

A training runs once and its LAI calls are timed once, among the solver's other work and
whatever else loads the machine; a ratio of two such totals moves from run to run by more
than the rounding of a table. Replaying the recorded calls (the same score vectors, in
training's order, each method writing into its own workspace as in training) isolates the
LAI time and repeats it: each round gives a total, and a ratio of two methods is taken round
by round (`ratio_spread`). Each round runs in a process of its own (`round_process`), so
that the spread also holds what differs from one process to the next (where the compiled
kernels and the arrays land in memory), which rounds in the training's process did not show:
a rerun's ratio fell outside their range. The replay benchmark (`qsrank bench --replay`)
times its calls with `time_calls` too.
"""

import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pandas as pd

from qs.inference import Workspace, lai


class Recorder:
    """An ``lai_callback`` (:class:`qs.estimators.RankSVM`, ``LatentRankSVM``) that keeps a
    copy of the inputs of every LAI call: ``calls``, a list of (scores, labels)."""

    def __init__(self):
        self.calls = []

    def __call__(self, scores, labels):
        last = self.calls[-1][1] if self.calls else None
        same = last is not None and last.shape == labels.shape and np.array_equal(last, labels)
        self.calls.append(
            (np.array(scores, dtype=np.float64), last if same else np.array(labels, dtype=bool))
        )


def time_calls(calls, loss, method, workspace):
    """The wall time (s) of each LAI call of `calls` ((scores, labels) pairs), in order, by
    `method` for `loss`, writing into `workspace`."""
    seconds = []
    for scores, labels in calls:
        start = time.perf_counter()
        lai(scores, labels, loss, method, workspace=workspace)
        seconds.append(time.perf_counter() - start)
    return seconds


#: the processes of the rounds, started when first needed and kept for the next trainings
_PROCESSES: list[ProcessPoolExecutor] = []


def round_process(k):
    """The process that times round `k` of every replay: one spawned process per round, the
    same for all trainings of a run, so that round k of two methods compares like with like."""
    while len(_PROCESSES) <= k:
        spawn = multiprocessing.get_context("spawn")
        _PROCESSES.append(ProcessPoolExecutor(max_workers=1, mp_context=spawn))
    return _PROCESSES[k]


def _round(calls, loss, method):
    """One round's total LAI time (s), after one untimed call that loads the kernels."""
    workspace = Workspace()  # as a solver holds one
    lai(*calls[0], loss, method, workspace=workspace)
    return float(sum(time_calls(calls, loss, method, workspace)))


def replay(calls, loss, method, rounds):
    """The total LAI time (s) of `calls` in each of `rounds` rounds (a list), each round in
    its own process (`round_process`), one after another."""
    if not calls or rounds < 1:
        return []
    return [round_process(k).submit(_round, calls, loss, method).result() for k in range(rounds)]


def ratio_spread(slow, fast):
    """(median, min, max) over rounds of the ratio of two methods' total LAI times, each
    round's totals first averaged over the trainings (classes) both ran; `slow`, `fast`:
    sequences of per-training lists of per-round totals (as :func:`replay` returns them).
    None when either holds no round."""
    slow, fast = _rounds(slow), _rounds(fast)
    k = min(slow.shape[1], fast.shape[1]) if slow.size and fast.size else 0
    if k == 0:
        return None
    ratios = slow[:, :k].mean(axis=0) / fast[:, :k].mean(axis=0)
    return float(np.median(ratios)), float(ratios.min()), float(ratios.max())


#: the columns of a ratio row (`ratio_rows`), first in each experiment's ratios.csv
RATIO_COLUMNS = [
    "ratio",
    "total_time",
    "replay_median",
    "replay_min",
    "replay_max",
    "replay_rounds",
]


def ratio_rows(frame, pairs):
    """Per (slow, fast) method pair of `pairs` with classes both trained on, in a frame of one
    row per training (``class``, ``method``, ``lai_time_s``, ``lai_replay_s``): (slow, fast,
    the trainings of each on those classes, the row of `RATIO_COLUMNS`): the ratio of the
    mean total LAI times as timed in training and replayed (median, min, max over rounds)."""
    for slow, fast in pairs:
        a = frame[frame["method"] == slow].set_index("class")
        b = frame[frame["method"] == fast].set_index("class")
        shared = a.index.intersection(b.index)
        if shared.empty:
            continue
        a, b = a.loc[shared], b.loc[shared]
        spread = ratio_spread(a["lai_replay_s"], b["lai_replay_s"]) or (None, None, None)
        rounds = min(map(len, [*a["lai_replay_s"], *b["lai_replay_s"]]))
        total = a["lai_time_s"].mean() / b["lai_time_s"].mean()
        yield (
            slow,
            fast,
            a,
            b,
            dict(zip(RATIO_COLUMNS, [f"{slow} / {fast}", total, *spread, rounds])),
        )


def round_means(totals):
    """Each round's total averaged over the trainings of `totals` (per-training lists of
    per-round totals), as an array; empty when none was replayed."""
    rounds = _rounds(totals)
    return rounds.mean(axis=0) if rounds.size else np.zeros(0)


def replay_frame(frame, keys=("class", "method")):
    """replay.csv: one row per training (its `keys`) and round, with that round's total LAI
    time (``lai_time_s``), from a frame whose ``lai_replay_s`` holds each training's list."""
    rows = [
        (*(r[k] for k in keys), i, t)
        for _, r in frame.iterrows()
        for i, t in enumerate(r["lai_replay_s"])
    ]
    return pd.DataFrame(rows, columns=[*keys, "round", "lai_time_s"])


def spread_text(spread, rounds):
    """'28.2 (27.8-29.8)': a ratio's median over `rounds` replays and its range; '' when the
    calls were not replayed."""
    if spread is None or not rounds or any(pd.isna(v) for v in spread):
        return ""
    return f"{spread[0]:.1f} ({spread[1]:.1f}-{spread[2]:.1f})"


def _rounds(totals):
    """Per-training lists of totals as a (trainings, rounds) array, cut to the fewest rounds."""
    totals = [list(t) for t in totals if t is not None and len(t)]
    if not totals:
        return np.zeros((0, 0))
    k = min(len(t) for t in totals)
    return np.array([t[:k] for t in totals], dtype=np.float64)
