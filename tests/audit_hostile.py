"""One hostile-input audit of the surfaces of issue 37: `qsrank fit`, `predict`, `evaluate`,
model files, `--out` targets, `qsrank load verify`, the library's losses at large spreads,
the input formats and configs; every kind of case in a process of its own, tallied.

A kind is one (surface, mutation, format) triple: a hostile file or setting, written in one
format, given to one command. Each runs in a scratch folder (its working directory), in a
process limited to ``--timeout`` seconds and ``--limit-kib`` of address space (``ulimit
-v``), and ends one of these ways:

- ``clean``: refused with exit 1 (2: a usage error) and one ``Error:`` line naming the
  problem, or (where the input is valid) exit 0 with the right result; in either case every
  file that stood in the folder before keeps its bytes (a FIFO, a device or a socket keeps
  its kind);
- ``traceback``: a Python traceback, or an error that is not one line;
- ``crash``: killed by a signal, still running at the timeout, or out of memory (the
  ``ulimit``);
- ``silent``: exit 0 where a refusal was due (or without the warning due), a wrong result,
  or a file that stood before changed or lost;
- ``refused``: a valid input refused (counted apart: not hostile input handled badly, but
  good input lost).

The cases of the three older scripts run as kinds of their own (surfaces ``outputs``,
``own data`` and ``readers``): those of `tests/audit_outputs.py`, `tests/fuzz_own_data.py`
and the mutations of `tests/fuzz_readers.py` (a kind per format and mutation, its damaged
copies read in one process: a damaged copy read as other data is ``silent``).

Not a unit test: run it as ``.venv/bin/python tests/audit_hostile.py --out runs/audit``
(``--jobs 2`` processes at a time; ``--case SUBSTRING`` for the kinds whose name holds
it; ``-v`` a line per kind; ``--keep-log LOG`` takes the kinds an earlier ``-v`` run
printed from its output, but those named in ``--rerun FILE``, and runs the rest). It writes
``tally.md`` (outcomes per surface and in all, then each kind not clean, with the reason
where it is out of scope) and ``cases.csv`` (every kind, its outcome and why) under
``--out``. tests/test_audit_hostile.py runs a few of its kinds.
"""

import argparse
import contextlib
import csv
import hashlib
import io
import json
import os
import resource
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

if __package__ in (None, ""):  # run as a script: the older scripts are imported as tests.*
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

OUTCOMES = ("clean", "traceback", "crash", "silent", "refused")
CODE = "import sys; from qsrank.main import main; main(sys.argv[1:], prog_name='qsrank')"
FAST = ["--C", "1", "--baseline-C", "1"]
NAMES = ["f0", "f1", "f2", "f3"]
FORMATS = ("csv", "parquet", "svm", "npz", "csr", "mat")
TABLES = ("csv", "tsv", "parquet")
UNNAMED = ("svm", "npz", "csr", "mat")
SUFFIX = {"csr": "npz"}
ENV = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


@dataclass
class Case:
    """What one kind runs and what it must end with.

    ``argv`` are qsrank's arguments, or ``code`` a Python program (its ``sys.argv[1:]`` the
    ``argv``); ``expect`` is ``refuse``, ``succeed``, ``warn`` (exit 0 and a ``Warning:``
    line) or ``either`` (a one-line refusal or a success passing ``check``); ``check``
    returns what is wrong with a success (or None); ``changes`` are the paths the command may
    write over."""

    argv: list = field(default_factory=list)
    code: str | None = None
    expect: str = "refuse"
    check: object = None
    changes: tuple = ()
    timeout: float | None = None


@dataclass
class Kind:
    """One (surface, mutation, format) triple and how to set its case up in a folder."""

    surface: str
    mutation: str
    fmt: str
    build: object  # root -> Case, or root -> [(outcome, why)] for the older scripts' cases

    @property
    def name(self):
        return f"{self.surface} / {self.mutation} / {self.fmt}"


# ---------------------------------------------------------------------------- data


