"""docs/options.md: one table of every registered option, written by ``python -m pyspark_aws_kinesis.options``."""

from __future__ import annotations

from .registry import REGISTRY, Option


def _default_text(option: Option) -> str:
    if option.default_doc is not None:
        return option.default_doc
    if option.default is None:
        return "none"
    if isinstance(option.default, bool):
        return str(option.default).lower()
    return f"`{option.default}`"


def render_markdown() -> str:
    """docs/options.md: one table of every option (``python -m pyspark_aws_kinesis.options > docs/options.md``)."""
    lines = [
        "# aws-kinesis options",
        "",
        "Generated from the option registry (`connector/options/`) by `python -m pyspark_aws_kinesis.options > "
        "docs/options.md`; a test checks it is up to date. Names are case-insensitive. An unknown `kinesis.*` "
        'option fails the query with a "did you mean" hint, and so does a name pasted without the prefix from '
        "these docs or another Kinesis connector's (`streamName`, `initialPosition`, `endpoint`, ...); Spark's own "
        "options (`path`, `checkpointLocation`) are left alone. A bad value fails the query naming the option, the "
        "value and what is allowed.",
        "",
        "| option | side | type | default | unit | allowed | description |",
        "|---|---|---|---|---|---|---|",
    ]
    for option in sorted(REGISTRY.values(), key=lambda o: (o.side.label() != "both", o.side.label(), o.key)):
        cells = [
            f"`{option.name}`",
            option.side.label(),
            option.kind.type_name,
            _default_text(option),
            option.unit,
            option.kind.allowed,
            option.doc,
        ]
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(lines) + "\n"
