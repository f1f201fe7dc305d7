"""Config handling shared by the pipelines: a YAML file and `--set` keys laid over the defaults, the
resolved config written back, and new run directories. Every error is a ValueError naming the key
(and the file)."""

import copy
import secrets
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import yaml

from qsrank.pipelines._yaml import read_config


def load_config(path, defaults, resolve, overrides, sets=None):
    """`defaults` updated by the YAML file at `path` (None: none), the `--set` mapping `sets` over
    it, then the non-None `overrides`; checked by `resolve`. An error names the file, or
    ``--set`` when the file alone is valid."""
    cfg = defaults
    if path is not None:
        try:
            config = read_config(path)
            config = {} if config is None else config
            cfg = resolve(config)
        except OSError as err:
            raise ValueError(f"cannot read config {path}: {err.strerror or err}") from None
        except (ValueError, yaml.YAMLError) as err:
            if not sets:
                raise ValueError(f"config {path}: {err}") from None
            try:  # a --set may mend the file's value
                resolve(with_sets(config, sets))
            except ValueError:
                raise ValueError(f"config {path}: {err}") from None
    if sets:
        try:
            cfg = resolve(with_sets(config, sets) if path is not None else merge(cfg, sets))
        except ValueError as err:
            raise ValueError(f"in --set: {err}") from None
    return resolve(merge(cfg, {k: v for k, v in overrides.items() if v is not None}))


def with_sets(config, sets):
    """The file's `config` with the `--set` mapping laid over it (a non-mapping: as it is)."""
    return merge(config, sets) if sets and isinstance(config, dict) else config


def merge(base, update):
    """`base` with `update` laid over it, nested mappings merged key by key (both left intact)."""
    out = copy.deepcopy(base)
    for key, value in update.items():
        both = isinstance(value, dict) and isinstance(out.get(key), dict)
        out[key] = merge(out[key], value) if both else copy.deepcopy(value)
    return out


def dump_config(cfg):
    """The resolved config as YAML; numpy numbers (which the checks accept) as plain ones."""

    def plain(value):
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [plain(v) for v in value]
        return value.item() if isinstance(value, np.generic) else value

    return yaml.safe_dump(plain(cfg), sort_keys=False)


#: where runs go when no directory is given; ignored by git, so that a run never changes the
#: committed results (``qsrank publish`` copies a finished run into ``results/``)
RUNS = Path("runs")


def new_run_dir(experiment, kind=None):
    """runs/<experiment>/<UTC time>[-<kind>]-<random>: sorted by time, never colliding."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    label = f"{stamp}-{kind}" if kind else stamp
    return RUNS / experiment / f"{label}-{secrets.token_hex(3)}"
