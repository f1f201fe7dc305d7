"""The Markdown and CSV files of a finished VOC2011 action run: timings.csv, Tables 1-4,
ratios.csv and summary.md, the paper's numbers beside ours."""

import pandas as pd

from qs.data import ACTIONS
from qsrank.pipelines import _experiment_common as common
from qsrank.pipelines._io import write_csv, write_text
from qsrank.pipelines._replay import replay_frame
from qsrank.pipelines._tables import (
    CVPR2018,
    FULL_VERSION,
    fmt,
    mark,
    markdown_table,
    ours_label,
    unconverged_note,
)
from qsrank.pipelines.voc2011_actions.config import METHODS
from qsrank.pipelines.voc2011_actions.tables import (
    TIMING_COLUMNS,
    ratios,
    table1,
    table2,
    table3,
    table4,
)

#: Tables 3-4: (what, the paper's source, the methods that train the same weights) per loss
METRIC_TEXT = {
    "ap": (
        "test AP (%, VOC devkit AP, difficult boxes ignored)",
        f"Paper: {CVPR2018}, Table 3 (VOC2011 test set, evaluation server).",
        "ap, ap_qs, ap_search and ap_auto",
    ),
    "ndcg": (
        "test NDCG (%, difficult boxes ignored)",
        f"Paper: {CVPR2018}, Table 4 (its NDCG is the mean over the five "
        "cross-validation folds, not the test set).",
        "ndcg, ndcg_qs and ndcg_auto",
    ),
}


def _setting_line(cfg, frame):
    if frame.empty:
        return ""
    how = "chosen by 5-fold CV per class" if cfg["C"] == "cv" else "fixed per loss"
    if cfg["C"] == "cv" and cfg["cv"]["folds"] != 5:
        how = f"chosen by {cfg['cv']['folds']}-fold CV per class"
    n_conv = int(frame["converged"].sum())
    k = cfg["lai_repeats"]
    replayed = (
        f" Replayed {k}x: each training's LAI calls, recorded as the solver made them, "
        f"timed again in {k} rounds apart from training, each in a process of its own (the "
        "same score vectors in the same order); per method the median over rounds of the "
        "round's mean over classes, and for a ratio its median over rounds with the range "
        "(min-max)."
        if k
        else ""
    )
    return (
        f"Solver {cfg['solver']} (tol {cfg['tol']:g}, max_iter {cfg['max_iter']}); C {how} "
        f"({common.C_text(frame)}). {n_conv} of {len(frame)} trainings converged. Time: wall "
        "time of the LAI calls inside one training per class and method, each timed once "
        f"(numba warmed up beforehand), this machine.{replayed}"
    )


