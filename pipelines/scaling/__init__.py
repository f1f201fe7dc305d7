"""Scaling benchmark (Mohapatra et al., CVPR 2018, Figures 2-3): seconds per loss-augmented
inference (LAI) call as the number of negatives, positives, or both grows, on seeded synthetic
scores.

Every LAI curve goes through the public ``qs.inference.lai``, so a ratio between curves
measures the algorithm, not the call path. Curve names follow the paper (0-1, ap, ap_qs,
ndcg, ndcg_qs) plus our own methods and outside references; ``*_auto_out`` is the default
writing into output arrays reused from call to call (``lai(..., out=)``), every other curve
allocates new ones per call. At each size every curve gets one cold call, timed apart
because it includes numba compilation or cache loading, then ``repeats`` rounds of one warm
timed sample of each curve in turn (a sample: an untimed call, then the mean of
back-to-back calls lasting about 2 ms). Every call reads the next of a rotation of different
seeded score vectors (at least 64 MB of them): a repeated input would be learnt by the
caches and the branch predictor, which training never lets happen. A curve whose predicted
time per call exceeds the budget is skipped at that size and every larger one.

The package: `config` (curves, clocks, sizes and their checks), `timing`, `report` (tables,
summary and figure) and `share` (the grid of `vary: share`).
"""

from pipelines._config import dump_config, new_run_dir
from pipelines._io import write_csv, write_text
from pipelines._provenance import recording_interruption, write_provenance
from pipelines._runs import claim_run_dir
from pipelines.scaling.config import (
    CURVE_NAMES,
    PRESETS,
    LOSSES,
    VARIES,
    curves,
    load_config,
    resolve,
    sizes,
)
from pipelines.scaling.report import plot, redraw, report, summary
from pipelines.scaling.share import time_share, write_share
from pipelines.scaling.timing import data_note, time_all

__all__ = ["CURVE_NAMES", "PRESETS", "LOSSES", "VARIES", "load_config", "redraw", "report",
           "resolve", "run", "sizes"]


def run(config, out_dir=None, progress=True):
    """Time every curve at every size, write the run directory, and return its path.

    `out_dir` None writes to results/scaling/<UTC time>-<vary>-<random>/ under the working
    directory, claimed (and checked writable) first; the results are written when the timings
    are complete, each file atomically.
    """
    cfg = resolve(config)
    out = claim_run_dir(out_dir or new_run_dir("scaling", cfg["vary"]), "scaling", "bench")
    with recording_interruption(out, cfg["seed"], data_note(cfg), cfg):
        share = cfg["vary"] == "share"
        timings, cold = time_share(cfg, progress) if share else \
            time_all(cfg, curves(cfg), sizes(cfg), progress)
        for name, frame in (("timings.csv", timings), ("compile.csv", cold)):
            write_csv(out / name, frame)
        write_text(out / "config.yaml", dump_config(cfg))
        if share:
            write_share(cfg, out, timings)
        else:
            write_text(out / "summary.md", summary(cfg, timings, cold))
            plot(timings, out / "scaling")
    write_provenance(out, cfg["seed"], data_note(cfg), cfg)
    return out
