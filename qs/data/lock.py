"""One writer per output: an exclusive lock file that names its holder.

A writer takes the lock before it touches its output and keeps it until it is done; a second
writer is refused at once with a `OutputBusy` that names the holder (pid, host, command, since
when), read from the lock file, where the holder writes it once the lock is its own.

The lock is ``fcntl.flock`` on an open file, as the `filelock` package takes on POSIX: the
kernel drops it when its holder exits, however it exits (SIGKILL included), so a lock is never
stale and needs no timeout or heartbeat. It is taken here directly because the holder's record
must live in the lock file itself, written only once the lock is held and read by the process
refused, which a dozen lines around ``flock`` do. POSIX only (Linux, macOS).

Only a lock file is ever written or removed: a symlink at the lock's path is not followed,
and a file there that is not a lock file (another program's, a user's) is refused, not
overwritten.
"""

import fcntl
import json
import os
import socket
import stat
import sys
import time
from pathlib import Path

__all__ = ["OutputBusy", "OutputLock", "is_lock_file"]

_RECORD = {"pid", "host", "command", "since"}  # what a holder writes in its lock file
_RECORD_BYTES = 4096


class OutputBusy(ValueError):
    """Another process holds the lock of an output: a ValueError naming the holder.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = pathlib.Path(tmp) / ".run.lock"
    ...     with OutputLock(path, "the run"):
    ...         try:
    ...             OutputLock(path, "the run").acquire()
    ...         except OutputBusy as err:
    ...             message = str(err)
    >>> message
    'the run is being written by another process (pid ...); wait for it to end, or ...'
    """


class OutputLock:
    """The exclusive lock of one output, as a lock file that names its holder.

    It is a context manager: ``with OutputLock(...)`` acquires it and releases it.

    Parameters
    ----------
    path : str or pathlib.Path
        The lock file; its directory is made when missing.
    what : str
        The output it guards, for messages ("the store runs/x.zarr").

    Examples
    --------
    >>> import pathlib, tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = pathlib.Path(tmp) / ".run.lock"
    ...     with OutputLock(path, "the run") as lock:
    ...         during = lock.held(), is_lock_file(path)
    ...     after = path.exists()
    >>> during, after
    ((True, True), False)
    """

    def __init__(self, path, what):
        self.path, self.what = Path(path), what
        self.file = None

    def acquire(self):
        """Take the lock and write this process's record into its file.

        Returns
        -------
        OutputLock
            self, held.

        Raises
        ------
        OutputBusy
            When another holder has it, naming the holder.
        ValueError
            When the path is a symlink, is not a regular file, or holds another program's
            file.

        Examples
        --------
        >>> import pathlib, tempfile
        >>> tmp = tempfile.TemporaryDirectory()
        >>> lock = OutputLock(pathlib.Path(tmp.name) / ".run.lock", "the run")
        >>> lock.acquire().held()
        True
        >>> lock.release()
        >>> tmp.cleanup()
        """
        self.path.parent.mkdir(parents=True, exist_ok=True)
        while True:
            try:
                fd = os.open(
                    self.path,
                    os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK,
                    0o644,
                )
            except OSError as err:  # a symlink (ELOOP), a directory, ...
                raise ValueError(
                    f"{self.path} is not a lock file ({err.strerror}); remove it "
                    f"or choose another output than {self.what}."
                ) from None
            try:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    raise ValueError(
                        f"{self.path} is not a lock file (not a regular file); "
                        f"remove it or choose another output than {self.what}."
                    )
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _read_holder(fd)
                os.close(fd)
                raise OutputBusy(
                    f"{self.what} is being written by another process "
                    f"({holder}); wait for it to end, or choose another output."
                ) from None
            except BaseException:
                os.close(fd)
                raise
            try:  # the file may have been removed by a holder releasing it: lock the new one
                same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
            except FileNotFoundError:
                same = False
            if same and not _foreign(fd):
                break
            os.close(fd)
            if same:
                raise ValueError(
                    f"{self.path} exists and is not a lock file qsrank wrote; "
                    f"remove it or choose another output than {self.what}."
                )
        record = json.dumps(
            {
                "pid": os.getpid(),
                "host": socket.gethostname(),
                "command": _command(),
                "since": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
            }
        ).encode()
        os.ftruncate(fd, 0)
        os.pwrite(fd, record, 0)
        self.file = os.fdopen(fd, "r+b", buffering=0)  # closed, and the lock dropped, with it
        return self

    def held(self):
        """Whether this lock is taken and its file is still the one at its path.

        A directory removed and made again holds a new, free lock file.

        Returns
        -------
        bool
            Whether the lock is held.

        Examples
        --------
        >>> import pathlib, tempfile
        >>> tmp = tempfile.TemporaryDirectory()
        >>> lock = OutputLock(pathlib.Path(tmp.name) / ".run.lock", "the run")
        >>> lock.held()
        False
        >>> lock.acquire().held()
        True
        >>> lock.release()
        >>> tmp.cleanup()
        """
        try:
            return (
                self.file is not None
                and os.fstat(self.file.fileno()).st_ino == os.stat(self.path).st_ino
            )
        except FileNotFoundError:
            return False

    def release(self):
        """Remove the lock file and drop the lock; nothing when it is not held.

        The file is removed first, while held, so that a process that opened the old file
        cannot hold a lock nobody else sees.

        Examples
        --------
        >>> import pathlib, tempfile
        >>> tmp = tempfile.TemporaryDirectory()
        >>> lock = OutputLock(pathlib.Path(tmp.name) / ".run.lock", "the run")
        >>> lock.acquire().release()
        >>> lock.held(), lock.path.exists()
        (False, False)
        >>> tmp.cleanup()
        """
        if self.file is not None:
            if self.held():
                self.path.unlink(missing_ok=True)
            self.file.close()
            self.file = None

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc):
        self.release()


