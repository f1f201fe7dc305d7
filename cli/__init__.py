"""The `qsrank` command line: thin wrappers that parse options and call `pipelines`."""

import os

# OpenBLAS's workers spin for a while after each call before they sleep; the solvers call
# numba's threaded kernels right after a scores product (X @ w), and the spinning workers
# took the cores from them (a pass over queries ran at half speed). Set before numpy loads
# OpenBLAS, so a user's own setting wins.
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")
