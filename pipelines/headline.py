"""The README's headline table, read from the published default runs under ``results/`` (``qsrank
readme``), so that no number in the README is typed by hand."""

from pathlib import Path

from qsrank.pipelines._io import read_csv, run_data_note, write_text
from qsrank.pipelines._tables import markdown_table

START, END = "<!-- results:start -->", "<!-- results:end -->"
HEADER = ["result", "ours", "paper", "our data", "command"]


def _csv(results, name):
    return read_csv(Path(results) / name)


def _data(results, run):
    """What the run's data were, in two words, from its provenance."""
    note = run_data_note(Path(results) / run)
    if "digits-as-CIFAR" in note:
        return "digits-as-CIFAR"
    return "synthetic" if "synthetic" in note else "real"


def _pair(a, b, digits=2):
    return f"{a:.{digits}f} / {b:.{digits}f}"


def _time_row(results, run, ratio, title, target):
    """A total LAI time ratio of `run` as its median over replays with the range: '28.2x
    (27.8-29.8, median of 7 replays)', beside the paper's."""
    r = _csv(results, f"{run}/ratios.csv").set_index("ratio").loc[ratio]
    ours = f"{r.replay_median:.1f}x ({r.replay_min:.1f}-{r.replay_max:.1f}, median of "
    ours += f"{int(r.replay_rounds)} replays)"
    return [title, ours, f"{r.paper_total_time:.1f}x", _data(results, run), target]


def _mean_row(results, run, t, columns, title, target):
    """The means of two `columns` of table `t` of `run`, beside the paper's."""
    paper = [f"paper_{c}" for c in columns]
    return [title, _pair(*t[columns].mean()), _pair(*t[paper].mean()), _data(results, run), target]


def _ratio_rows(results):
    run, rows = "voc2011_actions/default", []
    for key, what in (("ap / ap_qs", "AP: Yue / QS"), ("ndcg / ndcg_qs", "NDCG: Chakrabarti / QS")):
        title = f"Table 1, total LAI time in training, {what}"
        rows.append(_time_row(results, run, key, title, "`make reproduce-table1`"))
    for table, metric, name in ((3, "ap", "test AP"), (4, "ndcg", "NDCG")):
        t = _csv(results, f"{run}/table{table}.csv")
        title = f"Table {table}, mean {name}, 0-1 / {metric.upper()} loss"
        cols, target = [f"{metric}_0-1", f"{metric}_{metric}"], f"`make reproduce-table{table}`"
        rows.append(_mean_row(results, run, t[t["class"] != "mean"], cols, title, target))
    return rows


def _table5_rows(results):
    run, target = "voc2007_detection/default", "`make reproduce-table5`"
    t = _csv(results, f"{run}/results.csv")
    ap_title = "Table 5, mean detection AP, 0-1 / AP loss"
    time_title = "Table 5, total LAI time in training, Yue / QS"
    return [
        _mean_row(results, run, t, ["ap_0-1", "ap_ap"], ap_title, target),
        _time_row(results, run, "ap / ap_qs", time_title, target),
    ]


def _cifar10_rows(results):
    run = "cifar10/default"
    r = _csv(results, f"{run}/results.csv").set_index("method")
    return [
        [
            "CIFAR-10, test mean AP (%), 0-1 / AP loss",
            _pair(100 * r.loc["zero_one", "test_map"], 100 * r.loc["ap_qs", "test_map"]),
            _pair(r.loc["zero_one", "paper_map"], r.loc["ap_qs", "paper_map"]),
            _data(results, run),
            "`make reproduce-cifar10`",
        ]
    ]


def _digits_rows(results):
    run = "digits/default"
    t = _csv(results, f"{run}/table.csv")
    mean = t[t["digit"].astype(str) == "mean"].iloc[0]
    return [
        [
            "Digits, mean test AP, AP-SVM / 0-1 SVM / LinearSVC",
            " / ".join(f"{mean[c]:.3f}" for c in ("ap_svm", "zero_one_svm", "linear_svc")),
            "-",
            _data(results, run),
            "`make digits`",
        ]
    ]


def _compare_rows(results):
    t = _csv(results, "compare/default/summary.csv")
    t = t[t["dataset"] == "digits"].set_index("method")["test_ap"]
    others = t.drop(["ap_hinge", "ndcg_hinge"], errors="ignore")
    return [
        [
            f"Compare on digits, test AP, exact AP hinge / best other ({others.idxmax()})",
            _pair(t["ap_hinge"], others.max(), 4),
            "-",
            "real",
            "`make compare`",
        ]
    ]


ROWS = (_ratio_rows, _table5_rows, _cifar10_rows, _digits_rows, _compare_rows)


def headline_table(results):
    """The headline table (Markdown) from the result files under `results`."""
    rows = [row for make in ROWS for row in make(results)]
    return markdown_table(HEADER, rows)


def with_table(readme_text, table):
    """`readme_text` with the text between the markers replaced by `table`."""
    if readme_text.count(START) != 1 or readme_text.count(END) != 1:
        raise ValueError(f"the README must hold {START} and {END} once each")
    head, rest = readme_text.split(START)
    _, tail = rest.split(END)
    return f"{head}{START}\n{table}\n{END}{tail}"


def write_readme(readme, results):
    """Rewrite the headline table of `readme` from `results`; return the table."""
    readme = Path(readme)
    table = headline_table(results)
    write_text(readme, with_table(readme.read_text(encoding="utf-8"), table))
    return table
