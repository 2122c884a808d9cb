"""Load generator: KDG-compatible templates sent into a Kinesis stream at a steady rate, within the time given.

Importable API (used by ``spark_app.demo``, benchmarks and tests): ``kinesis_generator.run(stream_name=...,
template=..., rate=..., duration_s=..., count=...) -> Summary``; ``Template`` to compile and render templates alone;
the errors ``run`` raises (``GeneratorError``: ``UsageError``, ``TargetError``). CLI:
``python -m kinesis_generator --help`` (``kinesis_generator.cli``). User docs: docs/generator.md.
"""

from kinesis_generator.errors import GeneratorError, TargetError, UsageError
from kinesis_generator.sender import run, seed_template
from kinesis_generator.stats import Summary
from kinesis_generator.template import Template, TemplateError

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
