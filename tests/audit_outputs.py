"""Hostile-input audit of `qsrank fit`, `predict` and `evaluate`: outputs, model files and
inputs that should be refused in one line without destroying anything.

Each case sets up a scratch folder (a FIFO, a socket or an input where ``--out`` points, a
user's file where the run directory's clean-up looks, an edited or zip-bombed model file, a
file of zero rows or of huge values, ...), runs the command in its own process and ends one
of these ways:

- ``clean``: refused with one ``Error:`` line and nothing destroyed, or (for a case that
  should work) exit 0 with the right result;
- ``traceback``: a Python traceback was printed, or an error that is not one line of text
  (several ``Error:`` lines, or one over 1000 characters);
- ``crash``: the process died of a signal or ran past the time limit;
- ``silent``: exit 0 where a refusal was due, or a file destroyed, or a wrong result, or
  memory past the case's bound;
- ``refused``: a case that should work was refused.

Not a unit test: run it as ``python -m tests.audit_outputs [--case SUBSTRING] [-v]``; it
prints a row per case kind and the tally.
"""

import argparse
import hashlib
import io
import json
import os
import resource
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import scipy.io

OUTCOMES = ("clean", "traceback", "crash", "silent", "refused")
TIMEOUT_S = 300
NAMES = ["alpha", "beta", "gamma", "delta"]
FAST = ["--C", "1", "--baseline-C", "1"]


@dataclass
class Case:
    """A command to run, whether it should succeed, and a check of what it left: the check
    returns what went wrong (a file destroyed, a wrong result), or None."""

    argv: list
    succeed: bool = False
    check: object = None
    limit_as: int | None = None  # an address-space limit (bytes) for the process
    max_rss_mb: float | None = None  # the most resident memory the case may reach
    env: dict = field(default_factory=dict)


# ---------------------------------------------------------------------------- data


def _data(n=40, d=4, classes=("a", "b"), seed=0):
    rng = np.random.default_rng(seed)
    y = np.array([classes[k % len(classes)] for k in range(n)])
    X = rng.normal(size=(n, d)) + (np.searchsorted(sorted(classes), y)[:, None] == np.arange(d))
    return X, y


def _csv(path, X=None, y=None, names=NAMES):
    if X is None:
        X, y = _data()
    pd.DataFrame(X, columns=names[: X.shape[1]]).assign(label=y).to_csv(path, index=False)
    return path


def _model(root, scale=None):
    """A model written as `qsrank fit` writes it (by the installed code), in root/model."""
    from qsrank.pipelines.model import write_model

    out = root / "model"
    meta = {
        "n_features": 4,
        "feature_names": NAMES,
        "label_column": "label",
        "classes": ["b"],
        "loss": "ap",
        "solver": "cutting_plane",
        "C": [1.0],
        "scaling": "standard",
        "svmlight_zero_based": False,
        "column_fingerprint": None,
    }
    write_model(
        out,
        meta,
        coef=[[1.0, 2.0, 3.0, 4.0]],
        intercept=[0.5],
        mean=np.zeros(4),
        scale=np.ones(4) if scale is None else scale,
    )
    return out


def _unchanged(path):
    """A check that `path` keeps its bytes (or its kind, for what is not a regular file)."""
    path = Path(path)
    before = _state(path)
    return lambda: None if _state(path) == before else f"{path.name} changed"


def _state(path):
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(info.st_mode):
        return ("link", os.readlink(path), _state(path.resolve()))
    if stat.S_ISREG(info.st_mode):
        return ("file", hashlib.sha256(path.read_bytes()).hexdigest())
    return ("kind", stat.S_IFMT(info.st_mode))


def _all(*checks):
    def check():
        return next((r for r in (c() for c in checks) if r), None)

    return check


def _absent(path):
    return lambda: f"{Path(path).name} was written" if Path(path).exists() else None


def _finite_scores(path):
    def check():
        if not Path(path).is_file():
            return None
        values = pd.read_csv(path).to_numpy(float)
        return None if np.isfinite(values).all() else "non-finite scores written"

    return check


