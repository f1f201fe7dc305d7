"""One writer per output (qs/data/lock.py): `qsrank load cnn` on a store, the run directory of
`train` and `compare` (pipelines/_runs.claim_run_dir), and `sodeep train`'s checkpoint. The
holder is a real second process; the one refused names it, and the lock dies with its holder."""

import contextlib
import multiprocessing
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from qs.data import open_store
from qs.data.lock import OutputBusy, OutputLock, _command
from qsrank.main import main
from qsrank.pipelines import _runs

ROOT = Path(__file__).resolve().parents[1]
SPAWN = multiprocessing.get_context("spawn")


def _hold(what, path, ready, stop):
    """In a child process: take the lock of an output the way its writer does, say so, and
    keep it until told to stop."""
    if what == "store":
        holder = writer(path)
    elif what == "run":
        _runs.claim_run_dir(path, "compare", "tables")
    else:
        from qs.surrogates import sodeep
        from qsrank.pipelines import sodeep as pipeline

        def train_sorter(*args, **kwargs):  # holds the lock the training took, then stops
            ready.set()
            stop.wait(60)
            raise InterruptedError

        sodeep.train_sorter = train_sorter
        with contextlib.suppress(InterruptedError):
            pipeline.train("lstm", 8, 1, 0, path, progress=False)
        return
    ready.set()
    stop.wait(60)
    if what == "store":
        holder.close()


def held(what, path):
    """A child process holding the lock of `path`; returns (process, stop event)."""
    ready, stop = SPAWN.Event(), SPAWN.Event()
    child = SPAWN.Process(target=_hold, args=(what, str(path), ready, stop))
    child.start()
    assert ready.wait(120), "the child never took the lock"
    return child, stop


def one_line(result):
    lines = result.output.strip().splitlines()
    assert result.exit_code == 1 and len(lines) == 1, result.output
    return lines[0]


def writer(path):
    from qs.data.store_writer import StoreWriter

    return StoreWriter(
        path,
        ["a", "b"],
        k_max=2,
        d=3,
        dtype="float32",
        chunk_images=1,
        split=None,
        has_gt=False,
        block_keys=["0", "1"],
    )


def test_a_second_store_writer_is_refused_naming_the_holder(tmp_path):
    out = tmp_path / "s.zarr"
    child, _ = held("store", out)
    try:
        line = one_line(
            CliRunner().invoke(
                main,
                [
                    "load",
                    "cnn",
                    "synthetic",
                    "--scale",
                    "0.01",
                    "--boxes",
                    "4",
                    "--features",
                    "3",
                    "--out",
                    str(out),
                    "--workers",
                    "1",
                ],
            )
        )
        assert (
            f"the store {out} is being written by another process (pid {child.pid} on "
            f"{socket.gethostname()}, since "
        ) in line
        assert line.endswith(f": {_command()}); wait for it to end, or choose another output.")
    finally:
        child.kill()  # SIGKILL: the kernel drops the lock with its holder
        child.join()
    resumed = writer(out)  # the lock is free, and what the holder began resumes
    for b in resumed.pending():
        resumed.write_block(
            b, np.ones((1, 2, 3), np.float32), np.array([2]), np.ones((1, 2, 4), np.float32)
        )
    assert resumed.finish("test") == out
    assert open_store(out).verify() > 0
    assert not out.with_name(f".{out.name}.lock").exists()  # removed by the finished writer


