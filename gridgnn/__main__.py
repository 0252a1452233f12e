"""``python -m gridgnn`` runs the command line."""

from gridgnn.cli.main import run

run()
