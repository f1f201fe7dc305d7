"""Table 5 of a finished run, the paper's numbers beside ours: test detection AP per class and
the total LAI time of each AP method, with the time ratios replayed (ratios.csv, replay.csv)."""

from pathlib import Path

import numpy as np
import pandas as pd

from qs.data.voc2007 import CLASSES
from qsrank.pipelines import _experiment_common as common
from qsrank.pipelines._io import read_csv, run_data_note, write_csv, write_text
from qsrank.pipelines._replay import RATIO_COLUMNS, ratio_rows, replay_frame
from qsrank.pipelines._tables import (
    CVPR2018,
    fmt,
    mark,
    markdown_table,
    ours_label,
    unconverged_note,
)
from qsrank.pipelines.voc2007_detection.config import (
    AP_METHODS,
    CLASS_NAMES,
    LAI_NAMES,
    METHODS,
    PAPER_AP,
    PAPER_LAI_S,
    RATIOS,
)
from qsrank.pipelines.voc2007_detection.figures import plot

TIMING_COLUMNS = [
    "class",
    "method",
    "loss",
    "inference",
    "C",
    "n_images",
    "n_pos",
    "n_boxes",
    "lai_calls",
    "lai_time_s",
    "train_s",
    "n_outer",
    "n_iter",
    "converged",
    "passes",
    "working_set",
    "test_ap",
    "w_sha256",
]


def ap_table(frame):
    """Per class: test AP (%) of the latent 0-1 SVM and AP-SVM, the paper's beside, and
    whether the AP methods trained for the class gave bit-identical weights."""
    rows = []
    for cls in dict.fromkeys(frame["class"]):
        mine = frame[frame["class"] == cls].set_index("method")
        ap = [m for m in AP_METHODS if m in mine.index]
        if "0-1" not in mine.index and not ap:
            continue
        rows.append(
            {
                "class": cls,
                "object_class": CLASS_NAMES[cls],
                "ap_0-1": 100 * mine.loc["0-1", "test_ap"] if "0-1" in mine.index else np.nan,
                "ap_ap": 100 * mine.loc[ap[0], "test_ap"] if ap else np.nan,
                "paper_ap_0-1": PAPER_AP[cls][0],
                "paper_ap_ap": PAPER_AP[cls][1],
                "ap_methods": " ".join(m for m in METHODS if m in ap),
                "ap_models_identical": mine.loc[ap, "w_sha256"].nunique() == 1 if ap else None,
            }
        )
    return pd.DataFrame(
        rows,
        columns=[
            "class",
            "object_class",
            "ap_0-1",
            "ap_ap",
            "paper_ap_0-1",
            "paper_ap_ap",
            "ap_methods",
            "ap_models_identical",
        ],
    )


def lai_table(frame):
    """Per class: total LAI time (s) of each AP method and the time ratios."""
    ap = frame[frame["loss"] == "ap"]
    if ap.empty:
        return pd.DataFrame()
    table = ap.pivot_table(index="class", columns="method", values="lai_time_s", sort=False)
    table = table[[m for m in METHODS if m in table.columns]]
    for slow, fast in RATIOS:
        if slow in table and fast in table:
            table[f"{slow} / {fast}"] = table[slow] / table[fast]
    table["lai_calls"] = ap.groupby("class", sort=False)["lai_calls"].max()
    if "ap" in ap["method"].values:
        yue = ap[ap["method"] == "ap"].set_index("class")
        table["lai_share_ap"] = yue["lai_time_s"] / yue["train_s"]
    return table.reset_index()


def ratios(frame):
    """ratios.csv: per pair of RATIOS, the ratio of the mean total LAI times over the classes
    both trained, as timed in training and replayed (median, min, max over rounds), the
    paper's beside."""
    rows = [
        {
            **row,
            "paper_total_time": PAPER_LAI_S[slow] / PAPER_LAI_S[fast]
            if fast in PAPER_LAI_S
            else None,
            "n_classes": len(a),
        }
        for slow, fast, a, _, row in ratio_rows(frame, RATIOS)
    ]
    return pd.DataFrame(rows, columns=[*RATIO_COLUMNS, "paper_total_time", "n_classes"])


