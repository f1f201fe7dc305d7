"""Tables 1-4 of a finished run as frames, the paper's numbers beside ours: LAI time in total
and per call, their speed-ups, test AP and NDCG per class (`outputs` writes them)."""

import numpy as np
import pandas as pd

from qsrank.pipelines._replay import RATIO_COLUMNS, ratio_rows, round_means
from qsrank.pipelines.voc2011_actions.paper import (
    CLASS_NAMES,
    PAPER_AP,
    PAPER_MS_PER_CALL,
    PAPER_NDCG,
    PAPER_TOTAL_S,
)

#: (baseline, faster) pairs whose time ratio the tables report; the first two are the paper's
RATIOS = (
    ("ap", "ap_qs"),
    ("ndcg", "ndcg_qs"),
    ("ap", "ap_search"),
    ("ap", "ap_auto"),
    ("ndcg", "ndcg_auto"),
)

#: the columns of timings.csv; the frame also holds ``lai_replay_s``, each training's list of
#: replayed totals (written long, to replay.csv)
TIMING_COLUMNS = [
    "class",
    "method",
    "loss",
    "inference",
    "solver",
    "C",
    "C_from",
    "n_train",
    "n_pos",
    "lai_calls",
    "lai_time_s",
    "lai_replay_median_s",
    "lai_ms_per_call",
    "n_iter",
    "converged",
    "test_ap",
    "test_ndcg",
    "cv_ap",
    "cv_ndcg",
    "train_s",
]


def table1(frame):
    """Total LAI time per training (s), averaged over classes, per method: as timed in
    training, and replayed (the median over rounds of the round's mean over classes)."""
    g = frame.groupby("method", sort=False)
    replayed = [round_means(t) for _, t in g["lai_replay_s"]]
    methods = pd.Series(list(g.groups))
    return pd.DataFrame(
        {
            "method": methods,
            "lai_time_s": g["lai_time_s"].mean().to_numpy(),
            "lai_replay_median_s": [np.median(r) if r.size else np.nan for r in replayed],
            "paper_lai_time_s": methods.map(PAPER_TOTAL_S),
            "lai_calls": g["lai_calls"].mean().to_numpy(),
            "n_classes": g["class"].nunique().to_numpy(),
        }
    )


def table2(frame):
    """Mean ms per LAI call (per training, then mean and std over classes), per method."""
    g = frame.groupby("method", sort=False)["lai_ms_per_call"]
    paper = [PAPER_MS_PER_CALL.get(m, (None, None)) for m in g.groups]
    return pd.DataFrame(
        {
            "method": list(g.groups),
            "ms_per_call": g.mean().to_numpy(),
            "ms_per_call_std": g.std(ddof=0).to_numpy(),
            "paper_ms_per_call": [p[0] for p in paper],
            "paper_ms_per_call_std": [p[1] for p in paper],
            "n_classes": g.count().to_numpy(),
        }
    )


def ratios(frame):
    """Baseline / faster time ratios, ours and the paper's, total and per call; ours over the
    classes both methods were trained on (a partial run may lack some)."""
    rows = []
    for slow, fast, a, b, row in ratio_rows(frame, RATIOS):
        paper_total = PAPER_TOTAL_S[slow] / PAPER_TOTAL_S[fast] if fast in PAPER_TOTAL_S else None
        paper_call = (
            PAPER_MS_PER_CALL[slow][0] / PAPER_MS_PER_CALL[fast][0]
            if fast in PAPER_MS_PER_CALL
            else None
        )
        rows.append(
            {
                **row,
                "paper_total_time": paper_total,
                "per_call": a["lai_ms_per_call"].mean() / b["lai_ms_per_call"].mean(),
                "paper_per_call": paper_call,
            }
        )
    columns = [*RATIO_COLUMNS, "paper_total_time", "per_call", "paper_per_call"]
    return pd.DataFrame(rows, columns=columns)


def _metric_table(frame, loss, rank_methods, paper):
    """Per class: the 0-1 SVM's and the `loss` SVM's test metric (%, the first of
    `rank_methods` trained), the paper's beside; and the largest spread among those methods."""
    rows, spread = [], 0.0
    for action in dict.fromkeys(frame["class"]):
        mine = frame[frame["class"] == action].set_index("method")[f"test_{loss}"]
        zero_one = mine.get("0-1")
        ranked = [mine[m] for m in rank_methods if m in mine.index]
        if len(ranked) > 1:
            spread = max(spread, float(np.ptp(ranked)))
        if zero_one is None and not ranked:
            continue
        rows.append(
            [
                action,
                CLASS_NAMES[action],
                None if zero_one is None else 100 * zero_one,
                100 * ranked[0] if ranked else None,
                *paper[action],
            ]
        )
    columns = [f"{loss}_0-1", f"{loss}_{loss}"]
    out = pd.DataFrame(
        rows, columns=["class", "object_class", *columns, *(f"paper_{c}" for c in columns)]
    )
    return out, 100 * spread


def table3(frame):
    return _metric_table(frame, "ap", ("ap_qs", "ap", "ap_search", "ap_auto"), PAPER_AP)


def table4(frame):
    return _metric_table(frame, "ndcg", ("ndcg_qs", "ndcg", "ndcg_auto"), PAPER_NDCG)