def _rehash(model_dir):
    """Make model.json's checksums match again after an edit, as the installed code computes
    them (an edit made by someone who knows the format)."""
    from qsrank.pipelines import model as M

    path = model_dir / "model.json"
    meta = json.loads(path.read_text())
    npz = (
        (model_dir / meta.get("weights", "model.npz")).read_bytes()
        if (model_dir / str(meta.get("weights", "model.npz"))).is_file()
        else b""
    )
    if "weights_sha256" in meta:
        meta["weights_sha256"] = hashlib.sha256(npz).hexdigest()
    if hasattr(M, "model_digest"):
        meta["sha256"] = M.model_digest(meta, npz)
    path.write_text(json.dumps(meta))


def _edit_json(model_dir, rehash=False, **changes):
    path = model_dir / "model.json"
    meta = json.loads(path.read_text())
    meta.update(changes)
    path.write_text(json.dumps(meta))
    if rehash:
        _rehash(model_dir)


def _edit_npz(model_dir, **arrays):
    with np.load(model_dir / "model.npz") as npz:
        kept = {k: npz[k] for k in npz.files}
    buf = io.BytesIO()
    np.savez_compressed(buf, **{**kept, **arrays})
    (model_dir / "model.npz").write_bytes(buf.getvalue())
    _rehash(model_dir)


def _zip_bomb(model_dir, n=140_000_000):
    """model.npz whose `scale` member inflates to n float64 zeros (~1.1 GB) from ~1 MB."""
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        header, {"descr": "<f8", "fortran_order": False, "shape": (n,)}
    )
    with np.load(model_dir / "model.npz") as npz:
        kept = {k: npz[k] for k in npz.files if k != "scale"}
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        for k, a in kept.items():
            b = io.BytesIO()
            np.lib.format.write_array(b, a)
            zf.writestr(f"{k}.npy", b.getvalue())
        with zf.open("scale.npy", "w", force_zip64=True) as member:
            member.write(header.getvalue())
            zeros = bytes(2**22)
            for _ in range(n * 8 // len(zeros)):
                member.write(zeros)
    (model_dir / "model.npz").write_bytes(out.getvalue())
    _rehash(model_dir)


# ---------------------------------------------------------------------------- cases


def out_not_regular(root):
    """--out naming a FIFO, a socket, a directory or links to them."""
    model, data = _model(root), _csv(root / "d.csv")
    _csv(root / "l.csv")
    scores = root / "s.csv"
    pd.DataFrame({"b": np.arange(40.0)}).to_csv(scores, index=False)
    cases = {}
    fifo = root / "fifo"
    os.mkfifo(fifo)
    cases["predict --out FIFO"] = Case(
        ["predict", model, data, "--out", fifo], check=_unchanged(fifo)
    )
    link = root / "link"
    link.symlink_to(fifo)
    cases["predict --out link to FIFO"] = Case(
        ["predict", model, data, "--out", link], check=_all(_unchanged(link), _unchanged(fifo))
    )
    cases["evaluate --out FIFO"] = Case(
        ["evaluate", scores, root / "l.csv", "--label-column", "label", "--out", fifo],
        check=_unchanged(fifo),
    )
    sock_path = root / "sock"
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(sock_path))
    cases["predict --out socket"] = Case(
        ["predict", model, data, "--out", sock_path], check=_unchanged(sock_path)
    )
    (root / "dir").mkdir()
    cases["predict --out directory"] = Case(
        ["predict", model, data, "--out", root / "dir"], check=_unchanged(root / "dir")
    )
    target = root / "target.csv"
    target.write_text("old\n")
    (root / "to_file").symlink_to(target)

    def through_link():
        if not (root / "to_file").is_symlink():
            return "the link was replaced"
        return None if target.read_text().startswith("b\n") else "the target was not written"

    cases["predict --out link to a regular file (writes the target)"] = Case(
        ["predict", model, data, "--out", root / "to_file"], succeed=True, check=through_link
    )
    run = root / "run"
    _fit_run(run, root)
    (run / "metrics.csv").unlink()
    os.mkfifo(run / "metrics.csv")
    cases["fit resuming a run whose metrics.csv is a FIFO"] = Case(
        ["fit", root / "train.csv", "--label-column", "label", *FAST, "--out", run],
        check=_unchanged(run / "metrics.csv"),
    )
    return cases


