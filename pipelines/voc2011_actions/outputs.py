"""The Markdown and CSV files of a finished VOC2011 action run: timings.csv, Tables 1-4,
ratios.csv and summary.md, the paper's numbers beside ours."""

import pandas as pd

from qsrank.pipelines._io import write_csv, write_text
from qsrank.pipelines._replay import replay_frame, spread_text
from qsrank.pipelines._tables import (
    CVPR2018,
    FULL_VERSION,
    fmt,
    mark,
    markdown_table,
    ours_label,
    unconverged_note,
)
from qsrank.pipelines.voc2011_actions.tables import (
    TIMING_COLUMNS,
    ratios,
    table1,
    table2,
    table3,
    table4,
    timings_frame,
)


def _setting_line(cfg, frame):
    if frame.empty:
        return ""
    Cs = ", ".join(
        f"{loss}: {'/'.join(f'{c:g}' for c in sorted(set(g['C'])))}"
        for loss, g in frame.groupby("loss", sort=False)
    )
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
        f"({Cs}). {n_conv} of {len(frame)} trainings converged. Time: wall time of the "
        "LAI calls inside one training per class and method, each timed once (numba "
        f"warmed up beforehand), this machine.{replayed}"
    )


def write_tables(out, records, cfg, note, synthetic):
    """timings.csv, table1-4 .csv/.md, ratios.csv and summary.md from the run records."""
    frame = timings_frame(records)
    ours = ours_label(synthetic)
    setting = _setting_line(cfg, frame)
    early = frame[~frame["converged"].astype(bool)] if len(frame) else frame
    early_methods = set(early["method"]) if len(early) else set()
    write_csv(out / "timings.csv", frame[TIMING_COLUMNS])
    write_csv(out / "replay.csv", replay_frame(frame))

    t1, t2 = table1(frame), table2(frame)
    r = ratios(frame)
    t3, spread_ap = table3(frame)
    t4, spread_ndcg = table4(frame)
    for name, table in (
        ("table1", t1),
        ("table2", t2),
        ("ratios", r),
        ("table3", t3),
        ("table4", t4),
    ):
        write_csv(out / f"{name}.csv", table.assign(data=note))

    k = cfg["lai_repeats"]
    replay_head = [f"total time, {ours}, replayed {k}x: median (min-max)"] if k else []
    ratio_md = markdown_table(
        [
            "ratio",
            f"total time, {ours}",
            *replay_head,
            "total time, paper",
            f"per call, {ours}",
            "per call, paper",
        ],
        [
            [
                row.ratio,
                fmt(row.total_time, 1),
                *(
                    [
                        spread_text(
                            (row.replay_median, row.replay_min, row.replay_max), row.replay_rounds
                        )
                    ]
                    if k
                    else []
                ),
                fmt(row.paper_total_time, 1),
                fmt(row.per_call, 1),
                fmt(row.paper_per_call, 1),
            ]
            for row in r.itertuples()
        ],
    )

    def time_md(title, source, table):
        return (
            "\n\n".join(
                filter(
                    None,
                    [
                        title,
                        note,
                        setting,
                        source,
                        table,
                        unconverged_note(len(early)),
                        "Speed-up (baseline time / faster time):",
                        ratio_md,
                    ],
                )
            )
            + "\n"
        )

    md1 = time_md(
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
    )
    md2 = time_md(
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
    )
    md3 = _metric_md(
        3,
        "test AP (%, VOC devkit AP, difficult boxes ignored)",
        "ap",
        t3,
        spread_ap,
        note,
        setting,
        ours,
        early,
        f"Paper: {CVPR2018}, Table 3 (VOC2011 test set, evaluation server).",
        "ap, ap_qs, ap_search and ap_auto",
    )
    md4 = _metric_md(
        4,
        "test NDCG (%, difficult boxes ignored)",
        "ndcg",
        t4,
        spread_ndcg,
        note,
        setting,
        ours,
        early,
        f"Paper: {CVPR2018}, Table 4 (its NDCG is the mean over the five "
        "cross-validation folds, not the test set).",
        "ndcg, ndcg_qs and ndcg_auto",
    )
    for name, text in (("table1", md1), ("table2", md2), ("table3", md3), ("table4", md4)):
        write_text(out / f"{name}.md", text)
    write_text(out / "summary.md", f"{md1}\n\n{md2}\n\n{md3}\n\n{md4}")


def _metric_md(number, what, loss, table, spread, note, setting, ours, early, paper_src, same):
    """Table 3 or 4 as Markdown; a cell whose training (any of the methods of the loss, for
    the rank-loss column) stopped before converging is marked."""
    cols = list(table.columns)
    early_losses = set(zip(early["class"], early["loss"]))
    n_marked = 0
    rows = []
    for _, row in table.iterrows():
        cells = [fmt(row[c], 3) for c in cols[2:6]]
        for i, trained in enumerate(("01", loss)):
            if (row["class"], trained) in early_losses and cells[i]:
                cells[i] = mark(cells[i], True)
                n_marked += 1
        rows.append([row["object_class"], *cells])
    if len(table):
        means = table[cols[2:6]].mean()
        rows.append(["**mean**", *(fmt(means[c], 3) for c in cols[2:6])])
    header = [
        "Object class",
        f"0-1 loss, {ours}",
        f"{loss} loss, {ours}",
        "0-1 loss, paper",
        f"{loss} loss, paper",
    ]
    return (
        "\n\n".join(
            filter(
                None,
                [
                    f"# Table {number}: {what}, 0-1 loss vs {loss} loss",
                    note,
                    setting,
                    paper_src,
                    markdown_table(header, rows),
                    unconverged_note(n_marked, "cell"),
                    (
                        f"{same} train to the same weights (exact LAI); the largest difference of the "
                        f"metric between them over the classes is {spread:.2g} points."
                    ),
                ],
            )
        )
        + "\n"
    )
