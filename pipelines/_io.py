"""File writing shared by the pipelines: atomic writes of text, JSON, figures and arrays."""

import json
import os
import re
import tempfile
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from qs.data.files import read_json

# the name of the temporary file `atomic_path` writes for NAME: .NAME.<mkstemp's 8 characters>.tmp
TEMPORARY = re.compile(r"\..+\.[a-z0-9_]{8}\.tmp")


@contextmanager
def atomic_path(path):
    """Yield a temporary path beside `path`; move it onto `path` only if the block succeeds.

    Readers never see a half-written file, and a failed run leaves no partial output.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


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
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as fh:
            np.savez_compressed(fh, **arrays)


def write_json(path, obj):
    """Write `obj` as indented JSON to `path` atomically."""
    write_text(path, json.dumps(obj, indent=2) + "\n")


def read_csv(path, columns=()):
    """The CSV file at `path` as a DataFrame, checked to hold `columns`; a ValueError naming
    the file when it is missing or lacks some of them."""
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