def _fit_run(run, root):
    train = _csv(root / "train.csv")
    result = _run(["fit", train, "--label-column", "label", *FAST, "--out", run])
    if result[0] != 0:
        raise RuntimeError(f"the audit's own fit failed: {result[2][-2000:]}")
    return run


def out_is_input(root):
    """--out naming one of the command's inputs (each case in a folder of its own)."""
    cases = {}
    targets = {
        "model.json": lambda m, d: m / "model.json",
        "model.npz": lambda m, d: m / "model.npz",
        "the data": lambda m, d: d,
        "a hard link to the data": lambda m, d: d.parent / "hard.csv",
        "a symlink to the data": lambda m, d: d.parent / "soft.csv",
    }
    for k, (name, target) in enumerate(targets.items()):
        folder = root / f"p{k}"
        folder.mkdir()
        model, data = _model(folder), _csv(folder / "d.csv")
        (folder / "hard.csv").hardlink_to(data)
        (folder / "soft.csv").symlink_to(data)
        both = _all(
            _unchanged(model / "model.json"), _unchanged(model / "model.npz"), _unchanged(data)
        )
        cases[f"predict --out {name}"] = Case(
            ["predict", model, data, "--out", target(model, data)], check=both
        )
    folder = root / "p-json"
    folder.mkdir()
    model, data = _model(folder), _csv(folder / "d.csv")
    cases["predict MODEL.json --out MODEL.json"] = Case(
        ["predict", model / "model.json", data, "--out", model / "model.json"],
        check=_unchanged(model / "model.json"),
    )
    for which in ("SCORES", "LABELS"):
        folder = root / f"e-{which}"
        folder.mkdir()
        labels, scores = _csv(folder / "l.csv"), folder / "s.csv"
        pd.DataFrame({"b": np.arange(40.0)}).to_csv(scores, index=False)
        cases[f"evaluate --out {which}"] = Case(
            [
                "evaluate",
                scores,
                labels,
                "--label-column",
                "label",
                "--out",
                scores if which == "SCORES" else labels,
            ],
            check=_all(_unchanged(scores), _unchanged(labels)),
        )
    return cases


def clean_up(root):
    """The run directory's claim and clean-up meeting a user's files."""
    train = _csv(root / "train.csv")
    fit = ["fit", train, "--label-column", "label", *FAST, "--out"]
    cases = {}
    notes = root / "notes"
    notes.mkdir()
    (notes / ".notes.abcdefgh.tmp").write_text("a user's notes\n")
    cases["--out holding only a user's .notes.abcdefgh.tmp"] = Case(
        [*fit, notes], check=_unchanged(notes / ".notes.abcdefgh.tmp")
    )
    lock = root / "lock"
    lock.mkdir()
    (lock / ".qsrank-run.lock").write_text("a user's file\n")
    cases["--out holding only a user's .qsrank-run.lock"] = Case(
        [*fit, lock], check=_unchanged(lock / ".qsrank-run.lock")
    )
    linked = root / "linked"
    linked.mkdir()
    (root / "precious.txt").write_text("precious\n")
    (linked / ".qsrank-run.lock").symlink_to(root / "precious.txt")
    cases["--out whose .qsrank-run.lock links to a user's file"] = Case(
        [*fit, linked], check=_unchanged(root / "precious.txt")
    )
    run = _fit_run(root / "run", root)
    (run / "runs" / ".x.abcdefgh.tmp").write_text("a user's file\n")
    cases["resuming a run holding a user's runs/.x.abcdefgh.tmp"] = Case(
        [*fit, run], succeed=True, check=_unchanged(run / "runs" / ".x.abcdefgh.tmp")
    )
    return cases


