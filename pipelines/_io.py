"""Helpers shared by the pipelines: atomic file writes, run provenance, Markdown tables."""

import os
import platform
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

import numpy as np

_PACKAGES = ("qsrank", "numpy", "numba", "scipy", "scikit-learn", "pandas",
             "matplotlib", "pyyaml", "tqdm", "click")


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


def _version(package):
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def git_commit():
    """The repository's HEAD commit (with '-dirty' for local changes), or None outside git."""
    repo = Path(__file__).resolve().parents[1]
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True,
                              text=True, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=repo, capture_output=True,
                               text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return head + ("-dirty" if dirty else "")


def provenance(seed, data):
    """What a reader needs to trust or rerun a result: versions, commit, seed, data, host, time."""
    return {
        "timestamp_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": sys.argv,
        "seed": seed,
        "data": data,
        "git_commit": git_commit(),
        "python": platform.python_version(),
        "packages": {name: _version(name) for name in _PACKAGES},
        "host": platform.node(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
    }


def markdown_table(header, rows):
    """A Markdown pipe table with padded columns, readable as plain text too; cells via str."""
    header = [str(c) for c in header]
    rows = [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]

    def line(row):
        return "| " + " | ".join(cell.ljust(w) for cell, w in zip(row, widths)) + " |"

    return "\n".join([line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|",
                      *map(line, rows)])
