"""``python -m gridgnn`` runs the command line."""

from gridgnn.launch.orphans import die_with_launcher

die_with_launcher()  # a worker of `gridgnn train --nprocs`: never outlive the launcher

from gridgnn.cli.main import run  # noqa: E402 - after the check above, before torch's slow import

run()
