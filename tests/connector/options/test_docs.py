"""``pyspark_aws_kinesis.options.docs``: every option is documented, docs/options.md is the generated table, and every
option docs/source.md names exists."""

from __future__ import annotations

from pathlib import Path

from pyspark_aws_kinesis import options as opts
from pyspark_aws_kinesis.options.docs import render_markdown

ROOT = Path(__file__).resolve().parents[3]


def test_every_option_is_documented_and_valid() -> None:
    for option in opts.REGISTRY.values():
        assert option.doc.strip() and option.kind.allowed
        assert option.name.lower().startswith("kinesis.")


def test_options_doc_is_up_to_date() -> None:
    committed = (ROOT / "docs" / "options.md").read_text()
    assert committed == render_markdown(), "run: python -m pyspark_aws_kinesis.options > docs/options.md"


def test_every_option_named_in_the_source_docs_exists() -> None:
    import re

    text = (ROOT / "docs" / "source.md").read_text()
    named = set(re.findall(r"`(kinesis\.[A-Za-z.]+)`", text)) | set(re.findall(r'"(kinesis\.[A-Za-z.]+)"', text))
    assert named, "the docs name options"
    assert sorted(name for name in named if name.lower() not in opts.REGISTRY) == []
