"""qs._numba: kernels cached on disk (built-in losses load in a second process, a user's
loss compiles and stays out of the cache, a cache directory that cannot be written is a
warning) and compiled once per argument types."""

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numba
import numpy as np
import pytest

import qs._numba as qn
from qs.inference import lai
from qs.inference.scan import scan_sorted
from qs.losses import AP_CODE, LOSSES, NDCG_CODE, APLoss
from qs.ssvm import cutting_plane

ROOT = Path(__file__).resolve().parents[1]
# both built-in losses through one kernel; prints its cache misses and hits
SCRIPT = """
import numpy as np
from qs.inference import lai
from qs.inference.scan import scan_sorted
scores, labels = np.array([0.3, -1.0, 2.0, 0.5, 0.1]), np.array([1, 0, 0, 1, 0])
lai(scores, labels, "ap", "yue")
lai(scores, labels, "ndcg", "chakrabarti")
print(sum(scan_sorted.stats.cache_misses.values()), sum(scan_sorted.stats.cache_hits.values()))
"""


def run_script(cache_dir):
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache_dir)}
    return subprocess.run(
        [sys.executable, "-c", SCRIPT],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        check=True,
    )


def test_builtin_losses_compile_once_then_load_in_a_new_process(tmp_path):
    # one compiled version serves both losses (the loss is a code argument)
    assert run_script(tmp_path).stdout.split() == ["1", "0"]  # compiled
    assert run_script(tmp_path).stdout.split() == ["0", "1"]  # loaded from disk


def test_unwritable_cache_dir_warns_once_and_still_works(tmp_path):
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    out = run_script(not_a_dir)
    assert out.stderr.count("RuntimeWarning") == 1, out.stderr
    assert f"NUMBA_CACHE_DIR={not_a_dir} is not writable" in out.stderr


def test_no_writable_cache_dir_compiles_with_one_warning(monkeypatch):
    monkeypatch.setattr(qn._CacheImpl, "_locator_classes", [])
    monkeypatch.setattr(qn, "_warned", [])

    def double(x):
        return 2 * x

    with pytest.warns(RuntimeWarning, match="no writable numba cache directory"):
        kernel = qn.jit(double)
    assert kernel(3) == 6
    assert isinstance(kernel._cache, numba.core.caching.NullCache)


def _scale(x, k):
    return x * k


def _sum_of_scaled(x):
    total = 0  # widens to int64 below: typed as the literal 0 first
    for k in range(3):
        total += k
    return _scale_kernel(x, 0) + _scale_kernel(x, 1) + _scale_kernel(x, total)


_scale_kernel = None  # each test compiles its own


def test_a_kernel_called_with_constants_compiles_once_for_their_types(monkeypatch, tmp_path):
    """A constant argument, or a variable that starts at one, does not make numba compile the
    callee once per value: one signature per argument types."""
    # a cache of its own: a caller loaded from an earlier run's cache compiles no callee
    monkeypatch.setattr(numba.config, "CACHE_DIR", str(tmp_path))
    callee = qn.jit(_scale)
    monkeypatch.setitem(globals(), "_scale_kernel", callee)
    assert qn.jit(_sum_of_scaled)(2.0) == 2.0 * (0 + 1 + 3)
    assert [tuple(map(str, sig)) for sig in callee.signatures] == [("float64", "int64")]


def _fresh_increment(j, i, n_pos, params):
    return -i / ((j + i - 1.0) * (j + i) * n_pos)


class FreshAP(APLoss):
    """AP through an increment kernel no other test uses: it compiles here."""

    name = "fresh_ap"
    kernel = staticmethod(numba.njit(_fresh_increment))


def test_user_loss_is_exact_and_not_written_to_the_cache():
    cache = Path(scan_sorted._cache.cache_path)
    before = sorted(cache.glob("*.nbc"))
    rng = np.random.default_rng(3)
    scores, labels = rng.standard_normal(60), rng.random(60) < 0.3
    ours = lai(scores, labels, FreshAP(), "qs")
    assert sorted(cache.glob("*.nbc")) == before
    ref = lai(scores, labels, "ap", "yue")
    np.testing.assert_array_equal(ours.neg_rank, ref.neg_rank)
    assert ours.objective == pytest.approx(ref.objective, rel=1e-12)


