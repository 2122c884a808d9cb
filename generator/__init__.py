"""Load generator: KDG-compatible templates sent into a Kinesis stream at a steady rate, within the time given.

Importable API (used by ``spark_app.demo``, benchmarks and tests): ``generator.run(stream_name=..., template=...,
rate=..., duration_s=..., count=...) -> Summary``; ``Template`` to compile and render templates alone; the
errors ``run`` raises (``GeneratorError``: ``UsageError``, ``TargetError``). CLI: ``python -m generator --help``
(``generator.cli``). User docs: docs/generator.md.
"""

from generator.errors import GeneratorError, TargetError, UsageError
from generator.sender import run, seed_template
from generator.stats import Summary
from generator.template import Template, TemplateError

__all__ = [
    "GeneratorError",
    "Summary",
    "TargetError",
    "Template",
    "TemplateError",
    "UsageError",
    "run",
    "seed_template",
]
