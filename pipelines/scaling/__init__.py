"""Scaling benchmark (Mohapatra et al., CVPR 2018, Figures 2-3): seconds per LAI call as negatives,
positives, or both grow, on seeded synthetic scores; `config`, `timing`, `report` and `share`
(the grid of `vary: share`)."""

from qsrank.pipelines._io import write_csv, write_text
from qsrank.pipelines._runner import run_dir
from qsrank.pipelines.scaling.config import (
    CURVE_NAMES,
    LOSSES,
    PRESETS,
    VARIES,
    curves,
    load_config,
    resolve,
    sizes,
)
from qsrank.pipelines.scaling.report import plot, redraw, report, summary
from qsrank.pipelines.scaling.share import time_share, write_share
from qsrank.pipelines.scaling.timing import data_note, time_all

__all__ = [
    "CURVE_NAMES",
    "LOSSES",
    "PRESETS",
    "VARIES",
    "load_config",
    "redraw",
    "report",
    "resolve",
    "run",
    "sizes",
]


def run(config, out_dir=None, progress=True):
    """Time every curve at every size into `out_dir` (None: a new runs/scaling/...); return it."""
    cfg = resolve(config)
    with run_dir("scaling", "bench", out_dir, cfg, data_note(cfg), cfg, label=cfg["vary"]) as out:
        share = cfg["vary"] == "share"
        timings, cold = (
            time_share(cfg, progress) if share else time_all(cfg, curves(cfg), sizes(cfg), progress)
        )
        for name, frame in (("timings.csv", timings), ("compile.csv", cold)):
            write_csv(out / name, frame)
        if share:
            write_share(cfg, out, timings)
        else:
            write_text(out / "summary.md", summary(cfg, timings, cold))
            plot(timings, out / "scaling")
    return out