def _base(n=40, seed=0, distinct=False):
    """Four features rounded so that text round-trips them, labels 0 and 1; with
    ``distinct``, each column has a mean and spread of its own (so that a permutation of the
    columns can show in files without column names)."""
    rng = np.random.default_rng(seed)
    y = np.tile([0, 1], n // 2)
    X = rng.normal(size=(n, 4))
    if distinct:
        X = X * np.arange(1, 5) + 3 * np.arange(4)
    X = np.round(X + y[:, None] * np.array([1.5, 0.5, 0, 0]), 4)
    return pd.DataFrame(X, columns=NAMES).assign(label=y)


def _write(frame, path, fmt, zero_based=False):
    """``frame`` (features, then the column ``label``; names may repeat) as ``fmt`` at
    ``path``."""
    labels = frame.iloc[:, -1]
    features = frame.iloc[:, :-1]
    if fmt in ("csv", "tsv"):
        frame.to_csv(path, index=False, sep="," if fmt == "csv" else "\t")
    elif fmt == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        arrays = [pa.array(frame.iloc[:, k].tolist()) for k in range(frame.shape[1])]
        pq.write_table(pa.Table.from_arrays(arrays, names=list(map(str, frame.columns))), path)
    elif fmt == "svm":
        base = 0 if zero_based else 1
        lines = []
        for (_, row), label in zip(features.iterrows(), labels):
            pairs = " ".join(f"{k + base}:{v}" for k, v in enumerate(row.tolist()) if v != 0)
            lines.append(f"{label} {pairs}".rstrip())
        path.write_text("\n".join(lines) + ("\n" if lines else ""))
    elif fmt == "npz":
        y = labels.to_numpy()
        np.savez(path, X=features.to_numpy(), y=y.astype(str) if y.dtype == object else y)
    elif fmt == "csr":
        import scipy.sparse as sp

        A = sp.csr_matrix(features.to_numpy(float).reshape(features.shape))
        np.savez(
            path,
            X_data=A.data,
            X_indices=A.indices,
            X_indptr=A.indptr,
            X_shape=np.array(A.shape),
            y=labels.to_numpy().astype(str) if labels.dtype == object else labels.to_numpy(),
        )
    elif fmt == "mat":
        import scipy.io

        scipy.io.savemat(path, {"X": features.to_numpy(), "y": labels.to_numpy()})
    return path


def _file(root, stem, fmt):
    return root / f"{stem}.{SUFFIX.get(fmt, fmt)}"


def _fit_argv(train, fmt, out, test=None):
    label = ["--label-column", "label"] if fmt in TABLES else []
    extra = ["--test", test] if test is not None else []
    return ["fit", train, *extra, *label, *FAST, "--out", out]


_MODELS = {}  # a model fitted once per format, copied into each predict case
_MODELS_LOCK = threading.Lock()


def _model(root, fmt, store, distinct=False):
    """A run directory fitted on the base data as ``fmt``, copied to root/model."""
    key = (fmt, distinct)
    with _MODELS_LOCK:
        if key not in _MODELS:
            folder = store / f"model-{fmt}-{distinct}"
            folder.mkdir(parents=True, exist_ok=True)
            train = _write(_base(distinct=distinct), _file(folder, "train", fmt), fmt)
            result = _run(CODE, _fit_argv(train, fmt, folder / "run"), folder, 600, None)
            if result["rc"] != 0:
                raise RuntimeError(f"the audit's own fit failed: {result['err'][-2000:]}")
            _MODELS[key] = folder / "run"
    target = root / "model"
    target.mkdir()
    for name in ("model.json", "model.npz"):
        shutil.copy(_MODELS[key] / name, target / name)
    return target


def _scores_of(model, X):
    """The scores the model's formula gives the rows X."""
    with np.load(model / "model.npz") as npz:
        coef, intercept, mean, scale = (npz[k] for k in ("coef", "intercept", "mean", "scale"))
    return ((np.asarray(X, float) - mean) / scale) @ coef.T + intercept


def _scores_match(model, X, out):
    def check(result):
        if not out.is_file():
            return "no scores written"
        got = pd.read_csv(out).to_numpy(float)
        want = _scores_of(model, X)
        if got.shape != want.shape or not np.allclose(got, want, rtol=1e-9, atol=1e-12):
            return "scores differ from the model's formula on the rows given"
        return None

    return check


def _has_model(run):
    def check(result):
        if not (run / "model.json").is_file():
            return "no model.json"
        metrics = pd.read_csv(run / "metrics.csv")
        numbers = metrics.select_dtypes("number").to_numpy(float)
        return None if np.isfinite(numbers[~np.isnan(numbers)]).all() else "non-finite metrics"

    return check


def _classes_are(run, n):
    def check(result):
        classes = json.loads((run / "model.json").read_text())["classes"]
        return None if len(classes) == n else f"classes {classes}, expected {n}"

    return check


# ---------------------------------------------------------------------------- data kinds
#
# A mutation changes the base frame (``frame``) or the written bytes (``raw``) of one file;
# each is crossed with the formats it can be written in and the commands that read such a
# file: ``fit`` (the training file), ``test`` (fit's --test beside a good training file) and
# ``predict`` (with a model fitted on the good file of the same format).


def _cell(value, column=1, row=5):
    def edit(f):
        f = f.astype({f.columns[column]: object}) if isinstance(value, str) else f
        f.iloc[row, column] = value
        return f

    return edit


def _label(values):
    def edit(f):
        f = f.copy()
        f["label"] = [values[k % len(values)] for k in range(len(f))]
        return f

    return edit


def _rename(names):
    def edit(f):
        f = f.copy()
        f.columns = names
        return f

    return edit


def _spread(f):
    f = f.copy()
    f["f2"] = 1e300
    f.loc[0, "f2"] = -1e300
    return f


def _permute(f):
    return f[[*NAMES[::-1], "label"]]


def _subnormal(f):
    f = f.copy()
    f["f3"] = np.linspace(1e-310, 2e-310, len(f))
    return f


def _drop_feature(f):
    return f.drop(columns="f3")


def _extra_feature(f):
    return f.assign(f4=1.0)[[*NAMES, "f4", "label"]]


def _constant(f):
    return f.assign(f2=3.0)


def _zero_features(f):
    f = f.copy()
    f[NAMES] = 0.0
    return f


def _timestamps(f):
    f = f.copy()
    f["f1"] = pd.date_range("2024-01-01", periods=len(f), freq="D")
    return f


def _classes(k):
    return _label([str(c) for c in range(k)])


def _truncate(raw):
    return raw[: int(len(raw) * 0.6)]


def _garbage(raw):
    return bytes(np.random.default_rng(1).integers(0, 256, 400, dtype=np.uint8))


def _bom(raw):
    return b"\xef\xbb\xbf" + raw


def _non_utf8(raw):
    return raw.replace(b"\n1", b"\n\xff1", 1)


def _crlf(raw):
    return raw.replace(b"\n", b"\r\n")


def _svm_line(line):
    return lambda raw: raw + line


def _svm_zero_index(raw):
    return raw.replace(b" 1:", b" 0:", 1)


#: (mutation, frame edit, bytes edit, formats, expected outcome per command)
REFUSE = {"fit": "refuse", "test": "refuse", "predict": "refuse"}
LABEL_ONLY = {"predict": "succeed"}


def _e(fit, test=None, predict=None):
    return {"fit": fit, "test": test or fit, "predict": predict or test or fit}


MUTATIONS = [
    ("zero rows", lambda f: f.iloc[:0], None, FORMATS, REFUSE),
    ("one row", lambda f: f.iloc[:1], None, FORMATS, _e("refuse", "refuse", "succeed")),
    ("NaN cell", _cell(np.nan), None, (*FORMATS, "tsv"), REFUSE),
    ("inf cell", _cell(np.inf), None, FORMATS, REFUSE),
    ("-inf cell", _cell(-np.inf), None, FORMATS, REFUSE),
    ("1e308 cell", _cell(1e308), None, FORMATS, _e("refuse", "either", "either")),
    ("column of +-1e300", _spread, None, FORMATS, _e("refuse", "either", "either")),
    ("subnormal column", _subnormal, None, FORMATS, _e("either")),
    ("text feature cell", _cell("abc"), None, (*TABLES, "npz"), REFUSE),
    ("timestamp feature", _timestamps, None, ("parquet", "csv"), REFUSE),
    ("repeated label name", _rename(["f0", "f1", "f2", "label", "label"]), None, TABLES, None),
    ("repeated feature name", _rename(["f0", "f0", "f2", "f3", "label"]), None, TABLES, REFUSE),
    (
        "near-miss label name",
        _rename([*NAMES, "Label"]),
        None,
        TABLES,
        _e("refuse", "refuse", "either"),
    ),
    (
        "label name with a space",
        _rename([*NAMES, "label "]),
        None,
        TABLES,
        _e("refuse", "refuse", "either"),
    ),
    ("empty column name", _rename(["", *NAMES[1:], "label"]), None, TABLES, _e("either")),
    (
        "labels 01 and 1",
        _label(["01", "1", "0"]),
        None,
        (*TABLES, "npz"),
        _e("either", "either", "succeed"),
    ),
    (
        "labels 1 and 1.0",
        _label(["1", "1.0", "0"]),
        None,
        (*TABLES, "npz"),
        _e("either", "either", "succeed"),
    ),
    ("label NA", _label(["NA", "b"]), None, (*TABLES, "npz"), _e("succeed", "succeed", "succeed")),
    (
        "label holding a newline",
        _label(["x\ny", "b"]),
        None,
        (*TABLES, "npz"),
        _e("succeed", "succeed", "succeed"),
    ),
    (
        "label holding a |",
        _label(["x|y", "b"]),
        None,
        (*TABLES, "npz"),
        _e("succeed", "succeed", "succeed"),
    ),
    (
        "missing label",
        _cell(np.nan, column=4),
        None,
        (*TABLES, "npz", "mat"),
        _e("refuse", "refuse", "succeed"),
    ),
    ("one class", _label([1]), None, FORMATS, _e("refuse", "refuse", "succeed")),
    ("three classes", _classes(3), None, FORMATS, _e("succeed")),
    ("a class per row", _label(list(range(40))), None, FORMATS, _e("refuse", "refuse", "succeed")),
    ("permuted columns", _permute, None, FORMATS, None),
    ("a feature missing", _drop_feature, None, FORMATS, _e("succeed", "refuse", "refuse")),
    ("an extra feature", _extra_feature, None, FORMATS, _e("succeed", "refuse", "refuse")),
    ("constant column", _constant, None, FORMATS, _e("succeed", "succeed", "succeed")),
    ("all features zero", _zero_features, None, FORMATS, _e("either")),
    ("duplicated rows", lambda f: pd.concat([f, f]), None, FORMATS, _e("succeed")),
    ("truncated", None, _truncate, FORMATS, _e("either")),
    ("garbage bytes", None, _garbage, FORMATS, REFUSE),
    ("empty file", None, lambda raw: b"", FORMATS, REFUSE),
    ("byte-order mark", None, _bom, ("csv", "tsv"), _e("either")),
    ("CRLF line ends", None, _crlf, ("csv", "tsv", "svm"), _e("succeed")),
    ("a non-UTF-8 byte", None, _non_utf8, ("csv", "tsv", "svm"), _e("either")),
    (
        "index 0 in a one-based file",
        None,
        _svm_zero_index,
        ("svm",),
        _e("either", "refuse", "refuse"),
    ),
    (
        "feature index 1e8",
        None,
        _svm_line(b"1 100000000:1\n"),
        ("svm",),
        _e("either", "refuse", "refuse"),
    ),
    (
        "feature index 2e9",
        None,
        _svm_line(b"1 2000000000:1\n"),
        ("svm",),
        _e("either", "refuse", "refuse"),
    ),
    ("feature index 1e20", None, _svm_line(b"1 100000000000000000000:1\n"), ("svm",), REFUSE),
    ("negative feature index", None, _svm_line(b"1 -3:1\n"), ("svm",), REFUSE),
    ("fractional feature index", None, _svm_line(b"1 1.5:1\n"), ("svm",), REFUSE),
    ("value text", None, _svm_line(b"1 2:abc\n"), ("svm",), REFUSE),
    ("label text", None, _svm_line(b"abc 2:1\n"), ("svm",), _e("either", "either", "succeed")),
    ("repeated index on a line", None, _svm_line(b"1 2:1 2:3\n"), ("svm",), _e("either")),
    ("unsorted indices", None, _svm_line(b"1 3:1 2:3\n"), ("svm",), _e("either")),
    ("a qid field", None, _svm_line(b"1 qid:3 2:1\n"), ("svm",), _e("either")),
]


def _npz_member(**arrays):
    """An .npz written from the base frame with members replaced (None: left out)."""

    def write(path):
        f = _base()
        members = {"X": f[NAMES].to_numpy(), "y": f["label"].to_numpy(), **arrays}
        np.savez(path, **{k: v for k, v in members.items() if v is not None})

    return write


def _mat_member(**arrays):
    def write(path):
        import scipy.io

        f = _base()
        members = {"X": f[NAMES].to_numpy(), "y": f["label"].to_numpy(), **arrays}
        scipy.io.savemat(path, {k: v for k, v in members.items() if v is not None})

    return write


def _csr_shape(shape):
    def write(path):
        import scipy.sparse as sp

        f = _base()
        A = sp.csr_matrix(f[NAMES].to_numpy())
        np.savez(
            path,
            X_data=A.data,
            X_indices=A.indices,
            X_indptr=A.indptr,
            X_shape=np.array(shape),
            y=f["label"].to_numpy(),
        )

    return write


def _declared_npz(shape):
    def write(path):
        header = io.BytesIO()
        np.lib.format.write_array_header_1_0(
            header, {"descr": "<f8", "fortran_order": False, "shape": shape}
        )
        y = io.BytesIO()
        np.save(y, np.tile([0.0, 1.0], 20))
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
            archive.writestr("X.npy", header.getvalue() + bytes(4096))
            archive.writestr("y.npy", y.getvalue())

    return write


_ROWS = np.arange(40)
#: (mutation, writer, format, expected outcome per command): files no frame can describe
ARRAYS = [
    ("object X (pickle)", _npz_member(X=np.array([[object()] * 4] * 40)), "npz", REFUSE),
    (
        "object y (pickle)",
        _npz_member(y=np.array([object()] * 40)),
        "npz",
        _e("refuse", "refuse", "either"),
    ),
    ("int X", _npz_member(X=np.arange(160).reshape(40, 4) % 7), "npz", _e("succeed")),
    ("bool X", _npz_member(X=(np.arange(160).reshape(40, 4) % 3 == 0)), "npz", _e("succeed")),
    ("complex X", _npz_member(X=np.ones((40, 4)) * 1j), "npz", REFUSE),
    ("text X", _npz_member(X=np.full((40, 4), "1.5")), "npz", _e("either")),
    ("3-D X", _npz_member(X=np.zeros((40, 2, 2))), "npz", REFUSE),
    ("1-D X", _npz_member(X=np.zeros(40)), "npz", _e("refuse", "refuse", "either")),
    ("2-D y", _npz_member(y=(_ROWS % 2)[:, None]), "npz", _e("either")),
    ("y longer than X", _npz_member(y=np.arange(41) % 2), "npz", _e("refuse", "refuse", "either")),
    ("X missing", _npz_member(X=None), "npz", REFUSE),
    ("y missing", _npz_member(y=None), "npz", _e("refuse", "refuse", "either")),
    ("extra member", _npz_member(Z=np.zeros(3)), "npz", _e("either")),
    (
        "X float16",
        _npz_member(X=np.ones((40, 4), np.float16) * (_ROWS % 3)[:, None]),
        "npz",
        _e("either"),
    ),
    ("X 65504 float16", _npz_member(X=np.full((40, 4), 65504, np.float16)), "npz", _e("either")),
    ("declared 10 TB", _declared_npz((4_000_000, 300_000)), "npz", REFUSE),
    ("declared shape -1", _declared_npz((-1, 4)), "npz", REFUSE),
    ("shape 2e9 columns", _csr_shape((40, 2_000_000_000)), "csr", _e("either", "refuse", "refuse")),
    ("shape 1e12 rows", _csr_shape((10**12, 4)), "csr", REFUSE),
    ("shape negative", _csr_shape((40, -4)), "csr", REFUSE),
    ("shape 3-D", _csr_shape((40, 4, 1)), "csr", REFUSE),
    ("3-D X", _mat_member(X=np.zeros((40, 2, 2))), "mat", REFUSE),
    ("y longer than X", _mat_member(y=np.arange(41) % 2), "mat", _e("refuse", "refuse", "either")),
    ("X missing", _mat_member(X=None), "mat", REFUSE),
    ("text X", _mat_member(X=np.full((40, 4), "1.5")), "mat", _e("either")),
    (
        "cell-array y",
        _mat_member(y=np.array([["a"], ["b"]] * 20, dtype=object)),
        "mat",
        _e("either", "either", "succeed"),
    ),
    ("int X", _mat_member(X=np.arange(160).reshape(40, 4) % 7), "mat", _e("succeed")),
]


def _special(kind):
    """A path that is not a regular file: a FIFO, a link to /dev/zero, a loop ..."""

    def make(path):
        if kind == "FIFO":
            os.mkfifo(path)
        elif kind == "link to /dev/zero":
            path.symlink_to("/dev/zero")
        elif kind == "directory":
            path.mkdir()
        elif kind == "symlink loop":
            path.symlink_to(path.name)
        elif kind == "dangling link":
            path.symlink_to("nowhere")
        elif kind == "socket":
            sock = socket.socket(socket.AF_UNIX)
            sock.bind(str(path))
            sock.close()

    return make


SPECIAL = ("FIFO", "link to /dev/zero", "directory", "symlink loop", "dangling link", "socket")


#: the mutations also given as fit's --test (the others reach the same readers as predict)
TEST_TOO = (
    "zero rows",
    "NaN cell",
    "1e308 cell",
    "one class",
    "three classes",
    "permuted columns",
    "a feature missing",
    "an extra feature",
    "index 0 in a one-based file",
    "feature index 1e8",
)


#: the mutations of labels alone, which predict leaves out of its reading
LABELS_ONLY = (
    "labels 01 and 1",
    "labels 1 and 1.0",
    "label NA",
    "label holding a newline",
    "label holding a |",
    "missing label",
    "one class",
    "three classes",
    "a class per row",
    "label text",
)
#: the mutations written in every format (the others as CSV, svmlight and .npz only)
EVERY_FORMAT = (
    "zero rows",
    "NaN cell",
    "garbage bytes",
    "empty file",
    "truncated",
    "timestamp feature",
    "repeated label name",
    "labels 01 and 1",
    "permuted columns",
)


def data_kinds(store):
    kinds = []

    def add(mutation, fmt, command, expect, write, check_success, distinct=False):
        def build(root, fmt=fmt, command=command, expect=expect, write=write):
            path = _file(root, "data", fmt)
            frame = write(path)  # the rows meant (for the check of a success), or None
            if command == "fit":
                out = root / "run"
                return Case(_fit_argv(path, fmt, out), expect=expect, check=_has_model(out))
            if command == "test":
                train = _write(_base(distinct=distinct), _file(root, "train", fmt), fmt)
                out = root / "run"
                return Case(
                    _fit_argv(train, fmt, out, test=path), expect=expect, check=_has_model(out)
                )
            model, out = _model(root, fmt, store, distinct), root / "scores.csv"
            label = ["--label-column", "label"] if fmt in TABLES else []
            check = None
            if frame is not None and check_success:
                check = _scores_match(model, frame[NAMES].to_numpy(float), out)
            return Case(["predict", model, path, *label, "--out", out], expect=expect, check=check)

        kinds.append(Kind(f"data: {command}", mutation, fmt, build))

    for mutation, edit, raw_edit, formats, expects in MUTATIONS:
        for fmt in formats:
            if fmt in ("parquet", "mat", "csr") and mutation not in EVERY_FORMAT:
                continue
            for command in ("fit", "test", "predict"):
                if command == "test" and mutation not in TEST_TOO:
                    continue
                if command == "predict" and mutation in LABELS_ONLY:
                    continue
                expect = (expects or {}).get(command)
                if mutation == "repeated label name":
                    expect = "refuse" if command != "predict" else "either"
                if mutation == "a feature missing" and fmt == "svm" and command != "fit":
                    expect = "succeed"  # svmlight leaves zeros out: the last feature is 0
                if mutation == "permuted columns":  # columns alike: no fingerprint tells
                    expect = "succeed" if fmt in TABLES or command == "fit" else "either"
                if expect is None:
                    continue

                def write(path, fmt=fmt, edit=edit, raw_edit=raw_edit, mutation=mutation):
                    frame = _base()
                    mutated = edit(frame) if edit else frame
                    _write(mutated, path, fmt)
                    if raw_edit:
                        path.write_bytes(raw_edit(path.read_bytes()))
                    if mutation == "permuted columns" and fmt in TABLES:
                        return frame  # matched by name: the same scores
                    if mutation in ("constant column", "duplicated rows", "int X"):
                        return mutated
                    return frame if edit is None or raw_edit else None

                check = mutation in ("permuted columns", "constant column", "duplicated rows")
                add(mutation, fmt, command, expect, write, check)
    for fmt in UNNAMED:  # columns of their own means and spreads, reversed: a warning is due
        for command in ("fit", "test", "predict"):

            def write(path, fmt=fmt):
                frame = _base(seed=1, distinct=True)
                _write(_permute(frame), path, fmt)
                return frame

            expect = "succeed" if command == "fit" else "warn"
            add("permuted distinct columns", fmt, command, expect, write, False, distinct=True)
    for mutation, writer, fmt, expects in ARRAYS:
        for command in ("fit", "predict") if expects["predict"] == "refuse" else ("fit",):

            def write(path, writer=writer):
                writer(path)

            add(mutation, fmt, command, expects[command], write, False)
    for special in SPECIAL:
        for fmt in ("csv", "parquet", "svm", "npz", "mat"):
            for command in ("fit", "predict") if fmt == "csv" else ("fit",):

                def write(path, special=special):
                    _special(special)(path)

                add(f"input a {special}", fmt, command, "refuse", write, False)
    return kinds


# ---------------------------------------------------------------------------- --out kinds


def _mknod_null(path):
    """A character device like /dev/null, made in the scratch folder (so that a write that
    replaces it replaces nothing of the machine's)."""
    os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))


