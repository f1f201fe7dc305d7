"""The one experiment runner: resolve the config, load the data, claim the run directory,
resume the finished units of work, warm up, train the units left with a progress bar, then
write the tables, figures, config and provenance.

An experiment declares what differs (:class:`Experiment`): its config schema, its data, the
settings its results depend on, its units of work (class x method, data set x method x seed,
...), how to run one, and how to turn the finished records into tables and figures.
"""

import sys
from collections.abc import Callable
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from qsrank.pipelines import _config, _schema
from qsrank.pipelines._config import dump_config, new_run_dir
from qsrank.pipelines._io import write_text
from qsrank.pipelines._provenance import code_version, recording_interruption, write_provenance
from qsrank.pipelines._runs import RunStore, claim_run_dir, settings_key


@dataclass(frozen=True)
class Experiment:
    """An experiment as the runner sees it.

    - `schema`: the pydantic model of its config (qsrank.pipelines._schema.Section);
    - `load_data(cfg)`: the data every unit reads;
    - `settings(cfg, data)`: what a unit's record depends on besides the unit itself, with the
      keys ``data`` (a note naming the data) and ``data_sha256``; a stored record is reused
      only under the same settings and code;
    - `units(cfg, data)`: the units of work, tuples of names (stored as runs/<a>__<b>.json);
    - `unit_settings(cfg, data, unit)`: when given, what one unit's record depends on in
      place of `settings` (a data set's own section, say, so that changing it retrains only
      the units of that data set); `settings` then speaks for the whole run in provenance;
    - `warm_up(cfg, units)`: compile (or load) the kernels the units left will call;
    - `prepare(cfg)`: the config as run (e.g. a device `auto` made concrete), once resolved;
    - `note(cfg, data)`: the provenance's line on the data (default: settings' ``data``);
    - `session(run)`: a context manager the units run inside (thread limits, a scheduler);
    - `run_unit(run, unit)`: train and evaluate one unit, returning its record (JSON);
    - `write(run, records)`: the tables and figures, from the records of every unit in order;
    - `label(cfg)`: what progress lines and new run directories call the run (default: the
      name; a figure run of one vary, say);
    - `unit_text(unit)`: what the progress bar says of the unit under way (default: its
      names joined by spaces);
    - `command(cfg)`: what this command adds to the settings its provenance records (the vary
      of a figure run, whose directory holds several);
    - `report`: the Markdown files of a finished run that the CLI prints.
    """

    name: str
    schema: Any
    load_data: Callable
    settings: Callable
    units: Callable
    run_unit: Callable
    write: Callable
    warm_up: Callable = lambda cfg, units: None
    prepare: Callable = lambda cfg: cfg
    note: Callable = None
    session: Callable = None
    unit_settings: Callable = None
    kind: str = "tables"
    unit_label: str = "unit"
    label: Callable = None
    unit_text: Callable = None
    command: Callable = None
    report: tuple = ("table.md",)


@dataclass
class Run:
    """What a unit and the writers see: the resolved config, the data, the run directory, its
    store of finished units, whether to show progress, and a cache the units of one run share
    (a network built once, say)."""

    cfg: dict
    data: Any
    out: Any
    store: RunStore
    progress: bool = False
    cache: dict = field(default_factory=dict)


def resolve(experiment, config):
    """The full config of `experiment`: its schema's defaults updated by `config`."""
    return _schema.validate(experiment.schema, config)


def load_config(experiment, path=None, sets=None, /, **overrides):
    """The schema's defaults, updated by the YAML file at `path` with the `--set` mapping
    `sets` laid over it, then by the non-None `overrides`; checked. Errors name the file."""
    return _config.load_config(path, {}, lambda c: resolve(experiment, c), overrides, sets)


def report(experiment, run_dir):
    """What the CLI prints of a finished run: its `report` files, one after the other."""
    return "\n".join(
        (Path(run_dir) / name).read_text(encoding="utf-8") for name in experiment.report
    )


