"""``python -m gridgnn`` runs the command line."""

import sys

from gridgnn.launch.orphans import die_with_launcher

die_with_launcher()  # a worker of `gridgnn train --nprocs`: never outlive the launcher

from gridgnn.cli.main import main  # noqa: E402 - after the check above, before torch's slow import

sys.exit(main())
