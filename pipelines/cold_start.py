"""`qsrank bench cold-start`: a fresh process per LAI method and loss imports ``qs.inference`` and
calls it twice (P = 300, N = 3000); with ``fresh_cache`` on an empty ``NUMBA_CACHE_DIR``."""

import json
import os
import subprocess
import sys
import tempfile

import numpy as np

from qsrank.pipelines._tables import markdown_table

#: what one fresh process runs: import, two calls, and its timings as JSON on stdout
_PROBE = """
import json, sys, time
start = time.perf_counter()
import numpy as np
from qs.inference import lai
imported = time.perf_counter()
rng = np.random.default_rng(0)
scores = np.concatenate([rng.normal(1.0, 1.0, 300), rng.normal(0.0, 1.0, 3000)])
labels = np.arange(3300) < 300
method, loss = sys.argv[1], sys.argv[2]
t0 = time.perf_counter(); lai(scores, labels, loss, method); t1 = time.perf_counter()
lai(scores, labels, loss, method); t2 = time.perf_counter()
print(json.dumps({"import": imported - start, "first": t1 - t0, "second": t2 - t1}))
"""


def cases():
    """(method, loss) of every built-in method and loss but the exhaustive oracle."""
    from qs.inference import METHODS

    return [
        (m, loss)
        for m, losses in METHODS.items()
        if m != "brute"
        for loss in ("ap", "ndcg", "01")
        if loss in losses
    ]


def probe(method, loss, env):
    """One fresh process's timings (seconds): import, first call, second call."""
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, method, loss],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def run(repeats=3, fresh_cache=False):
    """Rows (method, loss, median import s, median and max first call s, median second call ms) over
    `repeats` processes."""
    found = {case: [] for case in cases()}
    for _ in range(repeats):
        env = dict(os.environ)
        with tempfile.TemporaryDirectory() as cache:
            if fresh_cache:
                env["NUMBA_CACHE_DIR"] = cache
            for case, runs in found.items():
                runs.append(probe(*case, env))
    rows = []
    for (method, loss), runs in found.items():
        first = [r["first"] for r in runs]
        rows.append(
            [
                method,
                loss,
                f"{np.median([r['import'] for r in runs]):.3f}",
                f"{np.median(first):.3f}",
                f"{max(first):.3f}",
                f"{1e3 * np.median([r['second'] for r in runs]):.3f}",
            ]
        )
    return rows


def report(rows, repeats, fresh_cache):
    """:func:`run`'s rows as Markdown, under a line saying how they were measured."""
    cache = "an empty NUMBA_CACHE_DIR per repeat" if fresh_cache else "the kernels' disk cache"
    header = [
        "method",
        "loss",
        "import qs.inference s",
        "first call s (median)",
        "first call s (max)",
        "second call ms",
    ]
    return (
        f"Fresh process per (method, loss), {repeats} repeats, {cache}; P = 300, "
        f"N = 3000\n\n{markdown_table(header, rows)}"
    )
