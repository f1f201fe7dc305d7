"""Training over queries out of core (qs.ssvm.out_of_core): the model of the in-memory fit,
on the threaded scheduler and on a LocalCluster of worker processes, from a Dask array in
memory and from memory-mapped .npy partitions; split queries refused."""

import numpy as np
import pytest

from qs.data.letor import make_letor
from qs.estimators import RankSVM
from qs.ssvm.out_of_core import npy_partitions, query_chunks, solve_dask

da = pytest.importorskip("dask.array")


@pytest.fixture(scope="module")
def data():
    return make_letor(60, docs_per_query=25, n_features=12, informative=5, seed=3, dtype=np.float32)


def _dask(data, rows):
    chunks = query_chunks(data.groups, rows)
    return da.from_array(data.X, chunks=(chunks, data.X.shape[1])), chunks


def _close(a, b):
    assert a.n_iter_ == b.n_iter_
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(a.intercept_, b.intercept_, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(a.objective_curve_, b.objective_curve_, rtol=1e-10)


@pytest.mark.parametrize("loss, dtype", [("ap", np.float32), ("ndcg", np.float64)])
def test_out_of_core_equals_in_memory(data, loss, dtype):
    chunks = query_chunks(data.groups, 400)
    assert len(chunks) > 3
    X = da.from_array(data.X.astype(dtype), chunks=(chunks, data.X.shape[1]))
    kwargs = {"loss": loss, "C": 10.0, "solver": "cutting_plane", "tol": 1e-4}
    memory = RankSVM(**kwargs).fit(data.X.astype(dtype), data.y, data.groups)
    dask_fit = RankSVM(**kwargs).fit(X, data.y, da.from_array(data.groups, chunks=(chunks,)))
    _close(dask_fit, memory)
    assert dask_fit.n_queries_ == memory.n_queries_ and dask_fit.n_features_in_ == 12


def test_out_of_core_on_worker_processes(data):
    distributed = pytest.importorskip("dask.distributed")
    X, _ = _dask(data, 500)
    memory = RankSVM(solver="cutting_plane", C=10.0).fit(data.X, data.y, data.groups)
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster),
    ):
        dask_fit = RankSVM(C=10.0).fit(X, data.y, data.groups)
    _close(dask_fit, memory)


def test_split_query_refused(data):
    X = da.from_array(data.X, chunks=(7, data.X.shape[1]))
    with pytest.raises(
        ValueError,
        match=r"^query 0 is split across partitions 0 \(rows 0-6\) "
        r"and 1 \(rows 7-13\)",
    ):
        solve_dask(X, data.y > 0, data.groups)


def test_block_frank_wolfe_refused_out_of_core(data):
    X, _ = _dask(data, 400)
    with pytest.raises(ValueError, match="out of core, solver must be"):
        RankSVM(solver="block_frank_wolfe").fit(X, data.y, data.groups)


def test_query_chunks_cut_between_queries(data):
    chunks = query_chunks(data.groups, 100)
    ends = np.cumsum(chunks)
    assert ends[-1] == data.groups.size
    assert np.all(data.groups[ends[:-1] - 1] != data.groups[ends[:-1]])
    assert all(c >= 100 for c in chunks[:-1])


def test_npy_partitions_equal_in_memory(data, tmp_path):
    chunks = query_chunks(data.groups, 400)
    bounds = np.concatenate([[0], np.cumsum(chunks)])
    paths = [tmp_path / f"{p}.npy" for p in range(len(chunks))]
    for path, start, stop in zip(paths, bounds[:-1], bounds[1:]):
        np.save(path, data.X[start:stop])
    X = npy_partitions(paths)
    assert X.chunks == (chunks, (data.X.shape[1],)) and X.dtype == np.float32
    np.testing.assert_array_equal(X.compute(), data.X)
    memory = RankSVM(solver="cutting_plane", C=10.0).fit(data.X, data.y, data.groups)
    _close(RankSVM(C=10.0).fit(X, data.y, data.groups), memory)


def test_npy_partitions_refuse_mismatched_files(data, tmp_path):
    np.save(tmp_path / "a.npy", data.X[:10])
    np.save(tmp_path / "b.npy", data.X[10:20, :5])
    np.save(tmp_path / "c.npy", data.X[10:20].astype(np.float64))
    np.save(tmp_path / "d.npy", data.X[0])
    with pytest.raises(ValueError, match="b.npy holds float32 with 5 columns"):
        npy_partitions([tmp_path / "a.npy", tmp_path / "b.npy"])
    with pytest.raises(ValueError, match="c.npy holds float64 with 12 columns"):
        npy_partitions([tmp_path / "a.npy", tmp_path / "c.npy"])
    with pytest.raises(ValueError, match="shape \\(12,\\); a partition is 2-D"):
        npy_partitions([tmp_path / "d.npy"])
    with pytest.raises(ValueError, match="at least one"):
        npy_partitions([])
