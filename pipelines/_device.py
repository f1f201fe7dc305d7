"""The torch device of an experiment's `device` key, and a clock that waits for it."""

import time

DEVICES = ("cpu", "cuda", "auto")


def pick_device(device, cuda_available):
    """The torch device of the config's `device` (auto: cuda when one is available)."""
    if device == "auto":
        return "cuda" if cuda_available else "cpu"
    if device == "cuda" and not cuda_available:
        raise ValueError("device is cuda, but torch sees no CUDA device; set device: cpu or "
                         "auto")
    return device


def clock(device):
    """perf_counter once the device's queued work is done (CUDA runs asynchronously)."""
    if device == "cuda":
        import torch

        torch.cuda.synchronize()
    return time.perf_counter()