def is_lock_file(path):
    """Whether a path is a lock file, which a writer may take over once its holder is gone.

    Parameters
    ----------
    path : str or pathlib.Path
        The path.

    Returns
    -------
    bool
        True for a regular file, not a symlink, empty or holding a holder's record.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     empty, notes = pathlib.Path(tmp) / "empty.lock", pathlib.Path(tmp) / "notes.txt"
    ...     _ = empty.write_text("")
    ...     _ = notes.write_text("my notes")
    ...     found = is_lock_file(empty), is_lock_file(notes), is_lock_file(tmp)
    >>> found
    (True, False, False)
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        return stat.S_ISREG(os.fstat(fd).st_mode) and not _foreign(fd)
    finally:
        os.close(fd)


def _foreign(fd):
    """Whether the open file ``fd`` holds something else than a holder's record (or
    nothing)."""
    raw = os.pread(fd, _RECORD_BYTES + 1, 0)
    if not raw:
        return False
    try:
        record = json.loads(raw.decode("utf-8"))
    except ValueError:
        return True
    return len(raw) > _RECORD_BYTES or not (isinstance(record, dict) and set(record) == _RECORD)


def _command():
    """The holder's command line, shortened: the program's name and its arguments."""
    program = Path(sys.argv[0] if sys.argv and sys.argv[0] else "python")
    name = {"__main__.py": program.parent.name, "-c": "python -c"}.get(  # python -m, -c
        program.name, program.name
    )
    text = " ".join([name, *sys.argv[1:]])
    return text if len(text) <= 200 else text[:197] + "..."


def _read_holder(fd):
    """The holder's record as text; the holder may not have written it yet."""
    try:
        record = json.loads(os.pread(fd, 4096, 0).decode("utf-8"))
        return (
            f"pid {int(record['pid'])} on {record['host']}, since {record['since']}: "
            f"{record['command']}"
        )
    except (OSError, ValueError, KeyError, TypeError):
        return "its holder has not written its name yet"
