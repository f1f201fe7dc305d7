"""Run directories: claiming one for one experiment and kind (its marker ``qsrank-run.json``; its
lock held by one process at a time), and the store of finished units, each reused only under the
same code, data and settings."""

import hashlib
import json
import tempfile
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from qs.data.files import read_json
from qs.data.lock import OutputLock, is_lock_file
from qsrank.pipelines._io import TEMPORARY, TEMPORARY_SUFFIX, write_json
from qsrank.pipelines._provenance import code_version

MARKER = "qsrank-run.json"
LOCK = ".qsrank-run.lock"


def claim_run_dir(out, experiment, kind):
    """Make `out` the run directory of (`experiment`, `kind`), checked writable and locked until
    this process ends or calls `release_run_dirs`; refuse another run's directory or a non-empty
    non-run. Removes a killed run's temporary files."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ValueError(f"output directory {out} exists and is not a directory")
    mine = {"experiment": experiment, "kind": kind}
    _check_owner(out, mine)  # before anything is written there
    try:
        out.mkdir(parents=True, exist_ok=True)
        _lock(out)
    except OSError as err:
        raise ValueError(f"cannot write to output directory {out}: {err.strerror or err}") from None
    _check_owner(out, mine)  # again, now that no other process writes there
    try:
        for tmp in out.rglob(f".*{TEMPORARY_SUFFIX}"):
            if _stale_temporary(tmp):
                tmp.unlink()
        with tempfile.TemporaryFile(dir=out):
            pass
        if not (out / MARKER).is_file():
            write_json(out / MARKER, mine)
    except OSError as err:
        raise ValueError(f"cannot write to output directory {out}: {err.strerror or err}") from None
    return out


def _check_owner(out, mine):
    """Refuse directory `out` unless it is new, empty or holds a run of `mine`."""
    if not out.is_dir():
        return
    owner = run_owner(out)
    if owner is None and any(
        not ((p.name == LOCK and is_lock_file(p)) or _stale_temporary(p)) for p in out.iterdir()
    ):
        raise ValueError(
            f"output directory {out} is not empty and holds no qsrank run; "
            "choose a new or empty directory"
        )
    if owner is not None and owner != mine:
        raise ValueError(
            f"output directory {out} holds a {owner['experiment']} {owner['kind']} run, not a "
            f"{mine['experiment']} {mine['kind']} run; choose another directory (writing here "
            "would replace that run's files)"
        )


_HELD = {}  # the run directories this process holds the lock of


def release_run_dirs():
    """Release the locks of the run directories this process holds (the CLI, after each command)."""
    while _HELD:
        _HELD.popitem()[1].release()


def _lock(out):
    """Hold run directory `out`'s lock until the process ends or calls `release_run_dirs`."""
    key = out.resolve()
    if key not in _HELD or not _HELD[key].held():
        _HELD[key] = OutputLock(out / LOCK, f"output directory {out}").acquire()


def _stale_temporary(path):
    """A file `atomic_path` was writing when its run was killed."""
    return path.is_file() and not path.is_symlink() and TEMPORARY.fullmatch(path.name) is not None


def run_owner(out):
    """{"experiment", "kind"} of the run in `out` (its marker), or None."""
    marker = read_json(Path(out) / MARKER)
    if isinstance(marker, dict) and {"experiment", "kind"} <= marker.keys():
        return {"experiment": marker["experiment"], "kind": marker["kind"]}
    return None


class RunStore:
    """The finished units of a run, ``runs/<name>.json``, each stamped with its settings (code and
    data digest included): a unit is done only under the same settings."""

    def __init__(self, root, settings):
        self.root = Path(root) / "runs"
        self.settings = settings

    def path(self, name):
        return self.root / f"{name}.json"

    def get(self, name):
        """The record of unit `name` if it was made under these settings, else None."""
        record = read_json(self.path(name))
        return record if isinstance(record, dict) and self._current(record) else None

    def done(self, name):
        return self.get(name) is not None

    def put(self, name, record):
        """Write the record of unit `name` (atomically, stamped with the settings)."""
        write_json(self.path(name), {**record, "settings": self.settings})

    def records(self, pattern="*.json"):
        """Every record under `pattern` made under these settings, in name order."""
        found = (read_json(p) for p in sorted(self.root.glob(pattern)))
        return [r for r in found if isinstance(r, dict) and self._current(r)]

    def _current(self, record):
        return same(record.get("settings"), self.settings)


def settings_key(**settings):
    """The settings of a run as a store key: the given ones plus the code version."""
    return {"code": code_version(), **settings}


def same(a, b):
    """Equal as JSON (tuples and lists alike, key order ignored)."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def digest_arrays(*arrays):
    """SHA-256 of arrays' shapes, dtypes and bytes (sparse: CSR parts): a run's data identity."""
    h = hashlib.sha256()
    csr = [a.tocsr() if sp.issparse(a) else a for a in arrays]
    parts = [
        p
        for a in csr
        for p in ((a.data, a.indices, a.indptr, np.asarray(a.shape)) if sp.issparse(a) else (a,))
    ]
    for arr in parts:
        arr = np.ascontiguousarray(arr)
        h.update(f"{arr.dtype.str}{arr.shape}".encode())
        h.update(arr.tobytes())
    return h.hexdigest()