def test_compile_time_is_kept_out_of_the_lai_times(monkeypatch):
    """The call that compiles a new loss's kernels is the untimed first one. A clock that
    moves only inside LAI calls (1 s in the call that compiled, 1 ms in any other) shows
    where the compile time went, whatever the machine's speed."""
    import qs.ssvm._problem as problem

    class Fresher(FreshAP):  # a new increment kernel: the first call compiles
        kernel = staticmethod(numba.njit(_fresh_increment))

    now = [0.0]

    def ticking_lai(*args, **kwargs):
        compiled = len(Fresher.kernel.signatures)
        res = lai(*args, **kwargs)
        now[0] += 1.0 if len(Fresher.kernel.signatures) > compiled else 1e-3
        return res

    monkeypatch.setattr(problem, "lai", ticking_lai)
    monkeypatch.setattr(problem, "time", SimpleNamespace(perf_counter=lambda: now[0]))
    rng = np.random.default_rng(4)
    X, y = rng.standard_normal((80, 5)), rng.random(80) < 0.3
    res = cutting_plane(X, y, loss=Fresher(), method="sort_dc", max_iter=5)
    assert len(Fresher.kernel.signatures) == 1 and res.lai_calls >= 2
    np.testing.assert_allclose(res.lai_times, 1e-3)
    assert res.lai_compile_time == pytest.approx(1.0 - 1e-3)


def test_the_stamp_covers_every_kernel_file(tmp_path, monkeypatch):
    for pattern in qn.KERNEL_SOURCES:
        for path in qn._PACKAGE.glob(pattern):
            target = tmp_path / path.relative_to(qn._PACKAGE)
            target.parent.mkdir(exist_ok=True)
            target.write_bytes(path.read_bytes())
    monkeypatch.setattr(qn, "_PACKAGE", tmp_path)
    qn.source_stamp.cache_clear()
    try:
        stamp = qn.source_stamp()
        kernel_file = tmp_path / "inference" / "_ranks.py"
        kernel_file.write_text(kernel_file.read_text() + "\n# an edit\n")
        qn.source_stamp.cache_clear()
        assert qn.source_stamp() != stamp
    finally:
        monkeypatch.undo()
        qn.source_stamp.cache_clear()


BATCH_SCRIPT = """
import numpy as np
from numba.core import event
from qs.inference._batch_rows import batch_rows
from qs.inference.batch import lai_batch
compiles = []


class Count(event.Listener):
    def on_start(self, ev):
        compiles.append(ev)

    def on_end(self, ev):
        pass


event.register("numba:compile", Count())
rng = np.random.default_rng(0)
scores, labels = rng.normal(size=(3, 40)), rng.random((3, 40)) < 0.3
for loss in ("ap", "ndcg", "01"):
    lai_batch(scores, labels, loss, gradient=True)
lai_batch(scores, labels, "ap", "qs")
print(sum(batch_rows.stats.cache_misses.values()), sum(batch_rows.stats.cache_hits.values()),
      len(compiles))
"""


def test_batch_kernel_compiles_once_then_loads_in_a_new_process(tmp_path):
    """lai_batch's one kernel serves every method and built-in loss; a second process loads
    it from the index numba wrote to disk and compiles nothing."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}

    def run():
        out = subprocess.run(
            [sys.executable, "-c", BATCH_SCRIPT],
            capture_output=True,
            text=True,
            env=env,
            cwd=ROOT,
            check=True,
        ).stdout.split()
        return tuple(map(int, out))

    misses, hits, compiles = run()
    assert (misses, hits) == (1, 0) and compiles > 0
    assert any("batch_rows" in p.name for p in tmp_path.rglob("*.nbi"))
    assert run() == (0, 1, 0)


def test_the_builtin_losses_bind_by_their_codes():
    """qs.losses registers its increment kernels with qs._numba, which imports nothing of it:
    a built-in loss binds its code (the disk-cached kernels), not a kernel compiled here."""
    assert {LOSSES["ap"].kernel: AP_CODE, LOSSES["ndcg"].kernel: NDCG_CODE} == qn.BUILTIN_INCREMENTS
    from qs.inference.sort_dc import sort_dc

    assert qn.bind(sort_dc, LOSSES["ndcg"].kernel).args == (NDCG_CODE,)
    imported = subprocess.run(
        [sys.executable, "-c", "import sys, qs._numba; print('qs.losses' in sys.modules)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert imported == ["False"]


@numba.njit
def _views_sum(a, b):
    """Sum of a[q] * b[q, 1] read through views without an owner, one per element."""
    a, b = qn.unowned((a, b))
    total = 0.0
    for q in range(a.size):
        total += a[q:][0] * b[q][1]
    return total, a[1:].sum(), b[1:, 1].copy()


def test_unowned_views_read_the_same_data():
    """unowned: the arrays' data, shapes and strides (a strided 2-D array too) without their
    owner; a copy taken of such a view is an ordinary array."""
    a = np.arange(1.0, 6.0)
    b = np.arange(20, dtype=np.int64).reshape(5, 4)[:, ::2]
    total, rest, column = _views_sum(a, b)
    assert total == float(np.sum(a * b[:, 1]))
    assert rest == a[1:].sum()
    np.testing.assert_array_equal(column, b[1:, 1])
