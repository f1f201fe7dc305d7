"""Seeded mutation fuzzing of the file readers: how many damaged files read as other data.

For each format a small valid file is written, then ``--mutants`` damaged copies of it (a
third byte flips, a third truncations, a third deleted lines, from ``--seed``), and each is
read by the reader the pipelines use. Every read ends one of these ways:

- ``error``: a ValueError (the damage was detected);
- ``same``: the data read equal the original (the damage touched nothing the reader keeps);
- ``different``: the data read without error as other data (silent damage);
- ``crash`` (the reading process died), ``other`` (another exception type), ``hang``.

The reads run in a spawned worker process, replaced when a read kills it or hangs, so that
a reader that crashes or hangs is counted rather than taking the run down. Not a unit test:
run it as ``python -m tests.fuzz_readers [--mutants 300] [--seed 0]``; it prints one row per
format, and ``diff/flip`` ... split ``different`` by mutation.
"""

import argparse
import multiprocessing
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor, TimeoutError
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

import numpy as np
import scipy.io
import scipy.sparse as sp

OUTCOMES = ("error", "same", "different", "crash", "other", "hang")
KINDS = ("flip", "cut", "line")  # the mutations, in turn
COLUMNS = OUTCOMES + tuple(f"different {k}" for k in KINDS)
TIMEOUT_S = 60


def _cifar(root, rng):
    records = np.concatenate(
        [rng.integers(0, 10, (4, 1)), rng.integers(0, 256, (4, 3072))], axis=1
    ).astype(np.uint8)
    path = root / "data_batch_1.bin"
    path.write_bytes(records.tobytes())
    return path


def _read_cifar(path):
    from qs.data.cifar10 import read_binary_batch

    return read_binary_batch(path)


def _image_set(root, rng):
    ids = sorted(rng.choice(10000, 20, replace=False))
    labels = rng.choice(["1", "-1", "0"], 20)
    path = root / "aeroplane_trainval.txt"
    path.write_text("".join(f"{i:06d} {lab:>2}\n" for i, lab in zip(ids, labels)))
    return path


def _read_image_set(path):
    from qs.data.boxes import load_image_set

    return load_image_set(path)


def _mat(root, rng):
    path = root / "features.mat"
    scipy.io.savemat(
        path,
        {
            "X": rng.normal(size=(10, 16)).astype(np.float32),
            "y": rng.integers(0, 2, 10).astype(np.float64),
        },
        do_compression=False,
    )
    return path


def _read_mat(path):
    from qs.data.formats import load_features

    return load_features(path)


def _feature(root, rng):
    index = np.sort(rng.choice(np.arange(1, 65), 20, replace=False))
    pairs = [f"{i}:{v:.6g}" for i, v in zip(index, rng.normal(size=20))]
    path = root / "000005_1.feature"
    path.write_text(" ".join(pairs[:10]) + "\n" + " ".join(pairs[10:]) + "\n")
    return path


def _read_feature(path):
    from qs.data.latent_list import read_latent_features

    return read_latent_features([path], 64)


def _svmlight(root, rng):
    lines = []
    for _ in range(20):
        index = np.sort(rng.choice(np.arange(1, 33), 5, replace=False))
        pairs = " ".join(f"{i}:{v:.6g}" for i, v in zip(index, rng.normal(size=5)))
        lines.append(f"{rng.choice([-1, 1])} {pairs}\n")
    path = root / "features.svm"
    path.write_text("".join(lines))
    return path


def _read_svmlight(path):
    from qs.data.formats import load_features

    return load_features(path, n_features=32)


FORMATS = {
    "cifar-binary": (_cifar, _read_cifar),
    "image-set": (_image_set, _read_image_set),
    "mat-v5": (_mat, _read_mat),
    "feature": (_feature, _read_feature),
    "svmlight": (_svmlight, _read_svmlight),
}