def _replay_md(rt, ours):
    """The time ratios replayed, as Markdown ('' when the calls were not replayed)."""
    if rt.empty or not rt["replay_rounds"].max():
        return ""
    k = int(rt["replay_rounds"].min())
    rows = [
        [
            " / ".join(LAI_NAMES[m] for m in r.ratio.split(" / ")),
            fmt(r.total_time, 1),
            common.replayed_ratio(r),
            fmt(r.paper_total_time, 1),
        ]
        for r in rt.itertuples()
    ]
    return "\n\n".join(
        [
            (
                f"Replayed {k}x: each training's LAI calls, recorded as the solver made them, timed "
                f"again in {k} rounds apart from training, each in a process of its own (the same "
                "score vectors in the same order); a ratio of the mean totals over classes, round "
                "by round: its median over rounds and range (min-max)."
            ),
            markdown_table(
                [
                    "ratio",
                    f"total time, {ours}",
                    f"total time, {ours}, replayed {k}x: median (min-max)",
                    "total time, paper",
                ],
                rows,
            ),
        ]
    )


def _ap_md(t5, ours, early=frozenset()):
    """Table 5 as Markdown; `early`: the (class, loss) pairs with a training that stopped
    before converging, whose cells are marked."""
    rows = [
        [
            r["object_class"],
            mark(fmt(r["ap_0-1"], 2), (r["class"], "01") in early),
            mark(fmt(r["ap_ap"], 2), (r["class"], "ap") in early),
            fmt(r["paper_ap_0-1"], 2),
            fmt(r["paper_ap_ap"], 2),
        ]
        for _, r in t5.iterrows()
    ]
    if len(t5):
        means = t5[["ap_0-1", "ap_ap", "paper_ap_0-1", "paper_ap_ap"]].mean()
        label = "**mean**" if len(t5) == len(CLASSES) else f"**mean** ({len(t5)} classes)"
        rows.append([label, *(fmt(means[c], 2) for c in means.index)])
    header = [
        "Object category",
        f"0-1 loss, {ours}",
        f"AP loss, {ours}",
        "0-1 loss, paper",
        "AP loss, paper",
    ]
    return markdown_table(header, rows)


def _identical_line(t5):
    checked = t5[t5["ap_methods"].str.count(" ") >= 1]
    if checked.empty:
        return "Only one AP method per class was trained: no comparison of their weights."
    same = checked["ap_models_identical"].astype(bool)
    names = ", ".join(dict.fromkeys(m for ms in checked["ap_methods"] for m in ms.split()))
    if same.all():
        return (
            f"Exact LAI: {names} trained bit-identical weights for every one of the "
            f"{len(checked)} classes trained with more than one of them."
        )
    bad = ", ".join(checked.loc[~same, "class"])
    return (
        f"**Warning**: {names} should train identical weights (all are exact), but their "
        f"weights differ for {bad}; the AP column shows {AP_METHODS[0]} where present."
    )


def _lai_md(lt, ours, early=frozenset()):
    methods = [m for m in METHODS if m in lt.columns]
    ratios = [c for c in (f"{a} / {b}" for a, b in RATIOS) if c in lt.columns]
    header = [
        "Object category",
        *(f"{LAI_NAMES[m]} (s)" for m in methods),
        *(" / ".join(LAI_NAMES[p] for p in r.split(" / ")) for r in ratios),
        "LAI calls",
    ]
    share = "lai_share_ap" in lt.columns
    if share:
        header.append("LAI share of training (Yue)")
    rows = []
    for _, r in lt.iterrows():
        row = [
            CLASS_NAMES[r["class"]],
            *(mark(fmt(r[m], 4), (r["class"], m) in early) for m in methods),
            *(fmt(r[c], 1) for c in ratios),
            fmt(r["lai_calls"], 0),
        ]
        rows.append(row + ([f"{100 * r['lai_share_ap']:.0f}%"] if share else []))
    means = lt[methods].mean()
    mean_ratio = {f"{a} / {b}": means[a] / means[b] for a, b in RATIOS if a in means and b in means}
    label = (
        f"**mean**, {ours}" if len(lt) == len(CLASSES) else f"**mean** ({len(lt)} classes), {ours}"
    )
    rows.append(
        [
            label,
            *(fmt(means[m], 4) for m in methods),
            *(fmt(mean_ratio[c], 1) for c in ratios),
            fmt(lt["lai_calls"].mean(), 0),
        ]
        + ([f"{100 * lt['lai_share_ap'].mean():.0f}%"] if share else [])
    )
    paper_ratio = fmt(PAPER_LAI_S["ap"] / PAPER_LAI_S["ap_qs"], 1)
    rows.append(
        [
            "**paper** (mean over 20 classes)",
            *(fmt(PAPER_LAI_S.get(m), 4) for m in methods),
            *(paper_ratio if r == "ap / ap_qs" else "" for r in ratios),
            "",
        ]
        + ([""] if share else [])
    )
    return markdown_table(header, rows)


