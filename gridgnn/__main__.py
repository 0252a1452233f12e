"""``python -m gridgnn`` runs the command line."""

import sys

from gridgnn.cli.main import main

sys.exit(main())
