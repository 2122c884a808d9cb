"""Load generator: KDG-compatible templates sent into a Kinesis stream at a steady rate, within the time given.

Importable API (used by ``spark_app.demo``, benchmarks and tests): ``kinesis_generator.run(stream_name=...,
template=..., rate=..., duration_s=..., count=...) -> Summary``; ``Template`` to compile and render templates alone;
the errors ``run`` raises (``GeneratorError``: ``UsageError``, ``TargetError``). CLI:
``python -m kinesis_generator --help`` (``kinesis_generator.cli``). User docs: docs/generator.md.

``run``, ``seed_template``, ``Template`` and ``TemplateError`` load on first use: they need the package's
``[generator]`` extra (faker, rich), which ``python -m kinesis_generator --help`` does not (its CLI names the extra
when a run needs it).
"""

from typing import Any

from kinesis_generator.errors import GeneratorError, TargetError, UsageError
from kinesis_generator.stats import Summary

_LAZY = {
    "run": "kinesis_generator.sender",
    "seed_template": "kinesis_generator.sender",
    "Template": "kinesis_generator.template",
    "TemplateError": "kinesis_generator.template",
}

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


def __getattr__(name: str) -> Any:
    """``run``, ``seed_template``, ``Template``, ``TemplateError``: from the module that owns them, on first use."""
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value
    return value
