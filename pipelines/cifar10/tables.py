"""table.md and results.csv of a finished run: test mean AP and NDCG and the training times
per method, the paper's numbers beside ours."""

import numpy as np
import pandas as pd

from qsrank.pipelines._experiment_common import paragraphs
from qsrank.pipelines._images import is_digits
from qsrank.pipelines._tables import CVPR2018, cell, markdown_table
from qsrank.pipelines.cifar10.config import (
    METHODS,
    PAPER_HOURS,
    PAPER_MAP,
    PAPER_NDCG,
    WARM_OPTIMIZERS,
    WARM_PHASES,
)


def results_frame(history, methods, step_s):
    """One row per method: its final epoch's metrics and cumulative times, and the median
    and quartiles of its measured step times (`step_s`: phase -> each step's seconds)."""
    last = history.groupby("phase", sort=False).tail(1).set_index("phase")
    rows = []
    for name in methods:
        loss, inference = METHODS[name]
        r = last.loc[name]
        rows.append(
            {
                "method": name,
                "loss": loss,
                "inference": inference,
                "test_map": r.test_map,
                "test_ndcg": r.test_ndcg,
                "val_map": r.val_map,
                "val_ndcg": r.val_ndcg,
                "units": int(r.unit),
                "steps": int(r.steps),
                "train_s": r.train_s,
                "lai_s": r.lai_s,
                **dict(
                    zip(
                        ("step_ms_q1", "step_ms_median", "step_ms_q3"),
                        1e3 * np.quantile(step_s[name] or [np.nan], [0.25, 0.5, 0.75]),
                    )
                ),
                "lai_ms_per_step": 1e3 * r.lai_s / r.steps,
                "paper_map": PAPER_MAP.get(loss),
                "paper_ndcg": PAPER_NDCG.get(loss),
                "paper_train_h": PAPER_HOURS.get(name),
            }
        )
    return pd.DataFrame(rows)


def _training_text(cfg):
    if cfg["training"] == "layerwise":
        lw = cfg["layerwise"]
        return (
            f"{cfg['epochs']} sweep(s) of the layer-wise SVM training over the 7 layers, "
            f"last first (block-coordinate Frank-Wolfe, {lw['passes']} pass(es) per layer, "
            f"C {lw['C']:g}, proximal weight {lw['proximal']:g}, batch norm frozen)"
        )
    return (
        f"{cfg['epochs']} epochs of end-to-end SGD on its structured hinge (lr "
        f"{cfg['lr']:g}, momentum {cfg['momentum']:g}, weight decay "
        f"{cfg['weight_decay']:g}, batch norm {'frozen' if cfg['freeze_bn'] else 'trained'})"
    )


def summary(cfg, note, results, history, warm_test, n_params):
    """table.md: the data, the settings, test metrics and times beside the paper's."""
    ours = "ours (digits-as-CIFAR, not CIFAR-10)" if is_digits(note) else "ours (CIFAR-10)"
    warm = history[history.phase.isin(WARM_PHASES)]
    warm_s = float(warm.groupby("phase").train_s.max().sum()) if len(warm) else 0.0
    warm_map, warm_ndcg = (cell(100 * v, ".2f") for v in warm_test)
    metrics = [["warm start", "-", "-", warm_map, "-", warm_ndcg, "-"]] + [
        [
            r.method,
            r.loss,
            r.inference,
            cell(100 * r.test_map, ".2f"),
            cell(r.paper_map, ".2f"),
            cell(100 * r.test_ndcg, ".2f"),
            cell(r.paper_ndcg, ".2f"),
        ]
        for r in results.itertuples()
    ]
    times = [
        [
            r.method,
            r.inference,
            r.steps,
            cell(r.train_s, ".2f"),
            f"{r.step_ms_median:.1f} [{r.step_ms_q1:.1f}, {r.step_ms_q3:.1f}]",
            cell(r.lai_s, ".3f"),
            cell(100 * r.lai_s / r.train_s, ".2f"),
            cell(r.lai_ms_per_step, ".3f"),
            cell(r.paper_train_h, ".3f"),
        ]
        for r in results.itertuples()
    ]
    ws = cfg["warm_start"]
    return paragraphs(
        f"# CIFAR-10 experiment ({CVPR2018}, Section 4.3): 0-1 vs AP vs NDCG training of "
        "the PL-CNN",
        f"Data: {note}."
        + (
            " **Not the paper's data**: the paper's numbers stand beside ours for orientation only."
            if is_digits(note)
            else ""
        ),
        f"Network: PL-CNN, widths {cfg['widths']}, {n_params:,} parameters. Warm start: "
        f"{ws['cross_entropy_epochs']} cross-entropy + {ws['hinge_epochs']} multi-class hinge "
        f"epochs of {WARM_OPTIMIZERS[ws['optimizer']]} (lr {ws['lr']:g}); then per method "
        f"{_training_text(cfg)}, one ranking per class per mini-batch of "
        f"{cfg['batch_size']}. The paper trains layer-wise on CIFAR-10; its numbers are in "
        "the `paper` columns.",
        "## Test mean AP and mean NDCG over the 10 classes (%)",
        markdown_table(
            ["method", "loss", "LAI", f"mAP {ours}", "mAP paper", f"NDCG {ours}", "NDCG paper"],
            metrics,
        ),
        "## Training time per method",
        f"Steps only (evaluation apart), this run's hardware; the warm start took {warm_s:.2f} s "
        "more. `train s`: the sum of the measured times of the steps of one training (one "
        "measurement); `step ms`: the median step time, its quartiles in brackets. LAI time: "
        "inside `rank_hinge_loss` (exact LAI of the 10 queries of each mini-batch), numba "
        "compiled beforehand. The paper's hours are for its layer-wise training on CIFAR-10 "
        "with a GPU.",
        markdown_table(
            [
                "method",
                "LAI",
                "steps",
                "train s",
                "step ms",
                "LAI s",
                "LAI % of train",
                "LAI ms/step",
                "paper train h",
            ],
            times,
        ),
    )