OUT_TARGETS = {
    # target: (setup(root, inputs) -> out path, expected for fit, predict, evaluate)
    "character device": (lambda r, i: (_mknod_null(r / "dev"), r / "dev")[1], "refuse"),
    "FIFO": (lambda r, i: (os.mkfifo(r / "fifo"), r / "fifo")[1], "refuse"),
    "socket": (lambda r, i: (_special("socket")(r / "sock"), r / "sock")[1], "refuse"),
    "link to a FIFO": (
        lambda r, i: (os.mkfifo(r / "fifo"), (r / "l").symlink_to("fifo"), r / "l")[2],
        "refuse",
    ),
    "link to a device": (
        lambda r, i: (_mknod_null(r / "dev"), (r / "l").symlink_to("dev"), r / "l")[2],
        "refuse",
    ),
    "dangling link": (lambda r, i: ((r / "l").symlink_to("gone/x"), r / "l")[1], "either"),
    "symlink loop": (lambda r, i: ((r / "l").symlink_to("l"), r / "l")[1], "refuse"),
    "the first input": (lambda r, i: i[0], "refuse"),
    "the second input": (lambda r, i: i[1], "refuse"),
    "a hard link to an input": (lambda r, i: (os.link(i[0], r / "hard"), r / "hard")[1], "refuse"),
    "a symlink to an input": (
        lambda r, i: ((r / "soft").symlink_to(i[0]), r / "soft")[1],
        "refuse",
    ),
    "under a regular file": (
        lambda r, i: ((r / "plain").write_text("x\n"), r / "plain" / "out")[1],
        "refuse",
    ),
    "a name of 300 characters": (lambda r, i: r / ("n" * 300), "refuse"),
    "a name holding a newline": (lambda r, i: r / "a\nb", "succeed"),
    "an existing regular file": (
        lambda r, i: ((r / "old").write_text("old\n"), r / "old")[1],
        "succeed",
    ),
    "a new folder path": (lambda r, i: r / "new" / "deeper" / "out", "either"),
    "a foreign lock beside": (
        lambda r, i: ((r / ".qsrank-run.lock").write_text("mine\n"), r / "out")[1],
        "succeed",
    ),
    "a foreign tmp beside": (
        lambda r, i: ((r / ".out.abcdefgh.tmp").write_text("mine\n"), r / "out")[1],
        "succeed",
    ),
}
#: the targets `fit --out` (a run directory) meets in addition
FIT_TARGETS = {
    "a non-empty foreign folder": (
        lambda r, i: ((r / "d").mkdir(), (r / "d" / "notes.txt").write_text("x\n"), r / "d")[2],
        "refuse",
    ),
    "a folder holding only a foreign lock": (
        lambda r, i: ((r / "d").mkdir(), (r / "d" / ".qsrank-run.lock").write_text("x\n"), r / "d")[
            2
        ],
        "refuse",
    ),
    "a folder holding only a foreign tmp": (
        lambda r, i: (
            (r / "d").mkdir(),
            (r / "d" / ".notes.abcdefgh.tmp").write_text("x\n"),
            r / "d",
        )[2],
        "refuse",
    ),
    "an empty folder": (lambda r, i: ((r / "d").mkdir(), r / "d")[1], "succeed"),
    "the folder of the data": (lambda r, i: r, "refuse"),
    "a symlink to a foreign folder": (
        lambda r, i: (
            (r / "d").mkdir(),
            (r / "d" / "x.txt").write_text("x\n"),
            (r / "l").symlink_to("d"),
            r / "l",
        )[3],
        "refuse",
    ),
}


