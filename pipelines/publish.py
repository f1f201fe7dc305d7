"""Publishing a finished run (``qsrank publish RUN``): its tables, figures and provenance
(`PUBLISHED`; not its resumable state, weights or PDFs) copied into ``results/``, which git keeps
and the docs and README read."""

import shutil
from pathlib import Path

from qs.data.files import read_json
from qs.data.lock import OutputLock
from qsrank.pipelines._io import atomic_path
from qsrank.pipelines._runs import LOCK, run_owner

#: the suffixes of the files of a run directory that are published
PUBLISHED = (".md", ".csv", ".png", ".json", ".yaml")
RESULTS = Path("results")


def published_files(run):
    """The files of run directory `run` that publishing copies, sorted by name."""
    return sorted(
        p
        for p in Path(run).iterdir()
        if p.is_file() and p.suffix in PUBLISHED and not p.name.startswith(".")
    )


def default_destination(run, results=RESULTS):
    """results/<experiment>/<the run directory's name>."""
    owner = run_owner(run)
    return Path(results) / owner["experiment"] / Path(run).resolve().name


def check_finished(run):
    """Refuse a directory that holds no qsrank run, or a run whose last command did not complete."""
    run = Path(run)
    if not run.is_dir():
        raise ValueError(f"no run directory {run}")
    if run_owner(run) is None:
        raise ValueError(f"{run} holds no qsrank run")
    provenance = read_json(run / "provenance.json")
    status = provenance.get("status") if isinstance(provenance, dict) else None
    if status != "complete":
        what = (
            "has no provenance.json (still running, or stopped)"
            if status is None
            else f"did not finish ({status})"
        )
        raise ValueError(f"run {run} {what}; publish a finished run")


def publish(run, to=None, results=RESULTS):
    """Copy the published files of the finished run `run` into `to` (default `default_destination`),
    holding the run's lock; stale files of those kinds in `to` are removed. Returns (`to`, the
    names copied)."""
    run = Path(run)
    check_finished(run)
    with OutputLock(run / LOCK, f"run directory {run}"):
        check_finished(run)  # again, now that no command writes it
        return _copy(run, to, results)


def _copy(run, to, results):
    to = Path(to) if to is not None else default_destination(run, results)
    if to.resolve() == run.resolve():
        raise ValueError(f"{run} is already where it would be published")
    owner, theirs = run_owner(run), run_owner(to) if to.is_dir() else None
    if theirs is not None and theirs != owner:
        raise ValueError(
            f"{to} holds a {theirs['experiment']} {theirs['kind']} run, not a "
            f"{owner['experiment']} {owner['kind']} run; choose another --to"
        )
    files = published_files(run)
    for path in files:
        with atomic_path(to / path.name) as tmp:
            shutil.copyfile(path, tmp)
    names = {p.name for p in files}
    for stale in published_files(to):
        if stale.name not in names:
            stale.unlink()
    return to, [p.name for p in files]
