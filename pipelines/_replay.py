"""Replaying the LAI calls of a training: the recorded inputs of every call timed again in rounds,
so that a total LAI time (and a ratio of two methods, round by round) is a median with a spread,
not one measurement among the solver's other work. Each round runs in a process of its own
(`round_process`), so that the spread holds what differs between processes too (where the
kernels and arrays land in memory): rounds in the training's process missed a rerun's ratio."""

import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pandas as pd

from qs.inference import Workspace, lai


class Recorder:
    """An ``lai_callback`` keeping a copy of each LAI call's (scores, labels) in ``calls``."""

    def __init__(self):
        self.calls = []

    def __call__(self, scores, labels):
        last = self.calls[-1][1] if self.calls else None
        same = last is not None and last.shape == labels.shape and np.array_equal(last, labels)
        self.calls.append(
            (np.array(scores, dtype=np.float64), last if same else np.array(labels, dtype=bool))
        )


def time_calls(calls, loss, method, workspace):
    """The wall time (s) of each LAI call of `calls` by `method` for `loss`, in order."""
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
    """(median, min, max) over rounds of the ratio of two methods' per-round totals, averaged over
    trainings (`slow`, `fast`: per-training lists as `replay` returns); None when either holds no
    round."""
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
    """Per (slow, fast) pair of `pairs` with shared classes in a frame of one row per training:
    (slow, fast, their rows, the `RATIO_COLUMNS` row of timed and replayed ratios)."""
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
        row = dict(zip(RATIO_COLUMNS, [f"{slow} / {fast}", total, *spread, rounds]))
        yield slow, fast, a, b, row


def round_means(totals):
    """Each round's total averaged over the trainings of `totals`, as an array."""
    rounds = _rounds(totals)
    return rounds.mean(axis=0) if rounds.size else np.zeros(0)


def replay_frame(frame, keys=("class", "method")):
    """replay.csv: one row per training (its `keys`) and round, with that round's total LAI time."""
    rows = [
        (*(r[k] for k in keys), i, t)
        for _, r in frame.iterrows()
        for i, t in enumerate(r["lai_replay_s"])
    ]
    return pd.DataFrame(rows, columns=[*keys, "round", "lai_time_s"])


def spread_text(spread, rounds):
    """'28.2 (27.8-29.8)': a ratio's median and range over replays; '' when not replayed."""
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