def out_kinds(store):
    kinds = []
    for command in ("fit", "predict", "evaluate"):
        targets = {**OUT_TARGETS, **(FIT_TARGETS if command == "fit" else {})}
        for target, (setup, expect) in targets.items():
            if command == "fit" and target in ("a foreign lock beside", "a foreign tmp beside"):
                continue
            if command == "fit" and target == "an existing regular file":
                expect = "refuse"  # a run directory, not a file

            def build(root, command=command, setup=setup, expect=expect, target=target):
                if command == "fit":
                    train = _write(_base(), root / "train.csv", "csv")
                    test = _write(_base(seed=1), root / "test.csv", "csv")
                    out = setup(root, [train, test])
                    argv = _fit_argv(train, "csv", out, test=test)
                    check = _has_model(out) if expect != "refuse" else None
                elif command == "predict":
                    model = _model(root, "csv", store)
                    data = _write(_base(seed=1), root / "data.csv", "csv")
                    out = setup(root, [data, model / "model.json"])
                    argv = ["predict", model, data, "--label-column", "label", "--out", out]
                    check = _scores_match(model, _base(seed=1)[NAMES].to_numpy(), out)
                else:
                    scores = root / "scores.csv"
                    pd.DataFrame({"1": np.linspace(0, 1, 40)}).to_csv(scores, index=False)
                    labels = _write(_base(), root / "labels.csv", "csv")
                    out = setup(root, [scores, labels])
                    argv = ["evaluate", scores, labels, "--label-column", "label", "--out", out]
                    check = None
                changes = (
                    (out,) if target == "an existing regular file" and expect != "refuse" else ()
                )
                return Case(argv, expect=expect, check=check, changes=changes)

            kinds.append(Kind("out", target, command, build))
    return kinds


# ---------------------------------------------------------------------------- model kinds

FIELD_VALUES = {
    "deleted": None,
    "a string": "x",
    "NaN": float("nan"),
    "a nested object": {"a": {"b": [1]}},
}


def _edit_json(model, key, value, rehash):
    from tests.audit_outputs import _rehash

    path = model / "model.json"
    meta = json.loads(path.read_text())
    if value is None:
        meta.pop(key, None)
    else:
        meta[key] = None if value == "null" else value
    path.write_text(json.dumps(meta))
    if rehash:
        with contextlib.suppress(ValueError):  # qsrank's checksum has no NaN: left unmatched
            _rehash(model)


