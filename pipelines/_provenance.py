"""What every result records of where it came from: code version, packages, seed, data, host, and
each command that wrote to the run."""

import hashlib
import os
import platform
import subprocess
import sys
from contextlib import contextmanager
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

from qs.data.files import read_json
from qsrank.pipelines._io import write_json

#: the repository's root where the code runs from a clone (installed editable); in an installed
#: wheel, the package's folder, which is no checkout
REPO = Path(__file__).resolve().parents[1]
#: the distributions whose versions a result records (None: not installed); the QP backend
#: (qpsolvers, daqp) and numba's compiler (llvmlite) change timings and iterates
PACKAGES = (
    "qsrank",
    "numpy",
    "numba",
    "llvmlite",
    "scipy",
    "scikit-learn",
    "qpsolvers",
    "daqp",
    "pandas",
    "matplotlib",
    "h5py",
    "pyyaml",
    "tqdm",
    "click",
    "torch",
    "dask",
)


def _version(package):
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


#: tracked paths that are not code (pathspecs, from the repository root)
NOT_CODE = ("results", "docs", "*.md")


def _git(args, repo):
    return subprocess.run(
        ["git", *args], cwd=repo, capture_output=True, timeout=30, check=True
    ).stdout


def code_version(repo=REPO):
    """The HEAD commit of `repo`, ``<commit>-dirty-<digest>`` with local edits (tracked changes and
    untracked source files, outside `NOT_CODE`), ``qsrank-<version>`` outside a checkout: a
    stored run is reused only under the very same code."""
    if not (Path(repo) / ".git").exists():
        return f"qsrank-{_version('qsrank')}"
    code = ["--", ".", *(f":(exclude){p}" for p in NOT_CODE)]
    try:
        head = _git(["rev-parse", "HEAD"], repo).decode().strip()
        diff = _git(["diff", "HEAD", "--binary", *code], repo)
        untracked = _git(["ls-files", "--others", "--exclude-standard", "-z", *code], repo)
    except (OSError, subprocess.SubprocessError):
        return None
    names = sorted(n for n in untracked.decode().split("\0") if n.endswith((".py", ".yaml")))
    if not diff and not names:
        return head
    h = hashlib.sha256(diff)
    for name in names:
        h.update(name.encode() + b"\0")
        h.update((Path(repo) / name).read_bytes())
    return f"{head}-dirty-{h.hexdigest()[:16]}"


def provenance(seed, data, data_sha256=None, overrides=(), status="complete", code=None):
    """Versions, code (`code`: the version the command began with), command, `--set` overrides,
    `status` ("complete" or "interrupted: ..."), seed, data, host, time and the host's load
    averages (1, 5, 15 minutes) as the record is written: timings of a loaded machine say so."""
    return {
        "timestamp_utc": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": sys.argv,
        "overrides": list(overrides),
        "status": status,
        "seed": seed,
        "data": data,
        "data_sha256": data_sha256,
        "git_commit": code or code_version(),
        "python": platform.python_version(),
        "packages": {name: _version(name) for name in PACKAGES},
        "host": platform.node(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def write_provenance(
    out, seed, data, settings, data_sha256=None, overrides=(), status="complete", code=None
):
    """Write out/provenance.json: this command's provenance plus the list of every command that
    wrote to the run (a figure's panels, a resumed run's sittings)."""
    path = Path(out) / "provenance.json"
    record = provenance(seed, data, data_sha256, overrides, status, code)
    previous = read_json(path)
    commands = previous.get("commands", []) if isinstance(previous, dict) else []
    kept = ("command", "overrides", "timestamp_utc", "status", "git_commit")
    commands.append({**{k: record[k] for k in kept}, "settings": settings})
    write_json(path, {**record, "commands": commands})
    return path


@contextmanager
def recording_interruption(out, seed, data, settings, data_sha256=None, overrides=(), code=None):
    """Run the block; if it stops early, record the command as ``interrupted: <what>`` in
    out/provenance.json before the error goes on."""
    try:
        yield
    except BaseException as err:
        what = type(err).__name__ + (f": {' '.join(str(err).split())[:200]}" if str(err) else "")
        write_provenance(
            out,
            seed,
            data,
            settings,
            data_sha256,
            overrides,
            status=f"interrupted: {what}",
            code=code,
        )
        raise
