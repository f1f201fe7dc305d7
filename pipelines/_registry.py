"""The experiments: what a config's `experiment` key may name and `qsrank train` runs; and,
apart, the benchmarks, which time code and run as `qsrank bench ...`.

Modules load on first use, so listing the names imports nothing.
"""

import importlib

EXPERIMENTS = ("cifar10", "compare", "digits", "voc2007_detection", "voc2011_actions")

#: benchmark module of pipelines/ -> the command that runs it; the benchmarks of an
#: experiment's training on its data sit in its package (Figures 2-3: `figures`)
BENCHMARKS = {
    "scaling": "qsrank bench",
    "voc2011_actions.replay": "qsrank bench --replay",
    "cold_start": "qsrank bench cold-start",
    "torch_lai_bench": "qsrank bench torch-lai",
    "torch_loss_bench": "qsrank bench torch-losses",
    "voc2007_scale": "qsrank bench voc2007-scale",
}


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
