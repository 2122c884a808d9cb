"""``python -m pyspark_aws_kinesis.options > docs/options.md``: the options table (see ``docs``)."""

from .docs import render_markdown

if __name__ == "__main__":
    print(render_markdown(), end="")
