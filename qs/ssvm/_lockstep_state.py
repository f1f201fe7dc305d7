"""The state of a lockstep training (:mod:`qs.ssvm.lockstep`): every class's weights, boxes and
record so far, stored as arrays of numbers (no pickle) so that a training resumes."""

import json
from dataclasses import dataclass, field

import numpy as np

__all__ = ["ClassState", "LockstepState"]


@dataclass
class ClassState:
    """One class's training so far.

    w : weights of its last confirmed outer step (None before the first).
    pos_boxes : box index (within its bag) of each positive image, as imputed now.
    working : int64 (n_images, K) the working set's boxes (-1: none), grown by repeats.
    objective : latent objective after each confirmed outer step.
    lai_times : {method: [seconds of each LAI call]} (the training's method and the timed).
    n_iter : cutting-plane iterations of every inner solve (repeats included).
    n_outer, repeats : outer steps confirmed; inner solves repeated after a pass.
    converged, done : whether the objective settled; whether the class trains no more.
    passes : the passes over every box when it finished (of the whole lockstep training).
    seconds : wall time spent on the class: its inner solves and checks, and an equal share
        of every pass it took part in.
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

    @property
    def lai_calls(self):
        return len(next(iter(self.lai_times.values()), []))


@dataclass
class LockstepState:
    """Every class's :class:`ClassState` and the passes over every box so far; ``resumed``:
    how many times the training was resumed from a stored state; ``pass_seconds``: the wall
    time of each pass; ``rows_held`` and ``row_bytes``: the distinct boxes whose features the
    working sets of all classes hold in memory now, and their bytes (not stored: a resumed
    training gathers them again)."""

    classes: list
    passes: int = 0
    resumed: int = 0
    pass_seconds: list = field(default_factory=list)
    rows_held: int = 0
    row_bytes: int = 0

    @property
    def done(self):
        return all(c.done for c in self.classes)

    @property
    def W(self):
        """(d, n_classes): the weights (once every class has made a step)."""
        return np.stack([c.w for c in self.classes], axis=1)

    def to_arrays(self):
        """The state as NumPy arrays of numbers only (a ``.npz`` needs no pickle to hold
        them): the ragged parts flattened, the scalars in a JSON string."""
        arrays, meta = {}, {"passes": self.passes, "resumed": self.resumed, "classes": [],
                            "pass_seconds": [float(t) for t in self.pass_seconds]}
        for j, c in enumerate(self.classes):
            if c.w is not None:
                arrays[f"w_{j}"] = c.w
            arrays[f"pos_boxes_{j}"], arrays[f"working_{j}"] = c.pos_boxes, c.working
            meta["classes"].append({
                "objective": [float(v) for v in c.objective],
                "lai_times": {m: [float(t) for t in v] for m, v in c.lai_times.items()},
                "n_iter": [int(v) for v in c.n_iter], "n_outer": c.n_outer,
                "repeats": c.repeats, "converged": c.converged, "done": c.done,
                "passes": c.passes, "seconds": c.seconds})
        arrays["meta"] = np.array(json.dumps(meta))
        return arrays

    @classmethod
    def from_arrays(cls, arrays):
        """The state :meth:`to_arrays` gave (a ValueError when the arrays are not one)."""
        try:
            meta = json.loads(str(arrays["meta"]))
            classes = [ClassState(
                w=np.asarray(arrays[f"w_{j}"], np.float64) if f"w_{j}" in arrays else None,
                pos_boxes=np.asarray(arrays[f"pos_boxes_{j}"], np.int64),
                working=np.asarray(arrays[f"working_{j}"], np.int64), **c)
                for j, c in enumerate(meta["classes"])]
            return cls(classes, int(meta["passes"]), int(meta["resumed"]),
                       [float(t) for t in meta["pass_seconds"]])
        except (KeyError, TypeError, ValueError) as err:
            raise ValueError(f"not a lockstep training state: {err}") from None