def _edit_npz(model, member, value, rehash=True):
    from tests.audit_outputs import _rehash

    with np.load(model / "model.npz") as npz:
        kept = {k: npz[k] for k in npz.files}
    if value is None:
        kept.pop(member)
    else:
        kept[member] = value(kept[member]) if callable(value) else value
    buf = io.BytesIO()
    np.savez_compressed(buf, **kept)
    (model / "model.npz").write_bytes(buf.getvalue())
    if rehash:
        _rehash(model)


NPZ_VALUES = {
    "deleted": None,
    "NaN": lambda a: np.full_like(a, np.nan),
    "another shape": lambda a: np.zeros(a.size + 1),
    "object (pickle)": lambda a: np.array([object()] * a.size, dtype=object),
    "float32": lambda a: a.astype(np.float32),
}


#: the fields also edited without the checksum made to match (it refuses every such edit)
UNCHECKED_TOO = ("feature_names", "classes", "n_features", "sha256")


#: the fields of model.json that describe the training, read by nothing that scores
FREE_TEXT = ("qsrank_version", "label_column", "solver")


def model_kinds(store):
    kinds = []

    def add(mutation, fmt, edit, expect="refuse", names=NAMES):
        def build(root, edit=edit, expect=expect):
            model = _model(root, "csv", store)
            data = _write(_base(seed=1), root / "data.csv", "csv")
            edit(model)
            out = root / "scores.csv"
            return Case(
                ["predict", model, data, "--label-column", "label", "--out", out],
                expect=expect,
                check=_scores_match(model, _base(seed=1)[names].to_numpy(), out),
            )

        kinds.append(Kind("model", mutation, fmt, build))

    meta = json.loads((_model_probe(store) / "model.json").read_text())
    for key in meta:
        for what, value in FIELD_VALUES.items():
            for rehash in (False, True):
                fmt = "model.json, checksum matched" if rehash else "model.json"
                if key in ("sha256", "weights_sha256") and rehash:
                    continue
                if not rehash and (what != "a string" or key not in UNCHECKED_TOO):
                    continue  # the checksum refuses them all alike
                # free text about the training, not about the scores: any string will do
                free = rehash and what == "a string" and key in FREE_TEXT
                add(
                    f"{key} {what}",
                    fmt,
                    lambda m, key=key, value=value, rehash=rehash: _edit_json(
                        m, key, value, rehash
                    ),
                    "either" if free else "refuse",
                )
    valid = {
        "loss ndcg": ("loss", "ndcg"),
        "solver frank_wolfe": ("solver", "frank_wolfe"),
        "C [2.0]": ("C", [2.0]),
        "label_column other": ("label_column", "other"),
    }
    for what, (key, value) in valid.items():
        add(
            what,
            "model.json, checksum matched",
            lambda m, key=key, value=value: _edit_json(m, key, value, True),
            "either",
        )
    permuted = [NAMES[::-1], NAMES[:3] + NAMES[:1], ["f0", "f1", "f2"], NAMES + ["f4"]]
    for k, names in enumerate(permuted):
        for rehash in (False, True):
            fmt = "model.json, checksum matched" if rehash else "model.json"
            expect = "either" if rehash and k == 0 else "refuse"
            add(  # a model naming its columns in reverse reads them so, consistently
                f"feature_names {names}",
                fmt,
                lambda m, names=names, rehash=rehash: _edit_json(m, "feature_names", names, rehash),
                expect,
                NAMES[::-1] if k == 0 else NAMES,
            )
    for member in ("coef", "intercept", "mean", "scale"):
        for what, value in NPZ_VALUES.items():
            ok = (
                "either"
                if what in ("float32", "int") or (what == "zero" and member != "scale")
                else "refuse"
            )
            if member == "mean" and what in ("1e-310",):
                ok = "either"
            add(
                f"{member} {what}",
                "model.npz, checksum matched",
                lambda m, member=member, value=value: _edit_npz(m, member, value),
                ok,
            )
        add(
            f"{member} NaN",
            "model.npz",
            lambda m, member=member: _edit_npz(m, member, NPZ_VALUES["NaN"], rehash=False),
        )
    add("extra member", "model.npz, checksum matched", lambda m: _edit_npz(m, "extra", np.ones(3)))

    def bomb(m):
        from tests.audit_outputs import _zip_bomb

        _zip_bomb(m, n=60_000_000)

    add("zip bomb", "model.npz, checksum matched", bomb)
    for what, make in {
        "model.npz a FIFO": lambda m: ((m / "model.npz").unlink(), os.mkfifo(m / "model.npz")),
        "model.npz a link to /dev/zero": lambda m: (
            (m / "model.npz").unlink(),
            (m / "model.npz").symlink_to("/dev/zero"),
        ),
        "model.json a FIFO": lambda m: ((m / "model.json").unlink(), os.mkfifo(m / "model.json")),
        "model.json empty": lambda m: (m / "model.json").write_text(""),
        "model.json not JSON": lambda m: (m / "model.json").write_text("{'a': 1"),
        "model.json 100000-deep": lambda m: (m / "model.json").write_text(
            "[" * 100000 + "]" * 100000
        ),
        "model.json NaN literal": lambda m: (m / "model.json").write_text(
            (m / "model.json").read_text().replace('"n_features": 4', '"n_features": NaN')
        ),
        "model.json repeated key": lambda m: (m / "model.json").write_text(
            (m / "model.json").read_text().replace("{", '{"n_features": 9, ', 1)
        ),
        "model.npz missing": lambda m: (m / "model.npz").unlink(),
        "model.npz truncated": lambda m: (m / "model.npz").write_bytes(
            (m / "model.npz").read_bytes()[:200]
        ),
        "model.json missing": lambda m: (m / "model.json").unlink(),
        "the model a folder of nothing": lambda m: [p.unlink() for p in m.iterdir()],
    }.items():
        add(what, "files", make)
    return kinds


def _model_probe(store):
    root = store / "probe"
    if not root.exists():
        root.mkdir(parents=True)
        _model(root, "csv", store)
    return root / "model"


# ---------------------------------------------------------------------------- evaluate


def evaluate_kinds():
    kinds = []

    def scores_frame():
        return pd.DataFrame({"1": np.linspace(0, 1, 40)})

    edits = {
        "NaN score": (lambda s: s.assign(**{"1": [np.nan] + list(s["1"][1:])}), "refuse"),
        "inf score": (lambda s: s.assign(**{"1": [np.inf] + list(s["1"][1:])}), "refuse"),
        "1e308 scores": (lambda s: s.assign(**{"1": np.linspace(-1, 1, 40) * 1e308}), "succeed"),
        "text score": (
            lambda s: s.astype(object).assign(**{"1": ["x"] + list(s["1"][1:])}),
            "refuse",
        ),
        "zero rows": (lambda s: s.iloc[:0], "refuse"),
        "a row short": (lambda s: s.iloc[:-1], "refuse"),
        "a row more": (lambda s: pd.concat([s, s.iloc[:1]]), "refuse"),
        "no class column": (lambda s: s.rename(columns={"1": "7"}), "either"),
        "repeated column": (lambda s: s.assign(b=s["1"]).set_axis(["1", "1"], axis=1), "refuse"),
        "every score tied": (lambda s: s.assign(**{"1": 0.5}), "succeed"),
        "an extra text column": (lambda s: s.assign(id="x"), "either"),
    }
    for what, (edit, expect) in edits.items():
        for fmt in (
            ("csv", "svm") if what in ("zero rows", "a row short", "NaN score") else ("csv",)
        ):

            def build(root, edit=edit, expect=expect, fmt=fmt):
                scores = root / "scores.csv"
                edit(scores_frame()).to_csv(scores, index=False)
                labels = _write(_base(), _file(root, "labels", fmt), fmt)
                label = ["--label-column", "label"] if fmt in TABLES else []
                return Case(["evaluate", scores, labels, *label], expect=expect)

            kinds.append(Kind("evaluate", what, f"scores csv, labels {fmt}", build))
    label_edits = {
        "no positive": (_label([0]), "either"),
        "labels sharing no class with the scores": (_label([5, 6]), "refuse"),
        "missing label": (_cell(np.nan, column=4), "refuse"),
        "zero rows": (lambda f: f.iloc[:0], "refuse"),
        "a row short": (lambda f: f.iloc[:-1], "refuse"),
    }
    for what, (edit, expect) in label_edits.items():
        for fmt in ("csv", "npz"):

            def build(root, edit=edit, expect=expect, fmt=fmt):
                scores = root / "scores.csv"
                scores_frame().to_csv(scores, index=False)
                labels = _write(edit(_base()), _file(root, "labels", fmt), fmt)
                label = ["--label-column", "label"] if fmt in TABLES else []
                return Case(["evaluate", scores, labels, *label], expect=expect)

            kinds.append(Kind("evaluate", f"labels: {what}", fmt, build))
    for special in SPECIAL:
        for which in ("scores", "labels"):

            def build(root, special=special, which=which):
                scores, labels = root / "scores.csv", root / "labels.csv"
                if which == "scores":
                    _special(special)(scores)
                    _write(_base(), labels, "csv")
                else:
                    scores_frame().to_csv(scores, index=False)
                    _special(special)(labels)
                return Case(["evaluate", scores, labels, "--label-column", "label"])

            kinds.append(Kind("evaluate", f"{which} a {special}", "csv", build))
    return kinds


