"""The CUDA kernels of :mod:`qs.torch._cuda`, run on the CPU by numba's CUDA simulator.

The simulator is chosen when ``numba.cuda`` is first imported, so the checks run in a child
process with ``NUMBA_ENABLE_CUDASIM=1`` and report what they compared; the assertions are
here. On a GPU the same kernels are compared with the CPU kernels by ``qsrank bench
torch-lai d`` (ranks identical).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

CHILD = r"""
import json
import numpy as np
import torch
from qs.inference.batch import lai_batch
from qs.torch._cuda import _keys, _launcher, lai_cuda

def compare(scores, labels, loss, method="auto"):
    hinge, grad, rank = lai_cuda(torch.from_numpy(scores), torch.from_numpy(labels), loss)
    ref = lai_batch(scores, labels, loss, method, gradient=True)
    return {"ranks": bool(np.array_equal(rank.numpy(), ref.rank)),
            "grad": float(np.abs(grad.numpy() - ref.coef).max()),
            "hinge": float(np.abs(hinge.numpy() - ref.hinge).max())}

rng = np.random.default_rng(0)
out = {"random": [], "brute": []}
for trial in range(12):
    q, n = int(rng.integers(1, 4)), int(rng.integers(2, 60))
    ties = trial % 2 == 0
    scores = rng.integers(-3, 4, (q, n)).astype(float) if ties else rng.normal(size=(q, n))
    labels = rng.random((q, n)) < (0.05, 0.3, 0.7)[trial % 3]
    if trial % 4 == 0:
        labels[0] = trial % 8 == 0  # a query without a negative, or without a positive
    for loss in ("ap", "ndcg"):
        out["random"].append(compare(scores, labels, loss))
for trial in range(6):  # exhaustive enumeration: every interleaving of the negatives
    n = int(rng.integers(3, 8))
    scores = rng.integers(-1, 2, (2, n)).astype(float)
    labels = rng.random((2, n)) < 0.5
    labels[:, 0], labels[:, 1] = True, False
    for loss in ("ap", "ndcg"):
        out["brute"].append(compare(scores, labels, loss, "brute"))
# scores one unit in the last place apart (the sort key cuts those bits: the runs of equal
# keys are repaired), and -0.0 beside +0.0
near = [1.0, np.nextafter(1.0, 2.0), np.nextafter(np.nextafter(1.0, 2.0), 2.0), -0.0, 0.0,
        np.nextafter(0.0, 1.0), 0.5]
scores = np.stack([rng.permutation(np.concatenate([near, near, rng.normal(size=30)]))
                   for _ in range(3)])
labels = rng.random(scores.shape) < 0.25
labels[:, 0], labels[:, 1] = True, False
launch, a, width = _launcher(torch.device("cpu"))
flat, pos = torch.from_numpy(scores).reshape(-1), torch.from_numpy(labels).reshape(-1)
key = torch.empty(flat.numel(), dtype=torch.int64)
launch(_keys, -(-flat.numel() // width), width, a(flat.view(torch.int64)),
       a(pos.view(torch.uint8)), scores.shape[1], 3, a(key))
ordered = torch.sort(key).values
out["equal_keys"] = int((ordered[1:] == ordered[:-1]).sum())
out["near"] = [compare(scores, labels, loss) for loss in ("ap", "ndcg")]
# one positive at +m and one negative at -m on ordinary rows: the hinge as the CPU kernels
# sum it (qs.inference._hinge), however large m
base, pos = rng.normal(size=(2, 40)), rng.random((2, 40)) < 0.3
out["spread"] = [compare(np.c_[np.full(2, m), np.full(2, -m), base],
                         np.c_[np.ones(2, bool), np.zeros(2, bool), pos], loss)
                 for m in (1e15, 1e17, 1e300) for loss in ("ap", "ndcg")]
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def simulated():
    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", PYTHONPATH=str(root))
    done = subprocess.run(
        [sys.executable, "-c", CHILD],
        env=env,
        cwd=root,
        text=True,
        capture_output=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _assert_same(rows):
    for row in rows:
        assert row["ranks"], row
        assert row["grad"] < 1e-12 and row["hinge"] < 1e-12, row


def test_kernels_equal_the_cpu_kernels_on_random_and_tied_scores(simulated):
    assert len(simulated["random"]) == 24
    _assert_same(simulated["random"])


def test_kernels_equal_exhaustive_enumeration(simulated):
    assert len(simulated["brute"]) == 12
    _assert_same(simulated["brute"])


def test_scores_apart_in_the_cut_bits_are_sorted_by_their_value(simulated):
    assert simulated["equal_keys"] > 0  # the case arises: runs of equal keys were repaired
    _assert_same(simulated["near"])


def test_a_large_spread_of_scores_keeps_ranks_and_hinge(simulated):
    assert len(simulated["spread"]) == 6
    _assert_same(simulated["spread"])
