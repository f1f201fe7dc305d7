"""Config handling shared by the pipelines: read a YAML file, lay it over the built-in
defaults, check keys and values, and name a new run directory.

Every config error is a ValueError naming the offending key (and the file, when one was
read), as the CLI shows ValueErrors to the user as they are.
"""

import copy
import math
import numbers
import secrets
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import yaml

from pipelines._yaml import read_config, shown


def load_config(path, defaults, resolve, overrides, sets=None):
    """`defaults`, updated by the YAML file at `path` (None: no file) with the `--set` mapping
    `sets` laid over it, then by the non-None `overrides`; checked by `resolve` (a pipeline's
    ``resolve``, returning the full config).

    The file is checked on its own first, so its errors, unreadable file included, name it.
    """
    cfg = resolve(merge(defaults, sets)) if sets and path is None else defaults
    if path is not None:
        try:
            config = read_config(path)
            cfg = resolve(with_sets({} if config is None else config, sets))
        except OSError as err:
            raise ValueError(f"cannot read config {path}: {err.strerror or err}") from None
        except (ValueError, yaml.YAMLError) as err:
            raise ValueError(f"config {path}: {err}") from None
    return resolve(merge(cfg, {k: v for k, v in overrides.items() if v is not None}))


def with_sets(config, sets):
    """The file's `config` with the command line's `--set` mapping laid over it (a config that
    is no mapping is left for `resolve` to reject)."""
    return merge(config, sets) if sets and isinstance(config, dict) else config


def merge(base, update):
    """`base` with `update` laid over it, nested mappings merged key by key (both left intact)."""
    out = copy.deepcopy(base)
    for key, value in update.items():
        both = isinstance(value, dict) and isinstance(out.get(key), dict)
        out[key] = merge(out[key], value) if both else copy.deepcopy(value)
    return out


def check_mapping(value, where):
    """Reject anything but a mapping; `where` names it ('' for the whole config)."""
    if not isinstance(value, dict):  # a ValueError, as every config error (the CLI shows them)
        raise ValueError(  # noqa: TRY004
            f"{where or 'config'} must be a mapping, got {type(value).__name__}")


def check_keys(mapping, allowed, where):
    """Reject a non-mapping or a key not in `allowed`, naming the unknown keys and the allowed."""
    check_mapping(mapping, where)
    where_text = f" in {where!r}" if where else ""
    unknown = [key for key in mapping if key not in allowed]
    if unknown:
        raise ValueError(f"unknown config key(s) {', '.join(map(shown, unknown))}{where_text}; "
                         f"allowed keys{where_text}: {', '.join(map(str, allowed))}")


def check_choice(value, where, allowed):
    """Reject anything but a string in `allowed`."""
    if not isinstance(value, str) or value not in allowed:
        raise ValueError(f"{where} must be one of {', '.join(map(str, allowed))}; "
                         f"got {shown(value)}")


def check_number(value, where, integer=False, low=None, strict=False):
    """Accept a finite integer (or real, unless `integer`), numpy scalars included but not
    booleans, that is >= `low` (> `low` if `strict`)."""
    kind = numbers.Integral if integer else numbers.Real
    ok = (isinstance(value, kind) and not isinstance(value, bool)
          and (isinstance(value, numbers.Integral) or math.isfinite(value)))
    if ok and low is not None:
        ok = value > low if strict else value >= low
    if not ok:
        bound = "" if low is None else f" {'>' if strict else '>='} {low}"
        raise ValueError(f"{where} must be a finite {'integer' if integer else 'number'}"
                         f"{bound}; got {shown(value)}")


def dump_config(cfg):
    """The resolved config as YAML; numpy numbers (which the checks accept) as plain ones."""
    def plain(value):
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [plain(v) for v in value]
        return value.item() if isinstance(value, np.generic) else value
    return yaml.safe_dump(plain(cfg), sort_keys=False)


def new_run_dir(experiment, kind=None):
    """results/<experiment>/<UTC time>[-<kind>]-<random>: sorts by time, and two runs started
    in the same second do not collide."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    label = f"{stamp}-{kind}" if kind else stamp
    return Path("results") / experiment / f"{label}-{secrets.token_hex(3)}"
