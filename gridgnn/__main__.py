"""``python -m gridgnn`` runs the command line (the local launcher's workers run `gridgnn.cli.worker`)."""

from gridgnn.cli.main import run

run()