# ---------------------------------------------------------------------------- load verify

STORE = """
import json, os, sys
from pathlib import Path
from qs.data import convert
path = convert.write_synthetic_store(Path(sys.argv[1]) / "s.zarr", chunk_images=10, scale=0.01,
                                     boxes_per_image=12, n_features=16)
"""


def _store(root, store):
    """A small box store, written once and copied into each case."""
    with _MODELS_LOCK:
        made = store / "store" / "s.zarr"
        if not made.exists():
            (store / "store").mkdir(parents=True, exist_ok=True)
            result = _run(STORE, [store / "store"], store, 600, None, python=True)
            if result["rc"] != 0:
                raise RuntimeError(f"the audit's own store failed: {result['err'][-2000:]}")
    shutil.copytree(made, root / "s.zarr", symlinks=True)
    return root / "s.zarr"


def _meta_edit(names, key, value, group=None):
    def edit(path):
        for name in names:
            meta = json.loads((path / name / "zarr.json").read_text())
            if key == "shape":
                meta["shape"][0] = value
            else:
                meta[key] = value
            (path / name / "zarr.json").write_text(json.dumps(meta))
        if group is not None:
            meta = json.loads((path / "zarr.json").read_text())
            meta["attributes"]["n_images"] = group
            (path / "zarr.json").write_text(json.dumps(meta))

    return edit


def _drop_checksums(path):
    meta = json.loads((path / "zarr.json").read_text())
    del meta["attributes"]["checksums"]
    (path / "zarr.json").write_text(json.dumps(meta))


def _chunk(path):
    return path / "features" / "c" / "1" / "0" / "0"


def verify_kinds(store):
    arrays = ("features", "counts", "boxes", "labels", "image_ids")
    edits = {
        "chunk a FIFO": lambda p: (_chunk(p).unlink(), os.mkfifo(_chunk(p))),
        "chunk a link to /dev/zero": lambda p: (
            _chunk(p).unlink(),
            _chunk(p).symlink_to("/dev/zero"),
        ),
        "chunk a symlink loop": lambda p: (_chunk(p).unlink(), _chunk(p).symlink_to("0")),
        "chunk a directory": lambda p: (_chunk(p).unlink(), _chunk(p).mkdir()),
        "chunk truncated": lambda p: _chunk(p).write_bytes(_chunk(p).read_bytes()[:10]),
        "chunk deleted": lambda p: _chunk(p).unlink(),
        "chunk a byte flipped": lambda p: _chunk(p).write_bytes(
            bytes([_chunk(p).read_bytes()[0] ^ 1]) + _chunk(p).read_bytes()[1:]
        ),
        "chunk 100 MB of zeros": lambda p: _chunk(p).write_bytes(bytes(100_000_000)),
        "an extra chunk": lambda p: (_chunk(p).parent / "9").write_bytes(b"x"),
        "features shape 10^12": _meta_edit(["features"], "shape", 10**12),
        "every array 10^12, group too": _meta_edit(arrays, "shape", 10**12, 10**12),
        "shape negative": _meta_edit(["features"], "shape", -5),
        "dtype changed": _meta_edit(["features"], "data_type", "float64"),
        "zarr.json garbage": lambda p: (p / "features" / "zarr.json").write_text("{"),
        "group zarr.json a FIFO": lambda p: (
            (p / "zarr.json").unlink(),
            os.mkfifo(p / "zarr.json"),
        ),
        "group n_images 0": _meta_edit([], "shape", 0, 0),
        "checksums attribute removed": _drop_checksums,
    }
    kinds = []
    for what, edit in edits.items():
        # a file beside the chunks of the array's shape is never read: the data are intact
        expect = "either" if what == "an extra chunk" else "refuse"

        def build(root, edit=edit, expect=expect):
            path = _store(root, store)
            edit(path)
            return Case(["load", "verify", path], expect=expect, timeout=60)

        kinds.append(Kind("load verify", what, "zarr store", build))
    kinds.append(
        Kind(
            "load verify",
            "intact",
            "zarr store",
            lambda root: Case(["load", "verify", _store(root, store)], expect="succeed"),
        )
    )
    return kinds


# ---------------------------------------------------------------------------- losses

LOSS = """
import sys, numpy as np
from qs.inference import lai
loss, method, spread, dtype = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
rng = np.random.default_rng(0)
def make(m):
    scores = np.r_[m, -m, rng.normal(size=40)].astype(dtype)
    labels = np.r_[True, False, rng.random(40) < 0.3]
    return scores, labels
scores, labels = make(spread)
rng = np.random.default_rng(0)
moderate = make(1e3)
try:
    res = lai(scores.astype(np.float64), labels, loss, method)
except ValueError as err:
    print(f"Error: {err}", file=sys.stderr); sys.exit(1)
ref = lai(moderate[0].astype(np.float64), moderate[1], loss, method)
ok = np.isclose(res.hinge, ref.objective - ref.ground_truth_F, rtol=1e-9)
print("hinge", res.hinge, "expected", ref.objective - ref.ground_truth_F, "ok", bool(ok))
"""

TORCH_LOSS = """
import sys, numpy as np, torch
from qs.torch import rank_hinge_loss
from qs.inference import lai
loss, spread, dtype = sys.argv[1], float(sys.argv[2]), getattr(torch, sys.argv[3])
rng = np.random.default_rng(0)
base = rng.normal(size=40)
labels = np.r_[True, False, rng.random(40) < 0.3]
scores = torch.tensor(np.r_[spread, -spread, base], dtype=dtype)
moderate = np.r_[1e3, -1e3, base]
try:
    value = rank_hinge_loss(scores, torch.tensor(labels), loss).item()
except ValueError as err:
    print(f"Error: {err}", file=sys.stderr); sys.exit(1)
ref = lai(moderate, labels, loss)
want = ref.objective - ref.ground_truth_F
print("loss", value, "expected", want, "ok", bool(np.isclose(value, want, rtol=1e-4)))
"""

NONFINITE = """
import sys, numpy as np
from qs.inference import lai
scores = np.r_[float(sys.argv[2]), np.linspace(-1, 1, 20)]
labels = np.r_[True, np.arange(20) % 2 == 0]
try:
    lai(scores, labels, sys.argv[1])
except ValueError as err:
    print(f"Error: {err}", file=sys.stderr); sys.exit(1)
sys.exit(0)
"""


#: a first call compiles numba's kernels into its cache: minutes on a busy machine
LOSS_TIMEOUT = 300


def _right_value(result):
    return None if result["out"].rstrip().endswith("ok True") else result["out"].strip()[-200:]