def unit_name(unit):
    """The store name of a unit: its parts joined by '__'."""
    return "__".join(map(str, unit))


def run(experiment, config, out_dir=None, progress=True, overrides=()):
    """Run every unit of `experiment` not already finished in the run directory under the same
    settings, write its outputs, and return the directory.

    `out_dir` None writes to runs/<experiment>/<UTC time>[-<label>]-<random>/. The config is
    checked and the data loaded before the directory is claimed, so a bad config writes
    nothing; each finished unit is stored at once, so an interrupted run loses at most the unit
    under way.
    `overrides`: the command line's `--set` items, recorded in the provenance.
    """
    cfg = experiment.prepare(resolve(experiment, config))
    data = experiment.load_data(cfg)
    label = experiment.label(cfg) if experiment.label else experiment.name
    settings = settings_key(**experiment.settings(cfg, data))
    note = experiment.note(cfg, data) if experiment.note else settings["data"]
    recorded = {**settings, **experiment.command(cfg)} if experiment.command else settings
    with run_dir(
        experiment.name,
        experiment.kind,
        out_dir,
        cfg,
        note,
        recorded,
        label=label.replace(" ", "-") if experiment.label else None,
        data_sha256=settings["data_sha256"],
        overrides=overrides,
    ) as out:
        store = RunStore(out, settings)
        state = Run(cfg, data, out, store, progress)
        units = experiment.units(cfg, data)
        stores = {
            u: RunStore(out, settings_key(**experiment.unit_settings(cfg, data, u)))
            if experiment.unit_settings
            else store
            for u in units
        }
        left = [u for u in units if cfg.get("force") or not stores[u].done(unit_name(u))]
        noun = experiment.unit_label + ("es" if experiment.unit_label.endswith("s") else "s")
        status = resume_status(len(units), len(left), noun)
        if progress and status:
            print(f"{label}: {status}", file=sys.stderr)
        if left:
            experiment.warm_up(cfg, left)
        session = experiment.session(state) if experiment.session else nullcontext()
        text = experiment.unit_text or (lambda unit: " ".join(map(str, unit)))
        # up to date: the status line says so, and no empty bar is drawn
        with (
            session,
            tqdm(
                total=len(left),
                desc=label,
                unit=experiment.unit_label,
                disable=not progress or not left,
            ) as bar,
        ):
            for unit in left:
                bar.set_postfix_str(text(unit))
                stores[unit].put(unit_name(unit), experiment.run_unit(state, unit))
                bar.update()
        experiment.write(state, [stores[u].get(unit_name(u)) for u in units])
    return out


@contextmanager
def run_dir(
    name, kind, out_dir, cfg, note, settings, *, label=None, data_sha256=None, overrides=()
):
    """Claim the run directory of (`name`, `kind`): `out_dir`, or a new
    runs/<name>/<UTC time>[-<label>]-<random>/; yield it. When the block succeeds, write
    the resolved config `cfg` and the provenance (cfg's seed, the data `note`, `settings`,
    the `--set` `overrides`); when it fails, record the command as interrupted. The code
    recorded is the code as the run began: a run of hours must not take the commits made
    meanwhile for its own."""
    out = claim_run_dir(out_dir or new_run_dir(name, label), name, kind)
    provenance = (out, cfg.get("seed", cfg.get("seeds")), note, settings, data_sha256, overrides)
    code = code_version()
    with recording_interruption(*provenance, code=code):
        yield out
        write_text(out / "config.yaml", dump_config(cfg))
    write_provenance(*provenance, code=code)


def resume_status(n_units, n_left, what="units"):
    """The line a run prints before it starts: "up to date: all N units done" when nothing is
    left, "resuming: K of N units done" when some are; None for a fresh run."""
    done = n_units - n_left
    if not n_left:
        return f"up to date: all {n_units} {what} done"
    return f"resuming: {done} of {n_units} {what} done" if done else None
