"""`qsrank`, the command line of the suite: each command parses, calls one pipeline, prints.

The commands live in a module each (cli/bench.py, cli/train.py, cli/load.py, cli/sodeep.py,
cli/fit.py);
this one gathers them under one group."""

import sys
from importlib.metadata import PackageNotFoundError, version

import click

from qsrank import bench, fit, load, sodeep, train


def _version():
    try:
        return version("qsrank")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


@click.group()
@click.version_option(_version(), prog_name="qsrank")
@click.pass_context
def main(ctx):
    """Exact loss-augmented inference for AP and NDCG losses (Mohapatra et al., CVPR 2018)."""
    ctx.call_on_close(_release_run_dirs)


def _release_run_dirs():
    """After a command: release the run directories it claimed (if it loaded the pipelines)."""
    runs = sys.modules.get("qsrank.pipelines._runs")
    if runs is not None:
        runs.release_run_dirs()


main.add_command(bench.bench)
main.add_command(bench.plot)
main.add_command(train.train)
main.add_command(train.compare)
main.add_command(train.config)
main.add_command(train.readme)
main.add_command(train.publish)
main.add_command(load.load)
main.add_command(sodeep.sodeep)
main.add_command(fit.fit)
main.add_command(fit.predict)
main.add_command(fit.evaluate)

if __name__ == "__main__":
    main()
