"""The experiments: what a config's `experiment` key may name and `qsrank train` runs.

Benchmarks (scaling, replay, cold start, ...) are not experiments: they time code, and run
as `qsrank bench`. Modules load on first use, so listing the names imports nothing.
"""

import importlib

EXPERIMENTS = ("cifar10", "compare", "digits", "voc2007_detection", "voc2011_actions")
#: benchmarks whose run directories hold figures (their marker names them as the experiment)
BENCHMARKS = ("scaling",)


def experiment(name):
    """The module of experiment `name`; ValueError naming the known ones otherwise."""
    if name not in EXPERIMENTS:
        raise ValueError(f"unknown experiment {name!r}; known: {', '.join(EXPERIMENTS)}")
    return importlib.import_module(f"pipelines.{name}")


def schema(name):
    """The declared config model of experiment `name`; ValueError when it declares none."""
    module = experiment(name)
    model = getattr(getattr(module, "SPEC", None), "schema", None) or getattr(module, "Config",
                                                                             None)
    if model is None:
        raise ValueError(f"experiment {name} declares no config schema; its keys and defaults "
                         f"are DEFAULTS in pipelines/{name}.py")
    return model


def redraw(run_dir):
    """Redraw the figures of run directory `run_dir` from its result files, by the experiment
    and kind its marker (qsrank-run.json) names; return the paths written. A ValueError says
    what is missing: the marker, a result file, or a figure the run does not draw."""
    from pipelines._runs import MARKER, run_owner

    owner = run_owner(run_dir)
    if owner is None:
        raise ValueError(f"{run_dir} holds no qsrank run ({MARKER} missing): nothing to redraw")
    name, kind = owner["experiment"], owner["kind"]
    known = name in EXPERIMENTS or name in BENCHMARKS
    draw = getattr(importlib.import_module(f"pipelines.{name}"), "redraw", None) if known \
        else None
    if draw is None:
        raise ValueError(f"{run_dir} holds a {name} {kind} run; qsrank plot redraws the "
                         "figures of cifar10, voc2007_detection, voc2011_actions figure and "
                         "scaling runs")
    return draw(run_dir, kind)