def loss_kinds():
    kinds = []
    methods = {"ap": ["auto", "qs", "bucket"], "ndcg": ["auto", "bucket"]}
    for loss, ms in methods.items():
        for method in ms:
            for spread in ("1e15", "1e17", "1e300"):
                kinds.append(
                    Kind(
                        "losses",
                        f"lai {loss} {method} at +-{spread}",
                        "float64",
                        lambda root, a=(loss, method, spread, "float64"): Case(
                            list(a),
                            code=LOSS,
                            expect="succeed",
                            check=_right_value,
                            timeout=LOSS_TIMEOUT,
                        ),
                    )
                )
            kinds.append(
                Kind(
                    "losses",
                    f"lai {loss} {method} at +-3e38",
                    "float32",
                    lambda root, a=(loss, method, "3e38", "float32"): Case(
                        list(a),
                        code=LOSS,
                        expect="succeed",
                        check=_right_value,
                        timeout=LOSS_TIMEOUT,
                    ),
                )
            )
    for loss in ("ap", "ndcg"):
        for spread, dtype in (
            ("1e15", "float64"),
            ("1e17", "float64"),
            ("1e300", "float64"),
            ("3e38", "float32"),
        ):
            kinds.append(
                Kind(
                    "losses",
                    f"rank_hinge_loss {loss} at +-{spread}",
                    dtype,
                    lambda root, a=(loss, spread, dtype): Case(
                        list(a),
                        code=TORCH_LOSS,
                        expect="succeed",
                        check=_right_value,
                        timeout=LOSS_TIMEOUT,
                    ),
                )
            )
    for loss in ("ap", "ndcg", "01"):
        for value in ("nan", "inf", "-inf"):
            kinds.append(
                Kind(
                    "losses",
                    f"lai {loss} a score of {value}",
                    "float64",
                    lambda root, a=(loss, value): Case(list(a), code=NONFINITE),
                )
            )
    return kinds


# ---------------------------------------------------------------------------- configs


def config_kinds():
    sets = {
        "unknown key": "no_such_key=1",
        "a 100 KB unknown key": "k" * 100_000 + "=1",
        "a 100 KB value": "seed=" + "9" * 100_000,
        "NaN seed": "seed=.nan",
        "inf seed": "seed=.inf",
        "a float seed": "seed=1.5",
        "a negative seed": "seed=-1",
        "a 10**400 seed": "seed=" + "1" + "0" * 400,
        "a tag": "seed=!!python/object:os.system 'true'",
        "an alias": "seed=*a",
        "an anchor": "seed=&a 1",
        "a nested map": "seed={a: {b: 1}}",
        "a list": "seed=[1, 2]",
        "dotted unknown": "a.b.c=1",
        "dotted ..": "..=1",
        "no =": "seed",
        "empty key": "=1",
        "a newline in the value": "seed=1\n2",
        "a C of NaN": "C=.nan",
        "a C of -1": "C=-1",
    }
    kinds = []
    for what, value in sets.items():
        kinds.append(
            Kind(
                "configs",
                what,
                "--set",
                lambda root, value=value: Case(
                    ["train", "--config", "digits", "--set", value, "--out", root / "r"],
                    timeout=60,
                ),
            )
        )
    files = {
        "a tag": "seed: !!python/object/apply:os.system ['true']\n",
        "an alias bomb": "a: &a [1,1,1,1,1,1,1,1,1]\n"
        + "".join(f"{c}: &{c} [{','.join(['*' + p] * 9)}]\n" for p, c in zip("abcdefg", "bcdefgh")),
        "a merge key": "base: &b {seed: 1}\n<<: *b\n",
        "NaN": "seed: .nan\n",
        "not a map": "- 1\n- 2\n",
        "empty": "",
        "binary": "\x00\x01\x02",
        "a 1 MB key": "k" * 1_000_000 + ": 1\n",
        "repeated key": "seed: 1\nseed: 2\n",
        "1000-deep": "a: " + "[" * 1000 + "]" * 1000 + "\n",
    }
    for what, text in files.items():

        def build(root, text=text):
            path = root / "c.yaml"
            path.write_text(text)
            return Case(["config", "check", path], timeout=60)

        kinds.append(Kind("configs", what, "config file", build))
    return kinds


# ---------------------------------------------------------------------------- older scripts


def legacy_kinds():
    from tests import audit_outputs, fuzz_own_data, fuzz_readers

    kinds = []
    for group, make in audit_outputs.KINDS.items():

        def build(root, make=make):
            cases = make(root)
            results = []
            for name, case in cases.items():
                outcome, why = audit_outputs.outcome(case)
                results.append((name, outcome, why))
            return results

        kinds.append(Kind("outputs (audit_outputs)", group, "cases", build))
    for name in fuzz_own_data.CASES:

        def build(root, name=name):
            outcome, why = fuzz_own_data.run_case(name, 3 * 2**30, 180)
            return [(name, outcome, why)]

        kinds.append(Kind("own data (fuzz_own_data)", name, "case", build))
    for fmt in fuzz_readers.FORMATS:
        for mutation in fuzz_readers.KINDS:
            kinds.append(
                Kind(
                    "readers (fuzz_readers)",
                    mutation,
                    fmt,
                    lambda root, a=(fmt, mutation): Case(
                        list(a), code=READERS, expect="succeed", check=_readers_check
                    ),
                )
            )
    return kinds


READERS = """
import json, sys, tempfile
from pathlib import Path
import numpy as np
from tests import fuzz_readers as F
name, kind = sys.argv[1], sys.argv[2]
rng = np.random.default_rng([0, list(F.FORMATS).index(name)])
root = Path(tempfile.mkdtemp(dir="."))
path = F.FORMATS[name][0](root, rng)
raw = path.read_bytes()
original = root / ("orig-" + path.name)
original.write_bytes(raw)
counts = dict.fromkeys(F.OUTCOMES, 0)
for k, damaged in F.mutants(raw, 60, rng):
    if k != kind:
        continue
    path.write_bytes(damaged)
    counts[F._read_outcome(name, path, original)] += 1
print(json.dumps(counts))
"""


def _readers_check(result):
    counts = json.loads(result["out"].strip().splitlines()[-1])
    bad = {k: v for k, v in counts.items() if k in ("different", "other") and v}
    return f"of 20 damaged copies: {bad}" if bad else None


# ---------------------------------------------------------------------------- running


def _run(code, argv, cwd, timeout, limit_kib, python=True):
    """Run ``code`` with ``argv`` in a process of its own group: its status, output, error,
    whether it ran past ``timeout``."""

    def limit():
        if limit_kib:
            size = limit_kib * 1024
            resource.setrlimit(resource.RLIMIT_AS, (size, size))

    env = {**os.environ, **ENV, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            [sys.executable, "-c", code, *map(str, argv)],
            stdout=out,
            stderr=err,
            stdin=subprocess.DEVNULL,
            cwd=cwd,
            env=env,
            preexec_fn=limit,
            start_new_session=True,
        )
        try:
            rc, hung = proc.wait(timeout), False
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            rc, hung = proc.wait(), True
        out.seek(0)
        err.seek(0)
        return {
            "rc": rc,
            "out": out.read().decode(errors="replace"),
            "err": err.read().decode(errors="replace"),
            "hung": hung,
        }


def _state(path):
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(info.st_mode):
        return ("link", os.readlink(path))
    if stat.S_ISREG(info.st_mode):
        digest = hashlib.sha256()
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
        return ("file", digest.hexdigest())
    return ("kind", stat.S_IFMT(info.st_mode))


def _snapshot(root):
    """The state of every entry under root (links and special files not followed)."""
    states = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder) / name
            states[path] = _state(path)
    return states