def address_space(root):
    """predict under `ulimit -v 6000000` (the issue's limit)."""
    model, data = _model(root), _csv(root / "d.csv")
    return {
        "predict under ulimit -v 6000000": Case(
            ["predict", model, data, "--out", root / "s.csv"],
            succeed=True,
            limit_as=6_000_000 * 1024,
            check=lambda: None if (root / "s.csv").is_file() else "no scores written",
        )
    }


def model_files(root):
    """Edited model files: without the checksum made to match (an edit that should be
    noticed), and with it (which the schema must refuse)."""
    data = _csv(root / "d.csv")
    cases = {}

    def case(name, edit):
        model = _model(root / name.replace(" ", "_"))
        edit(model)
        out = root / f"{name.replace(' ', '_')}.csv"
        cases[name] = Case(
            ["predict", model, data, "--out", out], check=_absent(out), max_rss_mb=800
        )

    case("permuted feature_names", lambda m: _edit_json(m, feature_names=NAMES[::-1]))
    case("repeated feature_names", lambda m: _edit_json(m, feature_names=NAMES[:3] + NAMES[:1]))
    case("renamed classes", lambda m: _edit_json(m, classes=["a"]))
    case("integer feature_names", lambda m: _edit_json(m, feature_names=[1, 2, 3, 4]))
    case(
        "repeated feature_names, checksum matched",
        lambda m: _edit_json(m, True, feature_names=NAMES[:3] + NAMES[:1]),
    )
    case(
        "integer feature_names, checksum matched",
        lambda m: _edit_json(m, True, feature_names=[1, 2, 3, 4]),
    )
    case("n_features 10**12, checksum matched", lambda m: _edit_json(m, True, n_features=10**12))
    case("n_features true, checksum matched", lambda m: _edit_json(m, True, n_features=True))
    case(
        "weights ../model.npz, checksum matched",
        lambda m: _edit_json(m, True, weights="../model.npz"),
    )
    case("classes repeated, checksum matched", lambda m: _edit_json(m, True, classes=["b", "b"]))
    case("C as text, checksum matched", lambda m: _edit_json(m, True, C=["x"]))
    case("unknown key, checksum matched", lambda m: _edit_json(m, True, run="rm -rf /"))
    case("scale 1e-310, checksum matched", lambda m: _edit_npz(m, scale=np.full(4, 1e-310)))
    case(
        "coef 1e308 overflowing, checksum matched",
        lambda m: _edit_npz(m, coef=np.full((1, 4), 1e308), scale=np.full(4, 1e-10)),
    )
    case("zip-bombed model.npz, checksum matched", _zip_bomb)
    case("model.npz replaced", lambda m: (m / "model.npz").write_bytes(b"PK\x03\x04junk"))
    return cases


def non_finite(root):
    """Scores that overflow."""
    tiny = _model(root / "tiny", scale=np.full(4, 1e-6))
    X, y = _data()
    X[3, 0] = 1e306
    big = _csv(root / "big.csv", X, y)
    huge = _csv(root / "huge.csv", np.full((40, 4), 1e308), y)
    normal = _model(root / "normal")
    return {
        "predict 1e306 with feature scale 1e-6": Case(
            ["predict", tiny, big, "--out", root / "s1.csv"], check=_finite_scores(root / "s1.csv")
        ),
        "predict 1e308 in every cell": Case(
            ["predict", normal, huge, "--out", root / "s2.csv"],
            check=_finite_scores(root / "s2.csv"),
        ),
    }


