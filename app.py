#!/usr/bin/env python3
"""CDK entry point (cdk.json: `.venv/bin/python app.py`): builds the pipeline's stacks, see docs/infra.md."""

import os
import sys

# Node 20 is end-of-life for jsii; the warning banner is noise in every synth.
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

from infra.app import build_app
from infra.config import ConfigError


def main(context: dict | None = None) -> int:
    """Synthesize; `context` adds to cdk.json/-c (tests). A bad context value exits 2 with the reasons."""
    try:
        pipeline = build_app(context=context)
    except ConfigError as error:
        print(error, file=sys.stderr)
        return 2
    pipeline.app.synth()
    return 0


if __name__ == "__main__":
    sys.exit(main())
