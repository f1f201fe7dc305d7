"""The experiments `qsrank train` runs and the benchmarks `qsrank bench` runs; modules load on first
use."""

import importlib

EXPERIMENTS = ("cifar10", "compare", "digits", "ltr", "voc2007_detection", "voc2011_actions")
#: benchmark module of pipelines/ -> the command that runs it; the benchmarks of an
#: experiment's training on its data sit in its package (Figures 2-3: `figures`)
BENCHMARKS = {
    "scaling": "qsrank bench",
    "voc2011_actions.replay": "qsrank bench --replay",
    "cold_start": "qsrank bench cold-start",
    "torch_lai_bench": "qsrank bench torch-lai",
    "torch_loss_bench": "qsrank bench torch-losses",
    "voc2007_scale": "qsrank bench voc2007-scale",
    "ltr_bench": "qsrank bench ltr",
}


def experiment(name):
    """The module of experiment `name`; ValueError naming the known ones otherwise."""
    if name not in EXPERIMENTS:
        raise ValueError(f"unknown experiment {name!r}; known: {', '.join(EXPERIMENTS)}")
    return importlib.import_module(f"qsrank.pipelines.{name}")


def schema(name):
    """The declared config model of experiment `name`."""
    return experiment(name).SPEC.schema


def redraw(run_dir):
    """Redraw the figures of run directory `run_dir` by the experiment and kind its marker names;
    return the paths written."""
    from qsrank.pipelines._runs import MARKER, run_owner

    owner = run_owner(run_dir)
    if owner is None:
        raise ValueError(f"{run_dir} holds no qsrank run ({MARKER} missing): nothing to redraw")
    name, kind = owner["experiment"], owner["kind"]
    # a marker names a benchmark's module, or fit (`qsrank fit`, no config experiment)
    known = name in EXPERIMENTS or name in BENCHMARKS or name == "fit"
    module = importlib.import_module(f"qsrank.pipelines.{name}") if known else None
    draw = getattr(module, "redraw", None)
    if draw is None:
        raise ValueError(
            f"{run_dir} holds a {name} {kind} run; qsrank plot draws the "
            "figures of cifar10, compare, digits, fit, voc2007_detection, "
            "voc2011_actions figure and scaling runs"
        )
    return draw(run_dir, kind)
