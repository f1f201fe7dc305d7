"""Hostile own-data cases for `qsrank fit`, `predict` and `load verify`: how each one ends.

Each case writes small files, runs the installed commands in a process of their own under a
timeout (the cases of feature indices and shapes far beyond the data also under an
address-space limit, ``--limit-gib``), and is tallied as:

- ``clean``: a one-line error and exit 1, or exit 0 with the right result;
- ``traceback``: a Python traceback, or an exit that is neither;
- ``crash``: the process killed by a signal, or still running at the timeout (a hang);
- ``silent``: exit 0 with a wrong result (shifted columns, a label in the features, classes
  merged, a damaged store passed, a permuted file scored without a word).

The cases: svmlight files written zero- and one-based (fit and predict), repeated column
names, labels written two ways, Parquet timestamps, feature indices or shapes far beyond the
data, box-store chunks replaced by a FIFO or /dev/zero and metadata edited to 10^12 images,
files without column names whose columns are reversed, and the same split as svmlight and
CSV. Not a unit test: run it as ``python -m tests.fuzz_own_data [--case NAME ...]``; it
prints one line per case and the tally.
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import zipfile
from io import BytesIO
from pathlib import Path

import numpy as np
import pandas as pd
import scipy.sparse as sp
from sklearn.datasets import dump_svmlight_file

OUTCOMES = ("clean", "traceback", "crash", "silent")
FIT = ("--C", "1", "--baseline-C", "1")
CODE = "import sys; from qsrank.main import main; main(sys.argv[1:], prog_name='qsrank')"


class Run:
    """The commands of one case, each in a process limited to ``timeout`` seconds and, unless
    ``limit`` is None, ``limit`` bytes of address space; the first that does not end cleanly
    decides the case."""

    def __init__(self, limit, timeout):
        self.limit, self.timeout = limit, timeout

    def __call__(self, *args):
        def limited():
            resource.setrlimit(resource.RLIMIT_AS, (self.limit, self.limit))

        env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
        try:
            result = subprocess.run(
                [sys.executable, "-c", CODE, *map(str, args)],
                capture_output=True,
                text=True,
                timeout=self.timeout,
                check=False,
                env=env,
                preexec_fn=None if self.limit is None else limited,
            )
        except subprocess.TimeoutExpired:
            raise Ended("crash", f"still running after {self.timeout} s") from None
        if result.returncode < 0:
            raise Ended("crash", f"killed by signal {-result.returncode}")
        if "Traceback" in result.stderr:
            raise Ended("traceback", result.stderr.strip().splitlines()[-1][:120])
        if result.returncode == 1:
            lines = result.stderr.strip().splitlines()
            if (
                lines
                and lines[-1].startswith("Error: ")
                and sum(line.startswith("Error: ") for line in lines) == 1
            ):
                raise Ended("clean", lines[-1][:120])
            raise Ended("traceback", f"exit 1 without a one-line error: {lines[-1:]}")
        if result.returncode != 0:
            raise Ended("traceback", f"exit {result.returncode}")
        return result


class Ended(Exception):
    """How a case ended: its outcome and why."""

    def __init__(self, outcome, why):
        super().__init__(why)
        self.outcome, self.why = outcome, why


def _data(n=80, d=5, seed=0, offset=0.0):
    rng = np.random.default_rng(seed)
    y = np.tile([0, 1], n // 2)
    X = rng.normal(size=(n, d)) * np.arange(1, d + 1) + 3 * np.arange(d) + offset
    X[:, 0] += 1.5 * y
    return X, y


def _metrics(run_dir):
    return pd.read_csv(run_dir / "metrics.csv").drop(columns="train_s")


def _same(a, b):
    try:
        pd.testing.assert_frame_equal(a, b, rtol=1e-9)
    except AssertionError:
        return False
    return True


# ---------------------------------------------------------------------------- cases


def zero_based_fit(tmp, q, seed):
    """A zero-based training file using index 0, a test file that does not."""
    X, y = _data(seed=seed)
    Xt, yt = _data(seed=seed + 100)
    Xt[:, 0] = 0.0
    for base in ("zero", "one"):
        dump_svmlight_file(X, y, str(tmp / f"train_{base}.svm"), zero_based=base == "zero")
        dump_svmlight_file(Xt, yt, str(tmp / f"test_{base}.svm"), zero_based=base == "zero")
        q(
            "fit",
            tmp / f"train_{base}.svm",
            "--test",
            tmp / f"test_{base}.svm",
            *FIT,
            "--out",
            tmp / base,
        )
    return _same(_metrics(tmp / "zero"), _metrics(tmp / "one")), "metrics differ by base"


def zero_based_predict(tmp, q, seed):
    X, y = _data(seed=seed)
    Xt, _ = _data(seed=seed + 100)
    Xt[:, 0] = 0.0
    for base in ("zero", "one"):
        dump_svmlight_file(X, y, str(tmp / f"train_{base}.svm"), zero_based=base == "zero")
        dump_svmlight_file(
            Xt, np.zeros(len(Xt)), str(tmp / f"new_{base}.svm"), zero_based=base == "zero"
        )
        q("fit", tmp / f"train_{base}.svm", *FIT, "--out", tmp / base)
        q("predict", tmp / base, tmp / f"new_{base}.svm", "--out", tmp / f"{base}.csv")
    return (
        _same(pd.read_csv(tmp / "zero.csv"), pd.read_csv(tmp / "one.csv")),
        "scores differ by base",
    )


def repeated_name(tmp, q, header):
    X, y = _data(n=40, d=2)
    columns = {"a": X[:, 0], "b": X[:, 1], "label": y}
    rows = [",".join(header)] + [
        ",".join(str(columns[h][k]) for h in header) for k in range(len(y))
    ]
    (tmp / "f.csv").write_text("\n".join(rows) + "\n")
    q("fit", tmp / "f.csv", "--label-column", "label", *FIT, "--out", tmp / "run")
    return False, "a repeated column name was read"


def labels_two_ways(tmp, q, labels):
    X, _ = _data(n=len(labels) * 10, d=2)
    pd.DataFrame(X, columns=["a", "b"]).assign(label=labels * 10).to_csv(tmp / "f.csv", index=False)
    q("fit", tmp / "f.csv", "--label-column", "label", *FIT, "--out", tmp / "run")
    classes = json.loads((tmp / "run" / "model.json").read_text())["classes"]
    expected = len(set(labels)) if len(set(labels)) > 2 else 1
    return len(classes) == expected, f"{len(set(labels))} spellings, classes {classes}"


def parquet_timestamps(tmp, q, tz):
    X, y = _data(n=40, d=2)
    when = pd.date_range("2024-01-01", periods=40, freq="D", tz=tz)
    pd.DataFrame(X, columns=["a", "b"]).assign(when=when, label=y).to_parquet(tmp / "f.parquet")
    q("fit", tmp / "f.parquet", "--label-column", "label", *FIT, "--out", tmp / "run")
    return False, "timestamps read as numbers without a word"


def far_index(tmp, q, index):
    X, y = _data(n=40, d=3)
    dump_svmlight_file(X, y, str(tmp / "f.svm"), zero_based=False)
    with open(tmp / "f.svm", "a") as fh:
        fh.write(f"1 {index}:1\n")
    q("fit", tmp / "f.svm", *FIT, "--out", tmp / "run")
    return True, ""


def csr_npz_shape(tmp, q, columns):
    X, y = _data(n=40, d=3)
    A = sp.csr_matrix(X)
    np.savez(
        tmp / "f.npz",
        X_data=A.data,
        X_indices=A.indices,
        X_indptr=A.indptr,
        X_shape=np.array([40, columns]),
        y=y,
    )
    q("fit", tmp / "f.npz", *FIT, "--out", tmp / "run")
    return True, ""


def dense_npz_declared(tmp, q, shape):
    header = BytesIO()
    np.lib.format.write_array_header_1_0(
        header, {"descr": "<f8", "fortran_order": False, "shape": shape}
    )
    with zipfile.ZipFile(tmp / "f.npz", "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("X.npy", header.getvalue() + bytes(4096))
        archive.writestr("y.npy", _npy(np.tile([0.0, 1.0], 20)))
    q("fit", tmp / "f.npz", *FIT, "--out", tmp / "run")
    return True, ""


def _npy(a):
    out = BytesIO()
    np.save(out, a)
    return out.getvalue()


def _store(tmp):
    from qs.data import convert

    return convert.write_synthetic_store(
        tmp / "s.zarr", chunk_images=10, scale=0.01, boxes_per_image=12, n_features=16
    )


def store_chunk(tmp, q, replacement):
    path = _store(tmp)
    chunk = path / "features" / "c" / "1" / "0" / "0"
    chunk.unlink()
    if replacement == "fifo":
        os.mkfifo(chunk)
    else:
        chunk.symlink_to("/dev/zero")
    q("load", "verify", path)
    return False, f"a chunk replaced by {replacement} passed"


def store_metadata(tmp, q, edit):
    path = _store(tmp)
    names = (
        ("features",) if edit == "array" else ("features", "counts", "boxes", "labels", "image_ids")
    )
    for name in names:
        meta = json.loads((path / name / "zarr.json").read_text())
        meta["shape"][0] = 10**12
        (path / name / "zarr.json").write_text(json.dumps(meta))
    if edit == "all":
        group = json.loads((path / "zarr.json").read_text())
        group["attributes"]["n_images"] = 10**12
        (path / "zarr.json").write_text(json.dumps(group))
    q("load", "verify", path)
    return False, "a store saying 10^12 images passed"


def reversed_columns(tmp, q, fmt):
    X, y = _data(n=120, d=5)
    Xt, yt = _data(n=60, d=5, seed=2)
    if fmt == "npz":
        np.savez(tmp / "train.npz", X=X, y=y)
        np.savez(tmp / "new.npz", X=Xt[:, ::-1], y=yt)
    else:
        dump_svmlight_file(X, y, str(tmp / "train.svm"), zero_based=False)
        dump_svmlight_file(Xt[:, ::-1], yt, str(tmp / "new.svm"), zero_based=False)
    q("fit", tmp / f"train.{fmt}", *FIT, "--out", tmp / "run")
    result = q("predict", tmp / "run", tmp / f"new.{fmt}", "--out", tmp / "s.csv")
    return "Warning: " in result.stderr, "reversed columns scored without a word"


def svmlight_and_csv(tmp, q, seed):
    X, y = _data(n=120, d=6, seed=seed, offset=8.0)
    Xt, yt = _data(n=80, d=6, seed=seed + 50, offset=8.0)
    for name, (A, b) in {"train": (X, y), "test": (Xt, yt)}.items():
        dump_svmlight_file(A, b, str(tmp / f"{name}.svm"), zero_based=False)
        pd.DataFrame(A, columns=[f"f{k}" for k in range(6)]).assign(label=b).to_csv(
            tmp / f"{name}.csv", index=False
        )
    q("fit", tmp / "train.svm", "--test", tmp / "test.svm", *FIT, "--out", tmp / "svm")
    q(
        "fit",
        tmp / "train.csv",
        "--test",
        tmp / "test.csv",
        "--label-column",
        "label",
        *FIT,
        "--out",
        tmp / "csv",
    )
    return _same(_metrics(tmp / "svm"), _metrics(tmp / "csv")), "svmlight and CSV metrics differ"


CASES = {
    **{f"zero-based-fit-{s}": (zero_based_fit, s) for s in range(3)},
    **{f"zero-based-predict-{s}": (zero_based_predict, s) for s in range(2)},
    "repeated-label": (repeated_name, ["a", "b", "label", "label"]),
    "repeated-label-first": (repeated_name, ["label", "a", "label"]),
    "repeated-feature": (repeated_name, ["a", "a", "label"]),
    "labels-01-1-2": (labels_two_ways, ["01", "1", "2"]),
    "labels-1-1.0-2": (labels_two_ways, ["1", "1.0", "2"]),
    "parquet-timestamp": (parquet_timestamps, None),
    "parquet-timestamp-tz": (parquet_timestamps, "UTC"),
    "index-1e8": (far_index, 100_000_000),
    "index-2e9": (far_index, 2_000_000_000),
    "index-5e7": (far_index, 50_000_000),
    "csr-npz-2e9-columns": (csr_npz_shape, 2_000_000_000),
    "dense-npz-declared-10TB": (dense_npz_declared, (4_000_000, 300_000)),
    "store-chunk-fifo": (store_chunk, "fifo"),
    "store-chunk-dev-zero": (store_chunk, "dev-zero"),
    "store-metadata-array": (store_metadata, "array"),
    "store-metadata-all": (store_metadata, "all"),
    "reversed-npz": (reversed_columns, "npz"),
    "reversed-svmlight": (reversed_columns, "svm"),
    **{f"svmlight-vs-csv-{s}": (svmlight_and_csv, s) for s in range(2)},
}


#: the cases run under the address-space limit (the others need none to end)
LIMITED = ("far_index", "csr_npz_shape", "dense_npz_declared")


def run_case(name, limit, timeout):
    """``(outcome, why)`` of one case."""
    fn, arg = CASES[name]
    limit = limit if fn.__name__ in LIMITED else None
    with tempfile.TemporaryDirectory() as tmp:
        try:
            ok, why = fn(Path(tmp), Run(limit, timeout), arg)
        except Ended as end:
            return end.outcome, end.why
    return ("clean", "") if ok else ("silent", why)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", action="append", choices=list(CASES))
    parser.add_argument("--limit-gib", type=float, default=3.0)
    parser.add_argument("--timeout", type=float, default=180.0)
    args = parser.parse_args(argv)
    tally = dict.fromkeys(OUTCOMES, 0)
    for name in args.case or CASES:
        outcome, why = run_case(name, int(args.limit_gib * 2**30), args.timeout)
        tally[outcome] += 1
        print(f"{name:<26} {outcome:<10} {why}", flush=True)
    print("  ".join(f"{k} {v}" for k, v in tally.items()))


if __name__ == "__main__":
    main()
