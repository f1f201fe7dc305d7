"""Work arrays reused from one LAI call to the next."""

import numpy as np


class Workspace:
    """Arrays that `qs.inference.lai` calls reuse: the result's outputs and the
    methods' work arrays, grown as needed and never shrunk, so that a loop of calls (a
    solver's training) allocates none after its first call.

    ``lai(..., workspace=ws)`` writes its result into the workspace: the result holds the
    workspace's arrays, and the next call with it overwrites them (as with ``out=``). One
    workspace serves one call at a time (not threads at once).
    """

    def __init__(self):
        self._arrays = {}
        self._owned = set()  # ids of the arrays above
        self._views = {}  # (name, size) -> the view take last returned
        self._groups = {}  # (id of work, N, P) -> the views arrays last returned

    def take(self, name, size, dtype):
        """The first ``size`` elements of the workspace's array ``name`` (of ``dtype``),
        grown to ``size`` when shorter."""
        view = self._views.get((name, size))
        if view is not None:
            return view
        arr = self._arrays.get(name)
        if arr is None or arr.size < size:
            if arr is not None:
                self._owned.discard(id(arr))
                self._views = {k: v for k, v in self._views.items() if k[0] != name}
                self._groups.clear()
            arr = np.empty(size, dtype=dtype)
            self._arrays[name] = arr
            self._owned.add(id(arr))
        view = self._views[name, size] = arr[:size]
        return view

    def arrays(self, work, n_neg, n_pos):
        """The work arrays of a method: ``work`` lists (name, size, dtype) with ``size`` a
        function of (N, P); ``work`` a module's constant (it is known by its id). Looked up
        once per sizes, as a loop of calls repeats them."""
        group = self._groups.get((id(work), n_neg, n_pos))
        if group is None:
            group = tuple(self.take(name, size(n_neg, n_pos), dtype) for name, size, dtype in work)
            self._groups[id(work), n_neg, n_pos] = group
        return group

    def outputs(self, n_neg, n, zero_one, given):
        """(neg_rank, coef) of a call: int32 (N,) and float64 (n,); neg_rank None for the 0-1
        loss. ``given``: the caller's inputs, which must not be arrays of this workspace (a
        result's ``coef`` passed back as scores would be overwritten while read)."""
        for arr in given:
            root = arr
            while isinstance(root, np.ndarray) and root.base is not None:
                root = root.base
            if id(root) in self._owned and any(root is a for a in self._arrays.values()):
                raise ValueError(
                    "scores and labels must not be arrays of the workspace the call "
                    "writes into (a previous result's coef or neg_rank); pass a "
                    "copy."
                )
        coef = self.take("coef", n, np.float64)
        return (None if zero_one else self.take("neg_rank", n_neg, np.int32)), coef