def write_tables(out, records, cfg, note, synthetic):
    """timings.csv, table1-4 .csv/.md, ratios.csv and summary.md from the run records."""
    frame = common.timings_frame(records, TIMING_COLUMNS, METHODS, ACTIONS)
    ours = ours_label(synthetic)
    setting = _setting_line(cfg, frame)
    early = common.unconverged(frame)
    early_methods = set(early["method"])
    write_csv(out / "timings.csv", frame[TIMING_COLUMNS])
    write_csv(out / "replay.csv", replay_frame(frame))
    t1, t2, r = table1(frame), table2(frame), ratios(frame)
    for name, table in (("table1", t1), ("table2", t2), ("ratios", r)):
        write_csv(out / f"{name}.csv", table.assign(data=note))

    def page(title, source, table, *tail):
        return common.paragraphs(title, note, setting, source, table, *tail)

    k = cfg["lai_repeats"]
    ratio_md = markdown_table(
        [
            "ratio",
            f"total time, {ours}",
            *([f"total time, {ours}, replayed {k}x: median (min-max)"] if k else []),
            "total time, paper",
            f"per call, {ours}",
            "per call, paper",
        ],
        [
            [
                row.ratio,
                fmt(row.total_time, 1),
                *([common.replayed_ratio(row)] if k else []),
                fmt(row.paper_total_time, 1),
                fmt(row.per_call, 1),
                fmt(row.paper_per_call, 1),
            ]
            for row in r.itertuples()
        ],
    )
    speed_up = (unconverged_note(len(early)), "Speed-up (baseline time / faster time):", ratio_md)
    texts = {
        "table1": page(
            "# Table 1: total loss-augmented inference time during training (s), mean over classes",
            f"Paper: {CVPR2018}, Table 1 (ap_search: {FULL_VERSION}, Table 2, also quoted in the "
            "CVPR paper's text); blank where the paper has no such method.",
            markdown_table(
                [
                    "method",
                    f"{ours} (s)",
                    *([f"{ours}, replayed {k}x (s)"] if k else []),
                    "paper (s)",
                    "LAI calls (mean)",
                    "classes",
                ],
                [
                    [
                        mark(row.method, row.method in early_methods),
                        fmt(row.lai_time_s, 4),
                        *([fmt(row.lai_replay_median_s, 4)] if k else []),
                        fmt(row.paper_lai_time_s, 4),
                        fmt(row.lai_calls, 1),
                        row.n_classes,
                    ]
                    for row in t1.itertuples()
                ],
            ),
            *speed_up,
        ),
        "table2": page(
            "# Table 2: mean time per loss-augmented inference call (ms)",
            "Ours: each training's mean time per call, then mean ± standard deviation over "
            f"classes. Paper: {CVPR2018}, Table 2 (ap_search: {FULL_VERSION}, Table 3).",
            markdown_table(
                ["method", f"{ours} (ms)", "paper (ms)", "classes"],
                [
                    [
                        mark(row.method, row.method in early_methods),
                        f"{fmt(row.ms_per_call, 3)} ± {fmt(row.ms_per_call_std, 3)}",
                        ""
                        if pd.isna(row.paper_ms_per_call)
                        else f"{row.paper_ms_per_call:g} ± {row.paper_ms_per_call_std:g}",
                        row.n_classes,
                    ]
                    for row in t2.itertuples()
                ],
            ),
            *speed_up,
        ),
    }
    for number, loss, (table, spread) in ((3, "ap", table3(frame)), (4, "ndcg", table4(frame))):
        write_csv(out / f"table{number}.csv", table.assign(data=note))
        what, source, same = METRIC_TEXT[loss]
        md, n_marked = _metric_md(table, loss, ours, early)
        texts[f"table{number}"] = page(
            f"# Table {number}: {what}, 0-1 loss vs {loss} loss",
            source,
            md,
            unconverged_note(n_marked, "cell"),
            f"{same} train to the same weights (exact LAI); the largest difference of the "
            f"metric between them over the classes is {spread:.2g} points.",
        )
    for name, text in texts.items():
        write_text(out / f"{name}.md", text)
    write_text(out / "summary.md", "\n\n".join(texts.values()))


def _metric_md(table, loss, ours, early):
    """Table 3 or 4 as Markdown, and how many cells it marks: those whose training (any
    method of the loss, for the rank-loss column) stopped before converging."""
    cols = list(table.columns)[2:6]
    early_losses = set(zip(early["class"], early["loss"]))
    rows, n_marked = [], 0
    for _, row in table.iterrows():
        cells = [fmt(row[c], 3) for c in cols]
        for i, trained in enumerate(("01", loss)):
            if (row["class"], trained) in early_losses and cells[i]:
                cells[i] = mark(cells[i], True)
                n_marked += 1
        rows.append([row["object_class"], *cells])
    if len(table):
        means = table[cols].mean()
        rows.append(["**mean**", *(fmt(means[c], 3) for c in cols)])
    header = [
        "Object class",
        f"0-1 loss, {ours}",
        f"{loss} loss, {ours}",
        "0-1 loss, paper",
        f"{loss} loss, paper",
    ]
    return markdown_table(header, rows), n_marked