def test_two_concurrent_conversions_leave_one_intact_store(tmp_path):
    """The case as found: two `qsrank load cnn` started together on one --out."""
    out = tmp_path / "s.zarr"
    cmd = [
        sys.executable,
        "-c",
        "import sys; from qsrank.main import main; main()",
        "load",
        "cnn",
        "synthetic",
        "--scale",
        "0.02",
        "--chunk-images",
        "5",
        "--workers",
        "1",
        "--out",
        str(out),
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    runs = [
        subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    results = [(p.wait(300), *p.communicate()) for p in runs]
    assert sorted(rc for rc, _, _ in results) == [0, 1], results
    ((_, _, err),) = [r for r in results if r[0] == 1]
    assert len(err.strip().splitlines()) == 1, err
    assert "is being written by another process (pid" in err or "exists" in err, err
    open_store(out).verify()


def test_a_run_directory_has_one_writer(tmp_path):
    out = tmp_path / "run"
    child, stop = held("run", out)
    try:
        with pytest.raises(
            OutputBusy,
            match=rf"output directory {out} is being written by "
            rf"another process \(pid {child.pid} on ",
        ):
            _runs.claim_run_dir(out, "compare", "tables")
        config = tmp_path / "compare.yaml"  # methods that need no optional extra
        config.write_text("experiment: compare\nmethods: [zero_one, ap_hinge]\n")
        result = CliRunner().invoke(main, ["compare", "--config", str(config), "--out", str(out)])
        assert f"pid {child.pid}" in one_line(result)
    finally:
        stop.set()
        child.join()
    assert _runs.claim_run_dir(out, "compare", "tables") == out
    assert _runs.claim_run_dir(out, "compare", "tables") == out  # its own: again


def test_a_killed_holder_leaves_no_stale_lock(tmp_path):
    out = tmp_path / "run"
    child, _ = held("run", out)
    os.kill(child.pid, signal.SIGKILL)
    child.join()
    assert (out / _runs.LOCK).exists()  # the file stays; the lock went with its holder
    assert _runs.claim_run_dir(out, "compare", "tables") == out


def test_a_checkpoint_has_one_trainer(tmp_path):
    from qsrank.pipelines import sodeep

    out = tmp_path / "sorter.pt"
    child, stop = held("sodeep", out)
    try:
        with pytest.raises(
            OutputBusy,
            match=rf"the checkpoint {out} is being written by "
            rf"another process \(pid {child.pid} on ",
        ):
            sodeep.train("lstm", 8, 1, 0, out)
    finally:
        stop.set()
        child.join()


def test_a_released_lock_file_is_not_held_by_a_late_opener(tmp_path):
    """A process that opened the lock file just before its holder removed it must not hold a
    lock nobody else sees: it locks the file now at the path."""
    path = tmp_path / ".x.lock"
    first = OutputLock(path, "x").acquire()
    late = os.open(path, os.O_RDWR)
    first.release()
    second = OutputLock(path, "x").acquire()
    with pytest.raises(OutputBusy, match=rf"pid {os.getpid()} on "):
        OutputLock(path, "x").acquire()
    second.release()
    os.close(late)


# --- no worker outlives its conversion ------------------------------------------------------


def session_processes(sid):
    """Pids of the live (not zombie) processes of session `sid`."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        state, _, _, session = text[text.rindex(")") + 2 :].split()[:4]
        if int(session) == sid and state != "Z":
            found.append(int(stat.parent.name))
    return found


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc (Linux)")
@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_killing_a_conversion_leaves_no_worker_alive(tmp_path, how):
    cmd = [
        sys.executable,
        "-c",
        "import sys; from qsrank.main import main; main()",
        "load",
        "cnn",
        "synthetic",
        "--scale",
        "1",
        "--boxes",
        "100",
        "--chunk-images",
        "5",
        "--workers",
        "2",
        "--out",
        str(tmp_path / "s.zarr"),
    ]
    convert = subprocess.Popen(
        cmd,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # its processes: the session convert.pid
    try:
        deadline = time.monotonic() + 120
        while len(session_processes(convert.pid)) < 4:  # itself, forkserver, 2 workers
            assert convert.poll() is None, "the conversion ended before its workers started"
            assert time.monotonic() < deadline, "the workers never started"
            time.sleep(0.2)
        convert.send_signal(how)
        convert.wait(30)
        deadline = time.monotonic() + 10  # a few seconds at most
        while session_processes(convert.pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert session_processes(convert.pid) == []
    finally:
        for pid in session_processes(convert.pid):
            os.kill(pid, signal.SIGKILL)
