"""The torch device and threads of an experiment's `device` and `threads` keys, and a clock
that waits for the device."""

import time
from contextlib import contextmanager

DEVICES = ("cpu", "cuda", "auto")


def pick_device(device, cuda_available):
    """The torch device of the config's `device` (auto: cuda when one is available)."""
    if device == "auto":
        return "cuda" if cuda_available else "cpu"
    if device == "cuda" and not cuda_available:
        raise ValueError("device is cuda, but torch sees no CUDA device; set device: cpu or auto")
    return device


def prepare(cfg):
    """The config as run: `device` auto made concrete."""
    import torch

    return {**cfg, "device": pick_device(cfg["device"], torch.cuda.is_available())}


@contextmanager
def torch_threads(run):
    """torch's intra-op threads as the config's `threads` sets them, restored afterwards."""
    import torch

    before = torch.get_num_threads()
    if run.cfg["threads"] is not None:
        torch.set_num_threads(run.cfg["threads"])
    try:
        yield
    finally:
        torch.set_num_threads(before)


def clock(device):
    """perf_counter once the device's queued work is done (CUDA runs asynchronously)."""
    if device == "cuda":
        import torch

        torch.cuda.synchronize()
    return time.perf_counter()
