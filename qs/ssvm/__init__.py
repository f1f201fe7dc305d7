"""Solvers of the ranking structured SVM (Yue et al. 2007) and the binary hinge SVM.

``min_w 1/2 |w|^2 + C xi  s.t.  w . (Psi(X, R*) - Psi(X, R)) >= Delta(R*, R) - xi`` for all
``R``, with the most violated ``R`` found by [qs.inference.lai][] (any method; all give
the same answer, so the same weights). Each solver records every LAI call's wall time, the
primal objective and the duality gap per iteration, and stops on a tolerance or ``max_iter``.

- `cutting_plane`: 1-slack cutting plane, working-set dual QP through ``qpsolvers``.
- `frank_wolfe`: Frank-Wolfe on the dual with exact line search; no QP.
- `subgradient`: Pegasos-style subgradient descent with iterate averaging; no QP.

All three run full batch by default and then draw no random numbers: the same input gives
the same result. ``subgradient`` also takes stochastic steps on random subsets, repeatable
for a seed.
"""

from collections.abc import Callable

from qs.ssvm._problem import Progress, SolverResult, ground_truth_coef
from qs.ssvm.cutting_plane import cutting_plane
from qs.ssvm.frank_wolfe import frank_wolfe
from qs.ssvm.subgradient import subgradient

__all__ = [
    "SOLVERS",
    "Progress",
    "SolverResult",
    "cutting_plane",
    "frank_wolfe",
    "ground_truth_coef",
    "subgradient",
]

#: solver name -> function
SOLVERS: dict[str, Callable[..., SolverResult]] = {
    "cutting_plane": cutting_plane,
    "frank_wolfe": frank_wolfe,
    "subgradient": subgradient,
}
