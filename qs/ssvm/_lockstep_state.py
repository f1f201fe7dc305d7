"""The state of a lockstep training (`qs.ssvm.lockstep`): every class's weights, boxes and
record so far, stored as arrays of numbers (no pickle) so that a training resumes."""

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Self

import numpy as np

from qs.ssvm.cutting_plane import INITIAL_CAPACITY, Constraints

__all__ = ["ClassState", "LockstepState"]


@dataclass
class ClassState:
    """One class's training so far.

    Attributes
    ----------
    w : ndarray of shape (d,) or None
        Weights of its last confirmed outer step (None before the first).
    pos_boxes : ndarray of shape (n_positives,)
        Box index (within its bag) of each positive image, as imputed now.
    working : ndarray of shape (n_images, K)
        The working set's boxes (int64, -1: none), grown by repeats.
    objective : list of float
        Latent objective after each confirmed outer step.
    lai_times : dict
        ``{method: [seconds of each LAI call]}`` (the training's method and the timed).
    n_iter : list of int
        Cutting-plane iterations of every inner solve (repeats included).
    n_outer : int
        Outer steps confirmed.
    repeats : int
        Inner solves repeated after a pass.
    converged : bool
        Whether the objective settled.
    done : bool
        Whether the class trains no more.
    passes : int
        The passes over every box when it finished (of the whole lockstep training).
    seconds : float
        Wall time spent on the class: its inner solves and checks, and an equal share of
        every pass it took part in.
    constraints : Constraints or None
        With ``verify="step"``, the `qs.ssvm.cutting_plane.Constraints` of the current
        outer step's inner solves so far, the warm start of its repeat (None at a step's
        start and with ``verify="path"``).
    """

    w: np.ndarray | None
    pos_boxes: np.ndarray
    working: np.ndarray
    objective: list = field(default_factory=list)
    lai_times: dict = field(default_factory=dict)
    n_iter: list = field(default_factory=list)
    n_outer: int = 0
    repeats: int = 0
    converged: bool = False
    done: bool = False
    passes: int = 0
    seconds: float = 0.0
    constraints: Constraints | None = None

    @property
    def lai_calls(self) -> int:
        """Number of LAI calls of the training's method."""
        return len(next(iter(self.lai_times.values()), []))


@dataclass
class LockstepState:
    """The state of a lockstep training: every class's `ClassState` and the passes so far.

    Attributes
    ----------
    classes : list of ClassState
        One per class, in the order of the labels' columns.
    passes : int
        Passes over every box so far.
    resumed : int
        How many times the training was resumed from a stored state.
    pass_seconds : list of float
        The wall time of each pass.
    rows_held : int
        The distinct boxes whose features the working sets of all classes hold now (not
        stored: a resumed training gathers them again).
    row_bytes : int
        Their bytes.
    """

    classes: list
    passes: int = 0
    resumed: int = 0
    pass_seconds: list = field(default_factory=list)
    rows_held: int = 0
    row_bytes: int = 0

    @property
    def done(self) -> bool:
        """Whether every class trains no more."""
        return all(c.done for c in self.classes)

    @property
    def W(self) -> np.ndarray:
        """(d, n_classes): the weights (once every class has made a step)."""
        return np.stack([c.w for c in self.classes], axis=1)

    def to_arrays(self) -> dict[str, np.ndarray]:
        """The state as NumPy arrays of numbers only (a ``.npz`` needs no pickle to hold them).

        Returns
        -------
        dict of str to ndarray
            The ragged parts flattened, the scalars in a JSON string (``meta``). A class's
            warm-start constraints are ``constraints_A_<j>`` (k, d), ``constraints_b_<j>``
            (k,) and ``constraints_G_<j>`` (k, k): the k constraints held (not the arrays'
            spare capacity) and their Gram matrix as the solver grew it (recomputed, it
            could differ in the last bits, and so would the resumed solves).
        """
        arrays: dict[str, np.ndarray] = {}
        meta: dict[str, Any] = {
            "passes": self.passes,
            "resumed": self.resumed,
            "classes": [],
            "pass_seconds": [float(t) for t in self.pass_seconds],
        }
        for j, c in enumerate(self.classes):
            if c.w is not None:
                arrays[f"w_{j}"] = c.w
            arrays[f"pos_boxes_{j}"], arrays[f"working_{j}"] = c.pos_boxes, c.working
            if c.constraints is not None:
                (A, b), G = c.constraints.rows(), c.constraints.gram()  # copied: the
                arrays.update(
                    {
                        f"constraints_A_{j}": A.copy(),  # solver changes them in place
                        f"constraints_b_{j}": b.copy(),
                        f"constraints_G_{j}": G.copy(),
                    }
                )
            meta["classes"].append(
                {
                    "objective": [float(v) for v in c.objective],
                    "lai_times": {m: [float(t) for t in v] for m, v in c.lai_times.items()},
                    "n_iter": [int(v) for v in c.n_iter],
                    "n_outer": c.n_outer,
                    "repeats": c.repeats,
                    "converged": c.converged,
                    "done": c.done,
                    "passes": c.passes,
                    "seconds": c.seconds,
                }
            )
        arrays["meta"] = np.array(json.dumps(meta))
        return arrays

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, Any]) -> Self:
        """The state `to_arrays` gave.

        Parameters
        ----------
        arrays : mapping of str to ndarray
            What `to_arrays` returned (or a loaded ``.npz`` of it).

        Returns
        -------
        LockstepState
            The state. One stored without the constraints loads with none: a class in the
            middle of a step-verified outer step then solves its repeat from ``w = 0`` (the
            same optimum to the solver's tolerance, not the same bits).

        Raises
        ------
        ValueError
            When the arrays are not a lockstep training state.
        """
        try:
            meta = json.loads(str(arrays["meta"]))
            classes = [
                ClassState(
                    w=np.asarray(arrays[f"w_{j}"], np.float64) if f"w_{j}" in arrays else None,
                    pos_boxes=np.asarray(arrays[f"pos_boxes_{j}"], np.int64),
                    working=np.asarray(arrays[f"working_{j}"], np.int64),
                    constraints=_constraints(arrays, j),
                    **c,
                )
                for j, c in enumerate(meta["classes"])
            ]
            return cls(
                classes,
                int(meta["passes"]),
                int(meta["resumed"]),
                [float(t) for t in meta["pass_seconds"]],
            )
        except (KeyError, TypeError, ValueError) as err:
            raise ValueError(f"not a lockstep training state: {err}") from None


def _constraints(arrays: Mapping[str, Any], j: int) -> Constraints | None:
    """Class ``j``'s stored warm-start `Constraints`, or None if none were stored."""
    if f"constraints_A_{j}" not in arrays:
        return None
    A = np.asarray(arrays[f"constraints_A_{j}"], np.float64)
    b = np.asarray(arrays[f"constraints_b_{j}"], np.float64)
    G = np.asarray(arrays[f"constraints_G_{j}"], np.float64)
    k = b.shape[0] if b.ndim == 1 else -1
    if A.ndim != 2 or A.shape[0] != k or G.shape != (k, k):
        raise ValueError(
            f"class {j}'s constraints have shapes A {A.shape}, b {b.shape}, "
            f"G {G.shape}; expected (k, d), (k,), (k, k)."
        )
    cuts = Constraints(A.shape[1], max(k, INITIAL_CAPACITY))
    cuts.A[:k], cuts.b[:k], cuts.G[:k, :k], cuts.k = A, b, G, k
    return cuts
