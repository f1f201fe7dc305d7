"""The one experiment runner: resolve the config, load the data, claim the run directory, resume
finished units, warm up, train the units left, write tables, figures, config and provenance. An
experiment declares what differs (`Experiment`)."""

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
    """An experiment as the runner sees it: what differs from one to another."""

    name: str
    schema: Any  # the pydantic model of its config (a `_schema.Section`)
    load_data: Callable  # (cfg) -> the data every unit reads
    settings: Callable  # (cfg, data) -> what a record depends on, with data and data_sha256
    units: Callable  # (cfg, data) -> the units, tuples of names (stored as runs/<a>__<b>.json)
    run_unit: Callable  # (run, unit) -> the unit's record (JSON)
    write: Callable  # (run, records) -> the tables and figures, from every unit's record
    warm_up: Callable = lambda cfg, units: None  # compile the kernels the units left call
    prepare: Callable = lambda cfg: cfg  # the config as run (a device auto made concrete)
    note: Callable = None  # (cfg, data) -> the provenance's data line (default: settings')
    session: Callable = None  # (run) -> a context the units run in (threads, a scheduler)
    unit_settings: Callable = None  # (cfg, data, unit) -> settings of one unit's record
    kind: str = "tables"
    unit_label: str = "unit"
    label: Callable = None  # (cfg) -> the run's name in progress lines and new directories
    unit_text: Callable = None  # (unit) -> what the progress bar says of it
    command: Callable = None  # (cfg) -> what this command adds to the recorded settings
    report: tuple = ("table.md",)  # the files of a finished run the CLI prints


@dataclass
class Run:
    """What units and writers see: config, data, run directory, store, progress, a cache."""

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
    """The schema's defaults updated by the file at `path`, the `--set` mapping `sets` and the
    non-None `overrides`; checked."""
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
    """Run every unit of `experiment` not finished under the same settings in `out_dir` (None: a new
    runs/ directory), write its outputs, return the directory. A bad config writes nothing; each
    unit is stored at once."""
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
    """Claim the run directory `out_dir` (None: a new one) and yield it; on success write the config
    and provenance, on failure record the command as interrupted. The code version is taken as
    the run began."""
    out = claim_run_dir(out_dir or new_run_dir(name, label), name, kind)
    provenance = (out, cfg.get("seed", cfg.get("seeds")), note, settings, data_sha256, overrides)
    code = code_version()
    with recording_interruption(*provenance, code=code):
        yield out
        write_text(out / "config.yaml", dump_config(cfg))
    write_provenance(*provenance, code=code)


def resume_status(n_units, n_left, what="units"):
    """ "up to date: all N units done", "resuming: K of N units done", or None for a fresh run."""
    done = n_units - n_left
    if not n_left:
        return f"up to date: all {n_units} {what} done"
    return f"resuming: {done} of {n_units} {what} done" if done else None