INIT_TEXT = {
    "image_means": (
        "each positive image's best box under the difference between the mean box "
        "feature of the positive and of the negative images"
    ),
    "random": "a random box per positive image (seed {seed})",
}


def _setting_line(cfg, frame):
    Cs = common.C_text(frame)
    grids = {loss: cfg["C"][loss] for loss in dict.fromkeys(frame["loss"])}
    if any(len(g) > 1 for g in grids.values()):
        how = (
            "; ".join(
                f"{loss} from {{{', '.join(f'{c:g}' for c in g)}}}" for loss, g in grids.items()
            )
            + f", per class by detection AP on a stratified "
            f"{100 * cfg['validation_fraction']:g}% of trainval held out, then trained on "
            "all of trainval"
        )
        Cs = f"{Cs} (chosen: {how})"
    n_conv = int(frame["converged"].sum())
    low = ", ".join(f"{loss}: {cfg['min_outer'][loss]}" for loss in dict.fromkeys(frame["loss"]))
    init = INIT_TEXT[cfg["init"]].format(seed=cfg["seed"])
    return (
        f"Latent SVM by CCCP around the 1-slack cutting plane (tol {cfg['tol']:g}, at most "
        f"{cfg['max_iter']} iterations per outer step, at least {low} and at most "
        f"{cfg['max_outer']} outer steps), C {Cs}. Initial boxes, the same for both "
        f"losses: {init}. {n_conv} of {len(frame)} trainings converged. Test: every box "
        f"scored, per-image NMS at IoU {cfg['nms_threshold']:g}, VOC2007 detection AP "
        "(11-point, IoU >= 0.5, difficult objects ignored)."
    )


def write_tables(out, records, cfg, note, synthetic):
    """timings.csv, results.csv, table5.md and figure.png/.pdf from the run records."""
    frame = common.timings_frame(records, TIMING_COLUMNS, METHODS, CLASSES)
    ours = ours_label(synthetic)
    write_csv(out / "timings.csv", frame.drop(columns="lai_replay_s"))
    write_csv(out / "replay.csv", replay_frame(frame))
    rt = ratios(frame)
    write_csv(out / "ratios.csv", rt.assign(data=note))
    t5, lt = ap_table(frame), lai_table(frame)
    write_csv(out / "results.csv", t5.assign(data=note))
    parts = ["# Table 5: test detection AP (%) per class, latent 0-1 SVM vs latent AP-SVM", note]
    early = common.unconverged(frame)
    if not frame.empty:
        parts += [
            _setting_line(cfg, frame),
            (
                f"Paper: {CVPR2018}, Table 5 (VOC2007 test, 5011 trainval images of about "
                "2000 selective-search boxes with 4096-d CNN features)."
            ),
            _ap_md(t5, ours, set(zip(early["class"], early["loss"]))),
            unconverged_note(len(early)),
            _identical_line(t5),
        ]
    if not lt.empty:
        parts += [
            "## Total loss-augmented inference time per class during training (s)",
            (
                "Ours: total wall time of the LAI calls of one AP-SVM training per class and "
                "method, timed once in training (numba warmed up beforehand; the methods run one "
                "after another on this machine, so load changes between them show; the replayed "
                f"ratios below repeat the timing). Paper: {CVPR2018}, Section 4.2, total LAI time "
                "averaged over the 20 classes, at 5011 trainval images. Yue's method costs O(N P) per call and "
                "QS O(N log P), so the ratio grows with the number of images: at fewer images "
                "than the paper's it is smaller."
            ),
            _lai_md(lt, ours, set(zip(early["class"], early["method"]))),
            _replay_md(rt, ours),
        ]
    write_text(out / "table5.md", common.paragraphs(*parts))
    if not frame.empty:
        plot(t5, lt, out / "figure", synthetic)


def redraw(run_dir, kind="tables"):
    """Redraw figure.png and .pdf of a run from its timings.csv; return their paths."""
    records = read_csv(Path(run_dir) / "timings.csv", TIMING_COLUMNS).to_dict("records")
    frame = common.timings_frame(records, TIMING_COLUMNS, METHODS, CLASSES)
    if frame.empty:
        raise ValueError(f"{Path(run_dir) / 'timings.csv'} holds no trainings to plot")
    synthetic = "Our numbers are synthetic" in run_data_note(run_dir)
    return plot(ap_table(frame), lai_table(frame), Path(run_dir) / "figure", synthetic)
