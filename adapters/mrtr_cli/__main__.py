"""``python -m mrtr_cli``: the same as the ``mrtr`` command."""

import sys

from mrtr_cli.main import main

sys.exit(main())
