"""What every `qsrank` command shares: the user errors it reports in one line, the
repository's configs, and the notice before numba compiles."""

from contextlib import contextmanager
from pathlib import Path

import click

# The repository's configs; when the package is installed without them, the built-in defaults.
CONFIGS = Path(__file__).resolve().parents[1] / "configs"

# What a run can hit that is the user's to fix (bad config or data, an unwritable --out, a
# QP backend that fails or is missing): a one-line message and exit 1, not a traceback.
USER_ERRORS = (ValueError, OSError, RuntimeError, ImportError)


@contextmanager
def user_errors():
    """Run the block; a user's error (`USER_ERRORS`) leaves as a one-line ClickException."""
    try:
        yield
    except USER_ERRORS as err:
        raise click.ClickException(str(err)) from None

_notice = {"registered": False, "shown": False, "depth": 0, "start": 0.0, "seconds": 0.0}


def notice_compiles():
    """From now on, print one line on stderr before the first kernel numba compiles (a cache
    miss: the first run after installing or updating the kernels), and at exit how long the
    compilations took (kernels compiled inside others counted once); cache loads are
    silent."""
    if _notice["registered"]:
        return
    import atexit
    import time

    from numba.core import event

    class CompileNotice(event.Listener):
        def on_start(self, _):
            if not _notice["shown"]:
                _notice["shown"] = True
                click.echo("compiling kernels (first run only) ...", err=True)
            if _notice["depth"] == 0:
                _notice["start"] = time.perf_counter()
            _notice["depth"] += 1

        def on_end(self, _):
            _notice["depth"] -= 1
            if _notice["depth"] == 0:
                _notice["seconds"] += time.perf_counter() - _notice["start"]

    event.register("numba:compile", CompileNotice())
    atexit.register(_report_compiles)
    _notice["registered"] = True


def _report_compiles():
    if _notice["seconds"] > 0:
        click.echo(f"compiled kernels for {_notice['seconds']:.1f} s", err=True)


def default_config(name):
    """configs/<name>.yaml of the repository, or None when the package was installed
    without it (the pipeline's built-in defaults then)."""
    path = CONFIGS / f"{name}.yaml"
    return path if path.is_file() else None
