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
    # Lazily: executors never check regions. Straight from botocore's data files, not through a session, which
    # would read the AWS config files (and fail on an AWS_PROFILE they lack: not this check's business).
    from botocore.loaders import create_loader
    from botocore.regions import EndpointResolver

    resolver = EndpointResolver(create_loader().load_data("endpoints"))
    return frozenset(
        region
        for partition in resolver.get_available_partitions()
        for region in resolver.get_available_endpoints(service, partition_name=partition)
    )


def unknown_region_problem(region: str, service: str = "kinesis") -> str | None:
    """None when botocore knows ``region`` for ``service``; else why not, with the closest known region."""
    regions = known_regions(service)
    if region in regions:
        return None
    close = difflib.get_close_matches(region, sorted(regions), n=2, cutoff=0.6)
    hint = f" (did you mean {' or '.join(map(repr, close))}?)" if close else ""
    return f"{region!r} is not a region where AWS has {service}{hint}"
