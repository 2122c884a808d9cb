"""Is a region one AWS has? Checked against botocore's partition data, so that a misspelled region fails at once
with a "did you mean" instead of after seconds of retries against a host that does not exist.

Who calls it: ``ClientSettings.from_options`` (at ``load()`` for the source, when the sink's settings are parsed)
for ``kinesis.region`` and ``kinesis.kinesisRegion``, unless ``kinesis.allowUnknownRegion`` is true or the
endpoint is a loopback one (local servers accept any region); the consumers' command line for ``--region``.
"""

from __future__ import annotations

import difflib
from functools import lru_cache


@lru_cache(maxsize=4)
def known_regions(service: str = "kinesis") -> frozenset[str]:
    """Every region botocore's partition data lists for ``service``, in every partition (aws, aws-cn, ...).
    Loading the data costs ~0.1 s once per process; only the driver calls this."""
    import botocore.session  # lazily: executors never check regions

    session = botocore.session.get_session()
    return frozenset(
        region
        for partition in session.get_available_partitions()
        for region in session.get_available_regions(service, partition_name=partition)
    )


def unknown_region_problem(region: str, service: str = "kinesis") -> str | None:
    """None when botocore knows ``region`` for ``service``; else why not, with the closest known region."""
    regions = known_regions(service)
    if region in regions:
        return None
    close = difflib.get_close_matches(region, sorted(regions), n=2, cutoff=0.6)
    hint = f" (did you mean {' or '.join(map(repr, close))}?)" if close else ""
    return f"{region!r} is not a region where AWS has {service}{hint}"
