"""Method tables of the experiments: a method's name -> (loss, LAI method of
:mod:`qs.inference`), and the methods a config selects from one."""


def inferences(methods):
    """The LAI methods of a method table, once each, in table order."""
    return tuple(dict.fromkeys(inference for _, inference in methods.values()))


def selected_methods(methods, cfg):
    """The methods of ``cfg["methods"]`` that pass the config's ``loss`` and ``inference``
    filters (None: any), in config order."""
    return [m for m in cfg["methods"] if cfg["loss"] in (None, methods[m][0])
            and cfg["inference"] in (None, methods[m][1])]