def mutants(raw, n, rng):
    """``n`` damaged copies of ``raw``, ``(kind, bytes)``: byte flips, truncations and deleted
    lines in turn."""
    lines = raw.splitlines(keepends=True)
    out = []
    for k in range(n):
        kind = k % 3
        if kind == 0:  # one byte replaced by another value
            b = bytearray(raw)
            pos = int(rng.integers(len(b)))
            b[pos] ^= int(rng.integers(1, 256))
            out.append(("flip", bytes(b)))
        elif kind == 1:  # cut short anywhere
            out.append(("cut", raw[: int(rng.integers(len(raw)))]))
        else:  # one line (bytes up to a newline) left out
            drop = int(rng.integers(len(lines)))
            out.append(("line", b"".join(lines[:drop] + lines[drop + 1 :])))
    return out


def _equal(a, b):
    if isinstance(a, (tuple, list)):
        return (
            isinstance(b, (tuple, list))
            and len(a) == len(b)
            and all(_equal(x, y) for x, y in zip(a, b))
        )
    if sp.issparse(a) or sp.issparse(b):
        return sp.issparse(a) and sp.issparse(b) and a.shape == b.shape and (a != b).nnz == 0
    if a is None or b is None:
        return a is b
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b)


_ORIGINALS = {}  # in a reading worker: each format's original data, read once


def _read_outcome(name, path, original_path):
    """In a reading worker: the outcome of reading the damaged file ``path``."""
    read = FORMATS[name][1]
    if name not in _ORIGINALS:
        _ORIGINALS[name] = read(Path(original_path))
    try:
        return "same" if _equal(read(Path(path)), _ORIGINALS[name]) else "different"
    except ValueError:
        return "error"
    except Exception:
        return "other"


class _Worker:
    """A spawned process that reads the files, replaced when a read kills it or hangs."""

    def __init__(self):
        self.pool = None

    def outcome(self, name, path, original_path):
        if self.pool is None:
            self.pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
        future = self.pool.submit(_read_outcome, name, str(path), str(original_path))
        try:
            return future.result(timeout=TIMEOUT_S)
        except BrokenProcessPool:
            self.close()
            return "crash"
        except TimeoutError:
            for process in list(self.pool._processes.values()):
                process.kill()
            self.close()
            return "hang"

    def close(self):
        if self.pool is not None:
            self.pool.shutdown(wait=False, cancel_futures=True)
            self.pool = None


def fuzz(n_mutants=300, seed=0, formats=tuple(FORMATS)):
    """``{format: {outcome: count}}`` over ``n_mutants`` damaged files of each format, with
    ``different`` also split by mutation (``different flip`` ...)."""
    counts = {}
    worker = _Worker()
    with tempfile.TemporaryDirectory() as tmp:
        try:
            for k, name in enumerate(formats):
                make, _ = FORMATS[name]
                rng = np.random.default_rng([seed, k])
                root, kept = Path(tmp) / name, Path(tmp) / f"{name}-original"
                root.mkdir()
                kept.mkdir()
                path = make(root, rng)
                raw = path.read_bytes()
                original = kept / path.name
                original.write_bytes(raw)
                row = counts[name] = dict.fromkeys(COLUMNS, 0)
                for kind, damaged in mutants(raw, n_mutants, rng):
                    path.write_bytes(damaged)
                    outcome = worker.outcome(name, path, original)
                    row[outcome] += 1
                    if outcome == "different":
                        row[f"different {kind}"] += 1
        finally:
            worker.close()
    return counts


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mutants", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--format", action="append", choices=list(FORMATS))
    args = parser.parse_args(argv)
    counts = fuzz(args.mutants, args.seed, tuple(args.format or FORMATS))
    print(f"{'format':<14}" + "".join(f"{c.replace('different ', 'diff/'):>10}" for c in COLUMNS))
    for name, row in counts.items():
        print(f"{name:<14}" + "".join(f"{row[c]:>10}" for c in COLUMNS))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