def classify(case, result, before, root):
    """(outcome, why) of one case from its run and the folder's state before it."""
    text = result["out"] + result["err"]
    errors = [line for line in result["err"].splitlines() if line.startswith("Error:")]
    last = (errors or text.strip().splitlines() or [""])[-1][:200]
    if result["hung"]:
        return "crash", "still running at the timeout"
    if result["rc"] < 0:
        return "crash", f"killed by signal {-result['rc']}"
    if "MemoryError" in text or "_ArrayMemoryError" in text:
        return "crash", "out of memory: " + last
    if "Traceback (most recent call last)" in text:
        return "traceback", text.strip().splitlines()[-1][:200]
    allowed = {Path(p) for p in case.changes}
    lost = [
        p.name
        for p, state in before.items()
        if p not in allowed and _state(p) != state and not _inside(p, allowed)
    ]
    if result["rc"] != 0:
        # exit 1: a refusal; exit 2: a usage error (click's, its usage lines before it)
        if result["rc"] not in (1, 2) or len(errors) != 1 or len(errors[0]) > 1000:
            return "traceback", f"exit {result['rc']}, {len(errors)} error line(s): {last}"
        if lost:
            return "silent", f"refused but {lost[:3]} changed: {last}"
        if case.expect in ("succeed", "warn"):
            return "refused", last
        return "clean", last
    if case.expect == "refuse":
        return "silent", "exit 0: " + (text.strip().splitlines() or [""])[-1][:200]
    if lost:
        return "silent", f"{lost[:3]} changed"
    if case.expect == "warn" and "Warning:" not in text:
        return "silent", "exit 0 without a warning"
    wrong = case.check(result) if case.check else None
    if wrong:
        return "silent", wrong
    return "clean", "worked"


def _inside(path, allowed):
    return any(a in path.parents for a in allowed)


def run_kind(kind, store, timeout, limit_kib):
    """[(kind name, outcome, why)] of one kind (several for a group of the older scripts)."""
    root = Path(tempfile.mkdtemp(prefix="case-", dir=store))
    try:
        try:
            made = kind.build(root)
        except Exception as err:  # the audit's own set-up failing is told, not tallied
            return [(kind, "setup", f"{type(err).__name__}: {str(err)[:200]}")]
        if isinstance(made, list):
            return [(kind, outcome, f"{name}: {why}") for name, outcome, why in made]
        before = _snapshot(root)
        result = _run(
            made.code or CODE, made.argv, root, made.timeout or timeout, limit_kib, python=True
        )
        outcome, why = classify(made, result, before, root)
        return [(kind, outcome, why)]
    finally:
        shutil.rmtree(root, ignore_errors=True)


def all_kinds(store):
    return [  # the older scripts' long cases first, so that they do not end the run alone
        *legacy_kinds(),
        *data_kinds(store),
        *out_kinds(store),
        *model_kinds(store),
        *evaluate_kinds(),
        *verify_kinds(store),
        *loss_kinds(),
        *config_kinds(),
    ]


def audit(select=None, jobs=2, timeout=120, limit_kib=6_000_000, verbose=False, kept=None):
    """[(Kind, outcome, why)] over every kind whose name holds ``select``, but those of
    ``kept`` (kind name: its rows from an earlier run) taken from there."""
    store = Path(tempfile.mkdtemp(prefix="qsrank-audit-"))
    kept = kept or {}
    try:
        every = [k for k in all_kinds(store) if not select or select in k.name]
        kinds = [k for k in every if k.name not in kept]
        rows = [(k, o, w) for k in every for o, w in kept.get(k.name, ())]
        with ThreadPoolExecutor(jobs) as pool:
            futures = [pool.submit(run_kind, k, store, timeout, limit_kib) for k in kinds]
            for future in futures:
                for kind, outcome, why in future.result():
                    rows.append((kind, outcome, why))
                    if verbose:
                        print(f"{outcome:<10} {kind.name}: {why}", flush=True)
        return rows
    finally:
        shutil.rmtree(store, ignore_errors=True)


_RAW = "no checksum covers the file"
#: kinds that are not clean by design, and why (they are tallied all the same)
OUT_OF_SCOPE = {
    "readers (fuzz_readers) / flip / cifar-binary": f"a CIFAR-10 batch is raw bytes and {_RAW}: "
    "a flipped pixel byte is another valid image",
    "readers (fuzz_readers) / flip / mat-v5": f"an uncompressed MATLAB v5 file stores its numbers "
    f"raw and {_RAW}: a flipped byte of the data is another valid number",
    "readers (fuzz_readers) / flip / image-set": "a flipped digit of an image id or a label is "
    "another valid line of the list",
    "readers (fuzz_readers) / cut / image-set": "a list cut at the end of a line is a valid "
    "shorter list",
    **{
        f"readers (fuzz_readers) / line / {fmt}": "a file of one record a line less one line is "
        "a valid file of one record fewer"
        for fmt in ("image-set", "feature", "svmlight")
    },
}


def tally(rows):
    """{surface: {outcome: count}} and the total."""
    table = {}
    for kind, outcome, _ in rows:
        table.setdefault(kind.surface, dict.fromkeys((*OUTCOMES, "setup"), 0))[outcome] += 1
    total = {o: sum(row[o] for row in table.values()) for o in (*OUTCOMES, "setup")}
    return table, total


def write_report(rows, out, command, seconds):
    out.mkdir(parents=True, exist_ok=True)
    table, total = tally(rows)
    columns = [*OUTCOMES, *(["setup"] if total["setup"] else [])]
    lines = [
        "# Hostile-input audit (issue 37)",
        "",
        f"`{command}`: {len(rows)} kinds in {seconds:.0f} s.",
        "",
        "| surface | kinds | " + " | ".join(columns) + " |",
        "|---|" + "---:|" * (len(columns) + 1),
    ]
    for surface, row in table.items():
        cells = " | ".join(str(row[c]) for c in columns)
        lines.append(f"| {surface} | {sum(row.values())} | {cells} |")
    lines.append(
        f"| **total** | **{len(rows)}** | " + " | ".join(f"**{total[c]}**" for c in columns) + " |"
    )
    bad = [(k, o, w) for k, o, w in rows if o != "clean"]
    if bad:
        lines += ["", "## Kinds not clean", ""]
        for k, o, w in bad:
            reason = OUT_OF_SCOPE.get(k.name)
            lines.append(f"- {o}: {k.name}: {w.replace(chr(10), ' ')}")
            if reason:
                lines.append(f"  - out of scope: {reason}")
    (out / "tally.md").write_text("\n".join(lines) + "\n")
    with open(out / "cases.csv", "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["surface", "mutation", "format", "outcome", "why"])
        for kind, outcome, why in rows:
            writer.writerow([kind.surface, kind.mutation, kind.fmt, outcome, why])
    return "\n".join(lines)


def read_log(path, names, rerun):
    """{kind name: [(outcome, why)]} of the lines of an earlier ``-v`` run, but for the kinds
    named in the file ``rerun`` (to run again: their set-up changed since)."""
    again = set(Path(rerun).read_text().splitlines()) if rerun else set()
    names = sorted(names, key=len, reverse=True)
    kept = {}
    for line in Path(path).read_text().splitlines():
        outcome, _, rest = line.partition(" ")
        rest = rest.lstrip()
        name = next((n for n in names if rest.startswith(n + ": ")), None)
        if outcome in (*OUTCOMES, "setup") and name and name not in again:
            kept.setdefault(name, []).append((outcome, rest[len(name) + 2 :]))
    return kept


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/audit"))
    parser.add_argument("--case", help="run only the kinds whose name holds this")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--limit-kib", type=int, default=6_000_000, help="ulimit -v per case")
    parser.add_argument("--list", action="store_true", help="list the kinds and stop")
    parser.add_argument("-v", "--verbose", action="store_true")
    parser.add_argument("--keep-log", help="take the kinds run in this earlier -v output from it")
    parser.add_argument("--rerun", help="a file of kind names to run again all the same")
    args = parser.parse_args(argv)
    if args.list:
        with tempfile.TemporaryDirectory() as tmp:
            for kind in all_kinds(Path(tmp)):
                print(kind.name)
        return
    start = time.monotonic()
    kept = None
    if args.keep_log:
        with tempfile.TemporaryDirectory() as tmp:
            names = [k.name for k in all_kinds(Path(tmp))]
        _MODELS.clear()  # fitted in the folder just removed
        kept = read_log(args.keep_log, names, args.rerun)
    rows = audit(args.case, args.jobs, args.timeout, args.limit_kib, args.verbose, kept)
    command = "python tests/audit_hostile.py " + " ".join(argv or sys.argv[1:])
    print(write_report(rows, args.out, command.strip(), time.monotonic() - start))


if __name__ == "__main__":
    main()