def zero_rows_and_big_cells(root):
    """Files of no rows; a huge cell that fails only after the run directory is claimed."""
    cases = {}
    header = root / "header.csv"
    header.write_text("alpha,beta,label\n")
    (root / "empty.svm").write_text("")
    np.savez(root / "empty.npz", X=np.zeros((0, 4)), y=np.zeros(0))
    scipy.io.savemat(root / "empty.mat", {"X": np.zeros((0, 4)), "y": np.zeros(0)})
    for name, args in [
        ("header-only CSV", [header, "--label-column", "label"]),
        ("empty svmlight", [root / "empty.svm"]),
        ("zero-row .npz", [root / "empty.npz"]),
        ("zero-row .mat", [root / "empty.mat"]),
    ]:
        out = root / f"run-{name.replace(' ', '_')}"
        cases[f"fit {name}"] = Case(["fit", *args, *FAST, "--out", out], check=_absent(out))
    model = _model(root)
    (root / "header4.csv").write_text(",".join(NAMES) + "\n")
    cases["predict header-only CSV"] = Case(
        ["predict", model, root / "header4.csv", "--out", root / "s.csv"],
        check=_absent(root / "s.csv"),
    )
    np.savez(root / "empty4.npz", X=np.zeros((0, 4)), y=np.zeros(0))
    cases["predict zero-row .npz"] = Case(
        ["predict", model, root / "empty4.npz", "--out", root / "s2.csv"],
        check=_absent(root / "s2.csv"),
    )
    X, y = _data()
    X[5, 1] = 1e308
    big = _csv(root / "big.csv", X, y)
    good = _csv(root / "good.csv")
    cases["fit a 1e308 cell in train"] = Case(
        ["fit", big, "--label-column", "label", *FAST, "--out", root / "r1"],
        check=_absent(root / "r1"),
    )
    cases["fit a 1e308 cell in test"] = Case(
        ["fit", good, "--test", big, "--label-column", "label", *FAST, "--out", root / "r2"],
        check=_absent(root / "r2"),
    )
    X, y = _data()
    X[:, 2] = 1e300
    X[0, 2] = -1e300
    cases["fit a column of +-1e300"] = Case(
        [
            "fit",
            _csv(root / "spread.csv", X, y),
            "--label-column",
            "label",
            *FAST,
            "--out",
            root / "r3",
        ],
        check=_absent(root / "r3"),
    )
    return cases


def smaller(root):
    """The issue's smaller items."""
    cases = {}
    train = _csv(root / "train.csv")
    X, _ = _data()
    other = _csv(root / "other.csv", X, np.array(["c", "d"] * 20))
    cases["fit test labels sharing no class with training"] = Case(
        ["fit", train, "--test", other, "--label-column", "label", *FAST, "--out", root / "r1"],
        check=_absent(root / "r1"),
    )

    def table_intact(run):
        def check():
            lines = (run / "table.md").read_text().splitlines()
            rows = [line for line in lines if line.startswith("|")]
            cells = {line.replace("\\|", "").count("|") for line in rows}
            if len(rows) != 2 + 3 or len(cells) != 1:
                return f"table.md's table is broken: {rows}"
            return None

        return check

    X, _ = _data()
    nl = _csv(root / "newline.csv", X, np.array(["c|d", "x\ny"] * 20))
    cases["fit a label holding a newline and a |"] = Case(
        ["fit", nl, "--label-column", "label", *FAST, "--out", root / "r2"],
        succeed=True,
        check=table_intact(root / "r2"),
    )
    na = _csv(root / "na.csv", X, np.array(["NA", "b"] * 20))

    def na_class():
        meta = json.loads((root / "r3" / "model.json").read_text())
        return None if meta["classes"] == ["b"] or meta["classes"] == ["NA"] else str(meta)

    cases["fit a class named NA"] = Case(
        ["fit", na, "--label-column", "label", *FAST, "--out", root / "r3"],
        succeed=True,
        check=na_class,
    )
    cases["train --set with a 100 KB unknown key"] = Case(
        ["train", "--config", "digits", "--set", "k" * 100_000 + "=1", "--out", root / "r4"],
        check=_absent(root / "r4"),
    )
    return cases


KINDS = {
    "out not regular": out_not_regular,
    "out is input": out_is_input,
    "clean-up": clean_up,
    "address space": address_space,
    "model files": model_files,
    "non-finite": non_finite,
    "zero rows, big cells": zero_rows_and_big_cells,
    "smaller": smaller,
}


