"""Atomic writes of text, JSON, CSV, figures and arrays, only where a regular file or nothing stands
(``os.replace`` would put a file in place of a FIFO or device); `check_output` refuses an output
that is one of a command's inputs."""

import json
import os
import re
import stat
import tempfile
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from qs.data.files import read_json

# the temporary file `atomic_path` writes for NAME: .NAME.<mkstemp's 8 characters>.qsrank-tmp,
# a suffix no other program writes, so that a run's clean-up never takes a user's file for one
TEMPORARY_SUFFIX = ".qsrank-tmp"
TEMPORARY = re.compile(r"\..+\.[a-z0-9_]{8}" + re.escape(TEMPORARY_SUFFIX))
#: what stands where an output cannot be written, as an error names it
_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a device"),
    (stat.S_ISBLK, "a device"),
)


@contextmanager
def atomic_path(path):
    """Yield a temporary path beside `path`, moved onto `path` only if the block succeeds (through a
    symlink; anything else not a regular file is refused)."""
    path = writable_path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=TEMPORARY_SUFFIX)
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o644)
        writable_path(path)  # again: something else may stand there now
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def writable_path(path):
    """Where an output `path` is written (a symlink's target); refused unless a regular file."""
    path = Path(path)
    target = Path(os.path.realpath(path))
    try:
        mode = os.stat(target).st_mode
    except FileNotFoundError:
        return target
    except OSError as err:
        raise ValueError(f"Cannot write {path}: {err.strerror}.") from None
    if not stat.S_ISREG(mode):
        kind = next((name for test, name in _KINDS if test(mode)), "no file")
        via = "" if target == path.absolute() else f" (through the link to {target})"
        raise ValueError(
            f"Cannot write {path}: it is {kind}{via}, not a regular file; an "
            "output is written only as a new file or over a regular file."
        )
    return target


def check_output(out, inputs):
    """Refuse the output `out` before any work when it is not writable or is one of `inputs` ({what:
    path}), which writing it would replace."""
    writable_path(out)
    for what, path in inputs.items():
        try:
            same = os.path.samefile(out, path)
        except OSError:  # one of them does not exist (yet): not the same file
            same = False
        if same:
            raise ValueError(
                f"--out {out} is {what} {path}; writing the output there would "
                "replace it. Choose another output file."
            )


def write_text(path, text):
    """Write `text` to `path` atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_csv(path, frame):
    """Write DataFrame `frame` to `path` as CSV (no index) atomically."""
    with atomic_path(path) as tmp:
        frame.to_csv(tmp, index=False)


def save_figure(fig, stem):
    """Write a matplotlib figure to stem.png and stem.pdf atomically; return the two paths."""
    paths = [Path(f"{stem}.{ext}") for ext in ("png", "pdf")]
    for path in paths:
        with atomic_path(path) as tmp:
            fig.savefig(tmp, format=path.suffix[1:], dpi=150)
    return paths


def write_npz(path, arrays):
    """Write `arrays` to a compressed .npz at `path` atomically."""
    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        np.savez_compressed(fh, **arrays)


def write_json(path, obj):
    """Write `obj` as indented JSON to `path` atomically."""
    write_text(path, json.dumps(obj, indent=2) + "\n")


def read_csv(path, columns=()):
    """The CSV file at `path` as a DataFrame; a ValueError naming the file when it is missing or
    lacks some of `columns`."""
    import pandas as pd

    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path} is missing")
    frame = pd.read_csv(path, keep_default_na=False, na_values=[""])
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(f"{path} lacks column(s) {', '.join(missing)}")
    return frame


def run_data_note(run_dir):
    """The data note a run recorded in its provenance.json; a ValueError when it has none."""
    path = Path(run_dir) / "provenance.json"
    record = read_json(path)
    if not isinstance(record, dict) or not isinstance(record.get("data"), (str, list)):
        raise ValueError(f"{path} is missing or records no data note")
    return record["data"] if isinstance(record["data"], str) else "; ".join(record["data"])
