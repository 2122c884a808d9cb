"""``python -m kinesis_generator``: see ``kinesis_generator.cli``."""

import sys

from kinesis_generator.cli import main

sys.exit(main())
