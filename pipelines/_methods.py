"""Method tables of the experiments (name -> (loss, LAI method)): selection by a config, and the
warm-up of their LAI."""


def inferences(methods):
    """The LAI methods of a method table, once each, in table order."""
    return tuple(dict.fromkeys(inference for _, inference in methods.values()))


def selected_methods(methods, cfg):
    """The methods of ``cfg["methods"]`` that pass the config's ``loss`` and ``inference``
    filters (None: any), in config order."""
    return [
        m
        for m in cfg["methods"]
        if cfg["loss"] in (None, methods[m][0]) and cfg["inference"] in (None, methods[m][1])
    ]


def check_selection(methods, cfg):
    """A ValueError naming the filters when they leave none of ``cfg["methods"]``."""
    if not selected_methods(methods, cfg):
        raise ValueError(
            f"no method of {cfg['methods']} has "
            + " and ".join(f"{k} {cfg[k]!r}" for k in ("loss", "inference") if cfg[k] is not None)
        )


def warm_up(calls):
    """Call ``lai`` for every (loss, method) of `calls` on small inputs that take its kernels' main
    paths, so that numba compiles them now, not inside a timed training."""
    import numpy as np

    from qs.inference import lai

    calls = list(dict.fromkeys(calls))
    rng = np.random.default_rng(0)
    for n_pos, n_neg, shift in ((3, 7, 0.0), (60, 600, 0.0), (60, 600, 5.0), (20, 9000, 0.0)):
        scores = rng.normal(size=n_pos + n_neg)
        scores[:n_pos] += shift
        labels = np.repeat(np.array([1, 0], dtype=np.int8), [n_pos, n_neg])
        for loss, method in calls:
            lai(scores, labels, loss=loss, method=method)
