"""Load generator: KDG-compatible templates sent into a Kinesis stream at a steady rate.

Importable API (used by ``spark_app.demo`` and tests): ``generator.run(stream_name=..., template=..., rate=...,
duration_s=..., count=...) -> Summary``; ``Template`` to compile and render templates alone. CLI:
``python -m generator --help`` (``generator.cli``). User docs: docs/generator.md.
"""

from generator.sender import run, seed_template
from generator.stats import Summary
from generator.template import Template, TemplateError

__all__ = ["Summary", "Template", "TemplateError", "run", "seed_template"]
