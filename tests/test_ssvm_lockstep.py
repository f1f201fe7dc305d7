"""Latent training of every class in lockstep (qs.ssvm.lockstep) and its pass
(qs.top_boxes.class_top_boxes): path-verified steps give the in-memory model to the bit from
small working sets (flat, padded, Dask; ties; AP and 0-1), step-verified steps solve each
full inner problem, a resumed training ends where an uninterrupted one does."""

import io
import os
from pathlib import Path

import numpy as np
import pytest

from qs.detection import score_bags
from qs.ssvm import _working_sets, lockstep
from qs.ssvm._working_sets import RowPool
from qs.ssvm.latent import LatentProblem, latent_cutting_plane
from qs.ssvm.lockstep import LockstepOptions, LockstepState, latent_lockstep
from qs.top_boxes import ClassTopBoxes, class_top_boxes


def class_bags(seed, n=40, n_classes=3, d=6, ties=False):
    """Flat bags of 1-10 boxes (more than a small working set holds), labels (n, n_classes):
    a positive image holds one box along its class's feature; with ``ties``, small-integer
    features and a duplicated box per image, so that many boxes tie."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 11, n)
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    X = (
        rng.integers(-1, 2, (offsets[-1], d)).astype(float)
        if ties
        else rng.normal(size=(offsets[-1], d))
    )
    labels = (rng.random((n, n_classes)) < 0.35).astype(np.int8)
    labels[0], labels[1] = 1, 0
    for i, j in zip(*np.nonzero(labels)):
        X[offsets[i] + rng.integers(sizes[i]), j] += 3.0
    if ties:
        many = np.flatnonzero(sizes > 1)
        X[offsets[many] + 1] = X[offsets[many]]
    return X, offsets, labels


def padded(X, offsets):
    sizes = np.diff(offsets)
    features = np.zeros((sizes.size, sizes.max(), X.shape[1]))
    for i, (a, n) in enumerate(zip(offsets[:-1], sizes)):
        features[i, :n] = X[a : a + n]
    return features, sizes


def with_bias(X, features):
    """The bias feature the estimator appends for the 0-1 loss."""
    return np.hstack([X, np.ones((len(X), 1))]), np.concatenate(
        [features, np.ones(features.shape[:2] + (1,))], axis=2
    )


@pytest.mark.parametrize(
    "loss, method, timed, C", [("ap", "qs", ("yue",), 10.0), ("01", "zero_one", (), 1000.0)]
)
@pytest.mark.parametrize("ties", [False, True])
def test_path_verified_lockstep_trains_the_in_memory_models(loss, method, timed, C, ties):
    """Every class's weights, boxes and objectives equal :func:`latent_cutting_plane`'s to
    the bit, from working sets of 1 and 2 boxes (and all), flat, padded and Dask, in far
    fewer passes than one per LAI call. (C large enough for the 0-1 loss that the weights
    are not zero: at zero weights every score is rounding, which differs between products.)"""
    da = pytest.importorskip("dask.array")
    X, offsets, labels = class_bags(3, ties=ties)
    features, counts = padded(X, offsets)
    if loss == "01":
        X, features = with_bias(X, features)
    options = {"C": C, "loss": loss, "method": method, "max_outer": 6, "random_state": 1}
    full = [
        latent_cutting_plane(X, offsets, labels[:, j], **options) for j in range(labels.shape[1])
    ]
    for k in (1, 2, int(counts.max())):
        for bags in (X, features, da.from_array(features, chunks=(7, -1, -1))):
            opts = LockstepOptions(
                working_set_size=k, timed_methods=timed, verify="path", **options
            )
            state = latent_lockstep(bags, counts, labels, opts)
            for ref, c in zip(full, state.classes):
                np.testing.assert_array_equal(c.w, ref.w)
                assert c.pos_boxes.tolist() == ref.pos_boxes.tolist()
                np.testing.assert_array_equal(c.objective, ref.objective)
                assert c.n_outer == ref.n_outer and c.converged == ref.converged
                assert c.lai_calls >= ref.lai_calls  # repeats add calls
                for m in timed:
                    assert len(c.lai_times[m]) == c.lai_calls
            assert state.passes < sum(r.lai_calls for r in full) / 4
    opts = LockstepOptions(working_set_size=int(counts.max()), **options)
    state = latent_lockstep(X, counts, labels, opts)
    assert all(c.repeats == 0 and c.lai_calls == r.lai_calls for r, c in zip(full, state.classes))


def test_grouped_passes_and_restarted_working_sets_train_the_in_memory_models(monkeypatch):
    """A pass over Dask features scoring one chunk of images at a time (each group's new rows
    added before the next is scored), and working sets restarted at each confirmed step
    (``keep="step"``), still give the in-memory models with path verification; the
    restarted working sets hold fewer rows."""
    da = pytest.importorskip("dask.array")
    X, offsets, labels = class_bags(3)
    features, counts = padded(X, offsets)
    options = {"C": 10.0, "loss": "ap", "method": "qs", "max_outer": 6, "random_state": 1}
    full = [
        latent_cutting_plane(X, offsets, labels[:, j], **options) for j in range(labels.shape[1])
    ]
    calls = []
    monkeypatch.setattr(lockstep, "PASS_BYTES", 1)
    monkeypatch.setattr(
        lockstep,
        "class_top_boxes",
        lambda *args, **kw: calls.append(1) or class_top_boxes(*args, **kw),
    )
    held = {}
    for restart in (False, True):
        rows, calls[:] = [], []
        state = latent_lockstep(
            da.from_array(features, chunks=(7, -1, -1)),
            counts,
            labels,
            LockstepOptions(working_set_size=2, restart_working_sets=restart, **options),
            callback=lambda s: rows.append(  # noqa: B023 (called within the loop)
                s.rows_held
            ),
        )
        for ref, c in zip(full, state.classes):
            np.testing.assert_array_equal(c.w, ref.w)
            np.testing.assert_array_equal(c.objective, ref.objective)
        held[restart] = sum(rows) / len(rows)
        assert len(calls) == 6 * state.passes  # 40 images: 6 chunks, a group each
    assert held[True] < held[False], held


def test_step_verified_steps_solve_the_full_inner_problem():
    """With one outer step from the same boxes, the weights of a working set of 1 box solve
    the inner problem over every box to twice the solver's tolerance (the primal within 2 C tol of
    the in-memory solution's), and its working set ends holding each negative's best box."""
    X, offsets, labels = class_bags(7, n=60)
    _, counts = padded(X, offsets)
    C, tol = 50.0, 1e-4
    options = {"C": C, "loss": "ap", "method": "qs", "tol": tol, "max_outer": 1, "min_outer": 1}
    opts = LockstepOptions(working_set_size=1, verify="step", **options)
    state = latent_lockstep(X, counts, labels, opts)
    assert sum(c.repeats for c in state.classes) > 0  # the check had something to correct
    for j, c in enumerate(state.classes):
        ref = latent_cutting_plane(X, offsets, labels[:, j], **options)
        init = offsets[:-1][labels[:, j] == 1] + _initial(counts[labels[:, j] == 1])
        prob = LatentProblem(
            X,
            offsets,
            labels[:, j],
            init,
            C=C,
            loss="ap",
            method="qs",
            tol=tol,
            max_iter=100,
            callback=None,
        )
        primal = [prob.primal(w, prob.most_violated(w)[2]) for w in (c.w, ref.w)]
        assert abs(primal[0] - primal[1]) <= 2 * C * tol + 1e-9, primal


def _initial(sizes):
    """The seeded random boxes latent_cutting_plane starts from (random_state 0)."""
    rng = np.random.default_rng(0)
    return (rng.random(sizes.size) * sizes).astype(np.int64)


def test_a_resumed_training_ends_where_an_uninterrupted_one_does():
    X, offsets, labels = class_bags(5)
    _, counts = padded(X, offsets)
    options = LockstepOptions(C=10.0, loss="ap", method="qs", max_outer=5, working_set_size=2)
    whole = latent_lockstep(X, counts, labels, options)
    saved = {}

    class Stop(Exception):
        pass

    def stop_after_two(state):
        if state.passes == 3:
            saved.update(state.to_arrays())
            raise Stop

    with pytest.raises(Stop):
        latent_lockstep(X, counts, labels, options, callback=stop_after_two)
    stored = LockstepState.from_arrays(dict(saved))
    resumed = latent_lockstep(X, counts, labels, options, state=stored)
    assert resumed.resumed == 1 and resumed.passes == whole.passes + 1
    np.testing.assert_array_equal(resumed.W, whole.W)
    for a, b in zip(resumed.classes, whole.classes):
        assert a.pos_boxes.tolist() == b.pos_boxes.tolist() and a.objective == b.objective
        assert a.n_iter == b.n_iter and a.repeats == b.repeats
    with pytest.raises(ValueError, match="made for other labels"):
        latent_lockstep(X, counts, labels[:, :2], options, state=LockstepState.from_arrays(saved))
    with pytest.raises(ValueError, match="not a lockstep training state"):
        LockstepState.from_arrays({"meta": np.array("{}")})


def test_class_top_boxes_agree_with_scoring_and_sorting():
    """Top k per class by stable sort of the scores (ties: first box first), column 0 is
    score_bags's best box; the rows returned are the features of exactly the top, gathered
    and missing boxes that ``held`` does not name, each (image, box) once in image order;
    flat, padded and Dask alike; float16 features stay float16."""
    da = pytest.importorskip("dask.array")
    X, offsets, _ = class_bags(2, ties=True)
    features, counts = padded(X, offsets)
    rng = np.random.default_rng(0)
    W, V = rng.integers(-2, 3, (6, 3)).astype(float), rng.normal(size=(6, 2))
    gather = np.where(rng.random((counts.size, 2)) < 0.5, -1, 0)
    chosen = np.zeros((counts.size, 2), np.int64)
    held = np.where(
        rng.random((counts.size, 3)) < 0.5,
        -1,
        (rng.random((counts.size, 3)) * counts[:, None]).astype(np.int64),
    )
    results = [
        class_top_boxes(b, counts, W, 3, gather=gather, check=(V, chosen), held=held)
        for b in (X, features, da.from_array(features, chunks=(9, -1, -1)))
    ]
    ref = score_bags(features, counts, np.hstack([W, V]))
    for r in results:
        np.testing.assert_array_equal(r.index[:, :, 0], ref.best[:, :3])
        np.testing.assert_array_equal(r.best, ref.best[:, 3:])
        named = set()
        for i in range(counts.size):
            scores = features[i, : counts[i]] @ W
            for j in range(3):
                order = np.argsort(-scores[:, j], kind="stable")[:3]
                assert r.index[i, j, : order.size].tolist() == order.tolist()
                assert (r.index[i, j, order.size :] == -1).all()
                named |= {(i, int(b)) for b in order}
            named |= {(i, int(b)) for b in gather[i] if b >= 0}
            named |= {(i, int(b)) for b in r.best[i] if b != 0}
            named -= {(i, int(b)) for b in held[i]}
        pairs = list(zip(r.image.tolist(), r.box.tolist()))
        assert pairs == sorted(named)
        rows = np.concatenate(r.rows)
        np.testing.assert_array_equal(rows, features[r.image, r.box])
        for got, want in zip(r, results[0]):
            if isinstance(got, list):
                got, want = np.concatenate(got), np.concatenate(want)
            np.testing.assert_array_equal(got, want)
    half = class_top_boxes(
        da.from_array(features.astype(np.float16), chunks=(9, -1, -1)),
        counts,
        W,
        3,
        gather=gather,
        check=(V, chosen),
    )
    assert all(rows.dtype == np.float16 for rows in half.rows)


@pytest.mark.parametrize("spill", [False, True])
def test_row_pool_compacts_into_the_blocks_or_file_its_rows_fill(spill, tmp_path, monkeypatch):
    """A pool's rows are the features added, found by (image, box): in blocks (those filled
    the same arrays after growth), or with ``spill`` in a nameless file (none named in the
    directory, no map of it left after a read). Compacted, it keeps only the rows named,
    packed in the order they were added, and returns the names renumbered: in as many
    blocks as they fill, or in a new file (the old one closed)."""
    rng = np.random.default_rng(0)
    pool = RowPool(3, np.float16, tmp_path, spill)
    pool.per_block = 4  # small blocks, so that adding grows by several
    monkeypatch.setattr(_working_sets, "READ_ROWS", 3)  # and reading takes several maps
    features = rng.normal(size=(10, 8, 3)).astype(np.float16)

    def add(image, box):
        image, box = np.array(image), np.array(box)
        top = ClassTopBoxes(
            None,
            None,
            None,
            image,
            box,
            [features[image[:3], box[:3]], features[image[3:], box[3:]]],
        )
        pool.add_pass(top)
        assert top.rows == []

    def same(image, box):
        image, box = np.array(image), np.array(box)
        np.testing.assert_array_equal(pool.take(pool.find(image, box)), features[image, box])

    def compact(image, box):
        """Compact to the rows of these boxes, named in three arrays (with -1 among them);
        check their new names and the blocks and file the pool keeps."""
        before, file = pool.find(image, box), pool._file
        used = pool.compact([before[:3], np.array([-1, before[3], -1]), before[4:]])
        after = np.concatenate([used[0], used[1][1:2], used[2]])
        assert (used[1][[0, 2]] == -1).all() and pool.find(image, box).tolist() == after.tolist()
        assert after.tolist() == np.argsort(np.argsort(before)).tolist()
        assert pool.held == pool.size == len(before) and pool.nbytes == len(before) * 3 * 2
        assert len(pool.blocks) == (0 if spill else -(-len(before) // 4))
        assert (pool._file is not None) == spill and (file is None or file.closed)
        assert list(tmp_path.iterdir()) == []
        same(image, box)

    add([0, 0, 1, 2, 5, 9], [1, 7, 0, 3, 3, 2])
    first = pool.blocks[:1]
    add([3, 3, 4, 8], [0, 1, 2, 2])
    assert pool.blocks[:1] == first and pool.held == pool.size == 10
    assert len(pool.blocks) == (0 if spill else 3) and (pool._file is not None) == spill
    same([[0, 2, 8], [9, 3, 1]], [[7, 3, 2], [2, 1, 0]])
    assert pool.find([0, 0, 7], [0, -1, 1]).tolist() == [-1, -1, -1]
    compact([0, 2, 3, 9, 5], [7, 3, 1, 2, 3])
    assert (pool.find([0, 1, 3, 4, 8], [1, 0, 0, 2, 2]) == -1).all()
    add([1, 6, 7, 7, 7], [1, 1, 1, 2, 3])
    assert len(pool.blocks) == (0 if spill else 3) and pool.held == pool.size == 10
    both = ([0, 1, 2, 3, 6, 7, 9, 7], [7, 1, 3, 1, 1, 1, 2, 3])
    same(*both)
    if spill and Path("/proc/self/maps").exists():  # Linux: the maps name the file's inode
        inode = str(os.fstat(pool._file.fileno()).st_ino)
        assert all(
            line.split()[4] != inode for line in Path("/proc/self/maps").read_text().splitlines()
        )
    with pytest.raises(ValueError, match="holds already"):
        add([0], [7])
    compact(*both)
    assert pool.held_boxes(10)[[0, 2, 3, 9, 4]].tolist() == [
        [7, -1],
        [3, -1],
        [1, -1],
        [2, -1],
        [-1, -1],
    ]
    file = pool._file
    pool.compact([np.array([-1])])
    assert pool.blocks == [] and pool.held == pool.size == 0 and pool._file is None
    assert file is None or file.closed
    pool.close()


@pytest.mark.parametrize("verify", ["path", "step"])
def test_spilled_rows_train_the_models_of_rows_kept_in_memory(verify, monkeypatch, tmp_path):
    """Rows kept in a file between passes (a class's solve reads its own into memory, the
    decisions after a pass read from the file) give the models, boxes, objectives,
    iterations, passes, repeats and working sets of rows kept in memory, to the bit; after
    each round the pool holds no blocks (in memory: only those its rows fill), and no file
    is left, in the directory given or open."""
    da = pytest.importorskip("dask.array")
    X, offsets, labels = class_bags(7, n=40)
    features, counts = padded(X.astype(np.float16), offsets)
    options = LockstepOptions(
        C=50.0, loss="ap", method="qs", tol=1e-4, max_outer=3, working_set_size=1, verify=verify
    )
    reads, files, blocks = [], [], []
    read, compact = RowPool._read, RowPool.compact
    monkeypatch.setattr(RowPool, "_read", lambda pool, slots: reads.append(1) or read(pool, slots))

    def packed(pool, used):
        out = compact(pool, used)
        files.append(pool._file)
        blocks.append((len(pool.blocks), 0 if pool.spill else -(-pool.held // pool.per_block)))
        return out

    monkeypatch.setattr(RowPool, "compact", packed)
    runs = {}
    for spilling in (True, False):
        monkeypatch.setattr(lockstep, "SPILL", spilling)
        seen, reads[:] = [], []
        state = latent_lockstep(
            da.from_array(features, chunks=(8, -1, -1)),
            counts,
            labels,
            options,
            callback=lambda s: seen.append(  # noqa: B023 (called within the loop)
                (
                    s.passes,
                    s.rows_held,
                    [c.working.copy() for c in s.classes],
                )
            ),
            spill_dir=tmp_path,
        )
        runs[spilling] = state, seen, len(reads)
    (spilled, seen, read_spilled), (kept, seen_kept, read_kept) = runs[True], runs[False]
    files = [f for f in files if f is not None]
    assert read_spilled > 0 and read_kept == 0 and len(files) > 1
    assert all(f.closed for f in files) and list(tmp_path.iterdir()) == []
    assert all(have == need for have, need in blocks) and max(have for have, _ in blocks) > 0
    assert sum(c.repeats for c in kept.classes) > 0 and spilled.passes == kept.passes
    np.testing.assert_array_equal(spilled.W, kept.W)
    for a, b in zip(spilled.classes, kept.classes):
        assert a.pos_boxes.tolist() == b.pos_boxes.tolist() and a.objective == b.objective
        assert a.n_iter == b.n_iter and a.repeats == b.repeats and a.n_outer == b.n_outer
    for (passes, held, working), (passes_kept, held_kept, working_kept) in zip(seen, seen_kept):
        assert passes == passes_kept and held == held_kept
        assert all(np.array_equal(w, v) for w, v in zip(working, working_kept))


def test_a_training_that_raises_mid_pass_leaves_no_spill_file(monkeypatch, tmp_path):
    """An error in the middle of a pass (the rows kept in their file, new ones coming in)
    closes the file: nothing is left in the directory, nothing open."""
    X, offsets, labels = class_bags(7, n=40)
    _, counts = padded(X, offsets)
    files, calls, compact = [], [], RowPool.compact

    def keeping(pool, used):
        out = compact(pool, used)
        files.append(pool._file)
        return out

    monkeypatch.setattr(RowPool, "compact", keeping)

    def failing(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("the features went away")
        return class_top_boxes(*args, **kwargs)

    monkeypatch.setattr(lockstep, "class_top_boxes", failing)
    with pytest.raises(RuntimeError, match="went away"):
        latent_lockstep(
            X,
            counts,
            labels,
            LockstepOptions(C=50.0, working_set_size=1, verify="step"),
            spill_dir=tmp_path,
        )
    assert len(files) == 2 and all(f.closed for f in files)
    assert list(tmp_path.iterdir()) == []


def test_bad_input_is_named():
    X, offsets, labels = class_bags(1)
    _, counts = padded(X, offsets)
    with pytest.raises(ValueError, match=r"labels must be \(n_images, n_classes\)"):
        latent_lockstep(X, counts, labels[:, 0])
    with pytest.raises(ValueError, match="^working_set_size must be an integer >= 1; got 0"):
        LockstepOptions(working_set_size=0)
    with pytest.raises(ValueError, match="^min_outer must be an integer >= 1; got True"):
        LockstepOptions(min_outer=True)
    with pytest.raises(ValueError, match="^verify must be one of path, step; got 'all'"):
        LockstepOptions(verify="all")
    with pytest.raises(ValueError, match="^restart_working_sets must be True, False or None"):
        LockstepOptions(restart_working_sets="step")
    with pytest.raises(ValueError, match=r"init weights must have shape \(6, 3\)"):
        latent_lockstep(X, counts, labels, LockstepOptions(init=np.zeros((5, 3))))
    with pytest.raises(ValueError, match="gather must be an integer array"):
        class_top_boxes(X, counts, np.zeros((6, 1)), 1, gather=np.full((counts.size, 1), 99))


def test_working_sets_hold_float16_rows_once_for_every_class():
    """Float16 features stay float16 in the working sets, a box several classes hold has one
    row, the rows of no unfinished class's working set are freed, and the model is the one of
    the same features in float32."""
    da = pytest.importorskip("dask.array")
    X, offsets, labels = class_bags(4, n=30, n_classes=4)
    features, counts = padded(X.astype(np.float16).astype(np.float64), offsets)
    options = LockstepOptions(
        C=10.0, loss="ap", method="qs", max_outer=3, working_set_size=3, verify="step"
    )
    seen = []
    half = latent_lockstep(
        da.from_array(features.astype(np.float16), chunks=(8, -1, -1)),
        counts,
        labels,
        options,
        callback=lambda s: seen.append(
            (s.rows_held, s.row_bytes, [c.working.copy() for c in s.classes if not c.done])
        ),
    )
    wide = latent_lockstep(
        da.from_array(features.astype(np.float32), chunks=(8, -1, -1)), counts, labels, options
    )
    np.testing.assert_array_equal(half.W, wide.W)
    for held, nbytes, working in seen:  # the unfinished classes' boxes, each once
        boxes = {(i, b) for w in working for i, b in zip(*np.nonzero(w >= 0)) for b in [w[i, b]]}
        assert held == len(boxes) <= sum(int((w >= 0).sum()) for w in working)
        assert nbytes == held * features.shape[2] * 2
    assert seen[0][0] < sum(int((w >= 0).sum()) for w in seen[0][2])  # shared rows
    assert seen[-1][0] == 0  # the rows of finished classes are freed


def test_a_step_verified_training_resumed_after_any_pass_trains_the_same_models():
    """Stored after any pass (through a ``.npz``, no pickle) and resumed, a step-verified
    training repeats its steps from the stored constraints: the models, boxes, objectives
    and cutting-plane iterations of the uninterrupted training, to the bit. A state stored
    without the constraints (the earlier layout) resumes too, its repeats solved cold."""
    X, offsets, labels = class_bags(7, n=40)
    _, counts = padded(X, offsets)
    options = LockstepOptions(
        C=50.0, loss="ap", method="qs", tol=1e-4, max_outer=3, working_set_size=1, verify="step"
    )
    stored = []

    def store(state):
        buffer = io.BytesIO()
        np.savez(buffer, **state.to_arrays())
        buffer.seek(0)
        with np.load(buffer, allow_pickle=False) as arrays:
            stored.append(dict(arrays))

    whole = latent_lockstep(X, counts, labels, options, callback=store)
    with_constraints = [s for s in stored if any(k.startswith("constraints_") for k in s)]
    assert with_constraints and sum(c.repeats for c in whole.classes) > 0
    cold_differs = False
    for arrays in stored[:-1]:
        resumed = latent_lockstep(
            X, counts, labels, options, state=LockstepState.from_arrays(arrays)
        )
        assert resumed.passes == whole.passes + 1
        np.testing.assert_array_equal(resumed.W, whole.W)
        for a, b in zip(resumed.classes, whole.classes):
            assert a.pos_boxes.tolist() == b.pos_boxes.tolist() and a.objective == b.objective
            assert a.n_iter == b.n_iter and a.repeats == b.repeats and a.n_outer == b.n_outer
        old = {k: v for k, v in arrays.items() if not k.startswith("constraints_")}
        state = LockstepState.from_arrays(old)
        assert all(c.constraints is None for c in state.classes)
        cold = latent_lockstep(X, counts, labels, options, state=state)
        assert all(c.done for c in cold.classes)
        cold_differs |= [c.n_iter for c in cold.classes] != [c.n_iter for c in whole.classes]
    assert cold_differs  # the stored constraints are what the resumed solves start from
    with pytest.raises(ValueError, match="made for features of another dimension"):
        latent_lockstep(
            X[:, :-1],
            counts,
            labels,
            options,
            state=LockstepState.from_arrays(with_constraints[0]),
        )
    bad = {**with_constraints[0]}
    key = next(k for k in bad if k.startswith("constraints_G_"))
    bad[key] = bad[key][:-1]
    with pytest.raises(
        ValueError,
        match=r"not a lockstep training state: class \d+'s "
        r"constraints have shapes",
    ):
        LockstepState.from_arrays(bad)
