"""Work arrays reused from one LAI call to the next."""

import numpy as np


class Workspace:
    """Arrays that `qs.inference.lai` calls reuse: the result's outputs and the
    methods' work arrays, grown as needed and never shrunk, so that a loop of calls (a
    solver's training) allocates none after its first call.

    ``lai(..., workspace=ws)`` writes its result into the workspace: the result holds the
    workspace's arrays, and the next call with it overwrites them (as with ``out=``). One
    workspace serves one call at a time (not threads at once).

    Examples
    --------
    >>> from qs.inference import lai
    >>> ws = Workspace()
    >>> first = lai(np.array([0.9, 0.8, 0.1, 0.5]), np.array([1, 0, 1, 0]), workspace=ws)
    >>> coef = first.coef
    >>> second = lai(np.array([0.1, 0.8, 0.9, 0.5]), np.array([1, 0, 1, 0]), workspace=ws)
    >>> second.coef is coef  # the same array, overwritten
    True
    """

    def __init__(self):
        self._arrays = {}
        self._owned = set()  # ids of the arrays above
        self._views = {}  # (name, size) -> the view take last returned
        self._groups = {}  # (id of work, N, P) -> the views arrays last returned

    def take(self, name, size, dtype):
        """The first ``size`` elements of one of the workspace's arrays, grown when shorter.

        Parameters
        ----------
        name : str
            The array's name.
        size : int
            The elements wanted.
        dtype : numpy dtype
            The array's type, when it is made.

        Returns
        -------
        ndarray of shape (size,)
            A view of the array, uninitialised where it was grown.

        Examples
        --------
        >>> ws = Workspace()
        >>> a = ws.take("work", 4, np.int64)
        >>> ws.take("work", 2, np.int64).base is a.base, ws.take("work", 8, np.int64).size
        (True, 8)
        """
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
        """The work arrays of a method, looked up once per sizes, as a loop of calls repeats them.

        Parameters
        ----------
        work : tuple
            ``(name, size, dtype)`` of each array, ``size`` a function of (N, P); a module's
            constant (it is known by its id).
        n_neg : int
            N, the number of negatives.
        n_pos : int
            P, the number of positives.

        Returns
        -------
        tuple of ndarray
            The arrays, in the order of ``work``.

        Examples
        --------
        >>> WORK = (("order", lambda n, p: n + p, np.int64), ("keys", lambda n, p: n, np.float64))
        >>> order, keys = Workspace().arrays(WORK, 3, 2)
        >>> order.shape, keys.dtype
        ((5,), dtype('float64'))
        """
        group = self._groups.get((id(work), n_neg, n_pos))
        if group is None:
            group = tuple(self.take(name, size(n_neg, n_pos), dtype) for name, size, dtype in work)
            self._groups[id(work), n_neg, n_pos] = group
        return group

    def outputs(self, n_neg, n, zero_one, given):
        """The output arrays of a call, refused when an input is one of them.

        Parameters
        ----------
        n_neg : int
            N, the number of negatives.
        n : int
            The number of samples.
        zero_one : bool
            Whether the loss is 0-1 (which has no ranks).
        given : sequence of ndarray
            The caller's inputs, which must not be arrays of this workspace (a result's
            ``coef`` passed back as scores would be overwritten while read).

        Returns
        -------
        neg_rank : ndarray of shape (n_neg,), int32, or None
            None for the 0-1 loss.
        coef : ndarray of shape (n,), float64
            The coefficients.

        Raises
        ------
        ValueError
            When an input is an array of this workspace.

        Examples
        --------
        >>> ws = Workspace()
        >>> neg_rank, coef = ws.outputs(2, 5, False, ())
        >>> neg_rank.dtype, coef.shape
        (dtype('int32'), (5,))
        >>> ws.outputs(2, 5, False, (coef,))
        Traceback (most recent call last):
            ...
        ValueError: scores and labels must not be arrays of the workspace the call writes ...
        """
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
