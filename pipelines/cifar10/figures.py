"""The figure of a run: test mAP against training time per method; redrawn from the run's
CSVs."""

from pathlib import Path

from matplotlib.figure import Figure

from qsrank.pipelines._images import is_digits
from qsrank.pipelines._io import read_csv, run_data_note, save_figure
from qsrank.pipelines.cifar10.config import WARM_PHASES


def plot(history, methods, warm_test, ours):
    """Test mAP against the summed measured step times per method, from the warm start's mAP;
    methods with identical mAP curves (exact LAI of one loss) share a colour."""
    fig = Figure(figsize=(6.4, 4.4))
    ax = fig.add_subplot()
    curves = {name: history[history.phase == name] for name in methods}
    groups = {}
    for name, rows in curves.items():
        key = tuple(rows.test_map.round(12))
        groups.setdefault(key, []).append(name)
    for k, names in enumerate(groups.values()):
        for i, name in enumerate(names):
            rows = curves[name]
            label = (
                f"{' = '.join(names)} (identical mAP)"
                if i == 0 and len(names) > 1
                else name
                if i == 0
                else f"{name} (its own step times)"
            )
            ax.plot(
                [0.0, *rows.train_s],
                [100 * warm_test[0], *(100 * rows.test_map)],
                marker="os^"[i % 3],
                linestyle=("-", "--", ":")[i % 3],
                color=f"C{k}",
                label=label,
            )
    ax.set_xlabel("training time after the warm start: summed measured step times (s)")
    ax.set_ylabel("test mean AP (%)")
    ax.set_title(f"PL-CNN, {ours}", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def data_name(note):
    """The figure's name of the data."""
    return "digits-as-CIFAR (not CIFAR-10)" if is_digits(note) else "CIFAR-10"


def redraw(run_dir, kind="tables"):
    """Redraw figure.png and .pdf of a run from its history.csv and results.csv; return their
    paths."""
    run_dir = Path(run_dir)
    history = read_csv(run_dir / "history.csv", ["phase", "train_s", "test_map", "test_ndcg"])
    methods = list(read_csv(run_dir / "results.csv", ["method"])["method"])
    warm = history[history.phase.isin(WARM_PHASES)]
    if warm.empty or not methods:
        raise ValueError(f"{run_dir / 'history.csv'} lacks the warm start's or the methods' rows")
    warm_test = (warm.test_map.iloc[-1], warm.test_ndcg.iloc[-1])
    fig = plot(history, methods, warm_test, data_name(run_data_note(run_dir)))
    return save_figure(fig, run_dir / "figure")
