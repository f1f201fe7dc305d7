"""Reading images of a source (`qs.data.sources`) in worker processes: the reading spreads
over the cores, and a reader that crashes its process (a corrupt ``.mat`` file can take
scipy's or h5py's reader down with a segmentation fault) is named in a one-line
`ReaderCrash` instead of taking the caller with it.
"""

import contextlib
import multiprocessing
import os
import signal
import threading
from collections import deque
from collections.abc import Generator, Iterable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

__all__ = ["ReaderCrash", "read_images"]


class ReaderCrash(ValueError):
    """A worker process died while reading an input file: a ValueError naming the file.

    Examples
    --------
    >>> err = ReaderCrash("cache/000005.mat: the reader process died (killed by SIGSEGV) ...")
    >>> isinstance(err, ValueError)
    True
    """


def read_images(
    source: Any,
    indices: Iterable[int],
    workers: int,
    method: str = "read",
    progress: str | None = None,
) -> Generator[tuple[int, Any], None, None]:
    """Read images by index, in order, in worker processes or here.

    A worker that dies is traced to its image by reading the images it may have held one
    per process; the one that kills its process raises `ReaderCrash`.

    Parameters
    ----------
    source : object
        Has a method `method` taking an image index (and, for worker processes, can be
        pickled).
    indices : iterable of int
        The images, in the order they are yielded.
    workers : int
        Worker processes (0: read here).
    method : str, default "read"
        The method of `source` that reads one image.
    progress : str or None, default None
        The label of a progress bar (None: no bar).

    Yields
    ------
    tuple of (int, Any)
        ``(i, source.<method>(i))`` for each index.

    Raises
    ------
    ReaderCrash
        When a worker dies reading an image, naming it.

    Examples
    --------
    >>> class Squares:
    ...     def read(self, i):
    ...         return i * i
    >>> list(read_images(Squares(), [3, 1], workers=0))
    [(3, 9), (1, 1)]
    """
    from tqdm import tqdm

    indices = list(indices)
    items = (
        ((i, getattr(source, method)(i)) for i in indices)
        if workers == 0
        else _pooled(source, indices, workers, method)
    )
    with tqdm(
        total=len(indices), desc=progress or None, unit="image", leave=False, disable=not progress
    ) as bar:
        try:
            for item in items:
                bar.update()  # before the yield: the reader of the last image stops here
                yield item
        finally:
            items.close()  # a pool still running is shut down


def _context():
    """Worker processes forked from a clean server process that has this module loaded (no
    fork of a process running zarr's threads; cheaper than spawning each), else spawned."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload([__name__])
    return ctx


def _pooled(source, indices, workers, method):
    ctx = _context()
    # the workers hold the reading end of a pipe whose writing end only this process holds:
    # when it ends, however (SIGKILL included), they read EOF and exit (`_watch`)
    lifeline, alive = ctx.Pipe(duplex=False)
    try:
        yield from _pooled_reads(ctx, lifeline, source, indices, workers, method)
    finally:
        alive.close()
        lifeline.close()


def _pooled_reads(ctx, lifeline, source, indices, workers, method):
    todo = deque(indices)
    while todo:
        pool = ProcessPoolExecutor(
            workers, mp_context=ctx, initializer=_init_worker, initargs=(source, lifeline)
        )
        window = deque()
        try:
            while todo or window:
                try:
                    while todo and len(window) < 2 * workers:
                        window.append((todo[0], pool.submit(_call_source, method, todo[0])))
                        todo.popleft()
                    i, future = window[0]
                    result = future.result()
                except BrokenProcessPool:  # a worker died
                    break
                window.popleft()
                yield i, result
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
        # the pool broke: every image still in the window is suspect; read them one per process
        while window:
            i, future = window.popleft()
            if future.done() and not future.cancelled() and future.exception() is None:
                yield i, future.result()
            elif (
                future.done()
                and not future.cancelled()
                and not isinstance(future.exception(), BrokenProcessPool)
            ):
                raise future.exception()
            else:
                yield i, _isolated(ctx, lifeline, source, method, i)


_SOURCE = None


def _init_worker(source, lifeline):
    global _SOURCE
    _SOURCE = source
    _watch(lifeline)


def _watch(lifeline):
    """End this worker process as soon as the converting process is gone: EOF on
    ``lifeline``, a pipe whose writing end that process alone holds."""

    def wait():
        with contextlib.suppress(EOFError, OSError):
            lifeline.recv_bytes()
        os._exit(1)

    threading.Thread(target=wait, name="qsrank-lifeline", daemon=True).start()


def _call_source(method, i):
    return getattr(_SOURCE, method)(i)


def _isolated(ctx, lifeline, source, method, i):
    """``source.<method>(i)`` in a process of its own; `ReaderCrash` if that process dies."""
    receive, send = ctx.Pipe(duplex=False)
    process = ctx.Process(target=_isolated_main, args=(send, lifeline, source, method, i))
    process.start()
    send.close()
    try:
        ok, payload = receive.recv()
    except EOFError:
        process.join()
        code = process.exitcode
        how = (
            f"killed by {signal.Signals(-code).name}"
            if code is not None and code < 0
            else f"exit status {code}"
        )
        raise ReaderCrash(
            f"{source.name(i)}: the reader process died ({how}) reading this "
            "file, which is likely corrupt; remove or replace it."
        ) from None
    finally:
        receive.close()
    process.join()
    if not ok:
        raise payload
    return payload


def _isolated_main(send, lifeline, source, method, i):
    _watch(lifeline)
    try:
        result = True, getattr(source, method)(i)
    except Exception as err:  # sent back to be raised in the parent
        result = False, err
    send.send(result)
    send.close()
    os._exit(0)
