"""What every `qsrank` command shares: the user errors it reports in one line, the
default configs, and the notice before numba compiles."""

from contextlib import contextmanager
from importlib import resources
from pathlib import Path

import click

#: the default config of each experiment (configs/ of the repository, package data of the wheel)
CONFIGS = Path(str(resources.files("qsrank.configs")))

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
    """The default config named `name` (configs/<name>.yaml)."""
    path = CONFIGS / f"{name}.yaml"
    if not path.is_file():
        raise ValueError(
            f"no default config named {name!r}; the defaults: {', '.join(default_config_names())}"
        )
    return path


def default_config_names():
    """The names of the default configs, sorted."""
    return sorted(p.stem for p in CONFIGS.glob("*.yaml"))


class ConfigPath(click.ParamType):
    """A config given as a YAML file's path or as the name of a default config
    (`--config digits` reads configs/digits.yaml, installed or not)."""

    name = "PATH|NAME"

    def convert(self, value, param, ctx):
        if isinstance(value, Path):
            return value
        path = Path(value)
        if path.is_dir():
            self.fail(f"{value} is a directory", param, ctx)
        if path.exists():  # the reader refuses what is no regular file, naming it
            return path
        if value in default_config_names():
            return CONFIGS / f"{value}.yaml"
        self.fail(
            f"{value} does not exist, as a file or as a default config's name "
            f"({', '.join(default_config_names())})",
            param,
            ctx,
        )