# ---------------------------------------------------------------------------- running


def _run(argv, limit_as=None, env=None):
    """(exit status, stdout, stderr, max RSS in MB) of ``python -m qsrank.main ARGV``."""

    def limit():
        if limit_as:
            resource.setrlimit(resource.RLIMIT_AS, (limit_as, limit_as))

    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "qsrank.main", *map(str, argv)],
            stdout=out,
            stderr=err,
            stdin=subprocess.DEVNULL,
            preexec_fn=limit,
            env={**os.environ, **(env or {})},
        )
        start, status, usage = time.monotonic(), None, None
        while status is None:
            pid, status_, usage_ = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                status, usage = status_, usage_
            elif time.monotonic() - start > TIMEOUT_S:
                proc.kill()
                os.wait4(proc.pid, 0)
                status, usage = -9, None
            else:
                time.sleep(0.05)
        proc.returncode = 0  # reaped here; keep Popen from waiting again
        out.seek(0)
        err.seek(0)
        code = os.waitstatus_to_exitcode(status) if status != -9 else -9
        rss = usage.ru_maxrss / 1024 if usage else float("nan")
        return code, out.read().decode(errors="replace"), err.read().decode(errors="replace"), rss


def outcome(case):
    """The outcome of one case and a line saying why."""
    code, out, err, rss = _run(case.argv, case.limit_as, case.env)
    text = out + err
    errors = [line for line in err.splitlines() if line.startswith("Error:")]
    last = errors[-1][:160] if errors else (text.strip().splitlines() or [""])[-1][:160]
    if code < 0:
        return "crash", f"signal {-code}"
    if "Traceback (most recent call last)" in text:
        return "traceback", text.strip().splitlines()[-1][:160]
    if case.succeed and code != 0:
        return "refused", last
    damage = case.check() if case.check else None
    if case.max_rss_mb and rss > case.max_rss_mb:
        damage = damage or f"reached {rss:.0f} MB"
    if damage:
        return "silent", f"exit {code}: {damage}"
    if case.succeed:
        return ("clean", "worked") if code == 0 else ("refused", last)
    if code == 0:
        return "silent", "exit 0: " + (text.strip().splitlines() or [""])[-1][:160]
    if len(errors) != 1 or len(errors[0]) > 1000:
        return "traceback", f"{len(errors)} error line(s): {last}"
    return "clean", last


def audit(select=None, verbose=False):
    """{kind: {outcome: count}} over every case (those whose name holds `select`)."""
    tally = {}
    with tempfile.TemporaryDirectory() as tmp:
        for k, (kind, make) in enumerate(KINDS.items()):
            root = Path(tmp) / f"kind{k}"
            root.mkdir()
            cwd = os.getcwd()
            os.chdir(root)  # runs without --out land here, not in the repository
            try:
                cases = make(root)
                row = tally.setdefault(kind, dict.fromkeys(OUTCOMES, 0))
                for name, case in cases.items():
                    if select and select not in name:
                        continue
                    result, why = outcome(case)
                    row[result] += 1
                    if verbose:
                        print(f"{result:<10} {kind}: {name}: {why}", flush=True)
            finally:
                os.chdir(cwd)
            shutil.rmtree(root, ignore_errors=True)
    return tally


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", help="run only the cases whose name holds this")
    parser.add_argument("-v", "--verbose", action="store_true", help="a line per case")
    args = parser.parse_args(argv)
    tally = audit(args.case, args.verbose)
    print(f"{'kind':<24}" + "".join(f"{o:>11}" for o in OUTCOMES))
    for kind, row in tally.items():
        print(f"{kind:<24}" + "".join(f"{row[o]:>11}" for o in OUTCOMES))
    total = {o: sum(row[o] for row in tally.values()) for o in OUTCOMES}
    print(f"{'total':<24}" + "".join(f"{total[o]:>11}" for o in OUTCOMES))


if __name__ == "__main__":
    main()
