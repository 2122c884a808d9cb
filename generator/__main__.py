"""``python -m generator``: see ``generator.cli``."""

import sys

from generator.cli import main

sys.exit(main())
