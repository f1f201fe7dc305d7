"""Time and memory measurements shared by the benchmarks: the median time of repeated calls,
and a process's peak resident set (over its life, or over one call)."""

import ctypes
import gc
import resource
import sys
import time
from pathlib import Path

import numpy as np


def clock(call, number=1, timer=time.perf_counter):
    """Seconds per call, the mean of `number` back-to-back calls, by `timer`."""
    start = timer()
    for _ in range(number):
        call()
    return (timer() - start) / number


def median_time(fn, repeats, inner=1):
    """Median over ``repeats`` of the mean time of ``inner`` back-to-back calls (seconds)."""
    return float(np.median([clock(fn, inner) for _ in range(repeats)]))


def peak_bytes():
    """This process's peak resident set in bytes: VmHWM on Linux, else ``ru_maxrss`` (which counts
    the forking parent's pages too)."""
    peak = _status_bytes("VmHWM")
    if peak is not None:
        return peak
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return maxrss if sys.platform == "darwin" else maxrss * 1024  # bytes there, KiB elsewhere


class PeakMemory:
    """Peak extra memory of a call: the resident-set high-water mark (CPU, Linux) or the
    allocator's peak (CUDA), less what was in use before it; None where not measurable."""

    def __init__(self, torch, device):
        self.torch, self.device = torch, device

    def __enter__(self):
        self.peak = None
        if self.device == "cuda":
            self.torch.cuda.synchronize()
            self.torch.cuda.reset_peak_memory_stats()
            self.before = self.torch.cuda.memory_allocated()
        else:
            gc.collect()
            _trim()
            self.before = self._reset_rss()
        return self

    def __exit__(self, *exc):
        if self.device == "cuda":
            self.torch.cuda.synchronize()
            self.peak = self.torch.cuda.max_memory_allocated() - self.before
        elif self.before is not None:
            self.peak = max(0, peak_bytes() - self.before)

    @staticmethod
    def _reset_rss():
        try:
            Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current RSS
        except OSError:
            return None
        return _status_bytes("VmRSS")


def _status_bytes(field):
    """A field of /proc/self/status in bytes; None where there is none (not Linux)."""
    try:
        for line in Path("/proc/self/status").read_text(errors="replace").splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def exact_rss():
    """Make glibc map (and unmap) every allocation of 64 KiB or more on its own, so that the
    resident-set peak follows a call's arrays, not the reused heap (no-op without glibc)."""
    libc = _libc()
    if libc is not None:
        libc.mallopt(-3, 1 << 16)  # M_MMAP_THRESHOLD
        libc.mallopt(-1, 1 << 16)  # M_TRIM_THRESHOLD


def _libc():
    try:
        libc = ctypes.CDLL("libc.so.6")
        return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None
    except OSError:
        return None


def _trim():
    """Give the heap's free memory back to the system, so that a peak counts new pages."""
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)
