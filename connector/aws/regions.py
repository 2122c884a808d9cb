"""Is a region one AWS has? Checked against botocore's partition data, so that a misspelled region fails at once.

Who calls it: ``ClientSettings.from_options`` for ``kinesis.region`` and ``kinesis.kinesisRegion`` (unless
``kinesis.allowUnknownRegion`` is true or the endpoint is a loopback one), and every command line for ``--region``
(``unknown_region_line``: the consumers' command, the load generator, the submitters), in one wording.
"""

from __future__ import annotations

from functools import lru_cache

from ..cli import did_you_mean


@lru_cache(maxsize=4)
def known_regions(service: str = "kinesis") -> frozenset[str]:
    """Every region botocore's partition data lists for ``service``, in every partition (aws, aws-cn, ...); loaded
    once per process, on the driver only."""
    # From botocore's data files, not a session: a session reads the AWS config files (and fails on a missing profile).
    from botocore.exceptions import DataNotFoundError
    from botocore.loaders import create_loader
    from botocore.regions import EndpointResolver

    loader = create_loader()
    resolver = EndpointResolver(loader.load_data("endpoints"))

    def regions(prefix: str) -> frozenset[str]:
        return frozenset(
            region
            for partition in resolver.get_available_partitions()
            for region in resolver.get_available_endpoints(prefix, partition_name=partition)
        )

    found = regions(service)
    if not found:  # the endpoints are listed by the service's endpoint prefix: "emr" is "elasticmapreduce"
        try:
            prefix = loader.load_service_model(service, "service-2")["metadata"].get("endpointPrefix", service)
        except DataNotFoundError:  # not a service of this botocore
            return found
        found = regions(prefix)
    return found


def unknown_region_problem(region: str, service: str = "kinesis") -> str | None:
    """None when botocore knows ``region`` for ``service``; else why not, with the closest known region."""
    problem = _not_known(region, service)
    return problem and f"{region!r} is {problem}"


def unknown_region_line(
    region: str, *, flag: str = "--region", service: str = "kinesis", newer: str = "add --allow-unknown-region"
) -> str | None:
    """None when botocore knows ``region`` for ``service``; else the line every command line prints for it:
    ``--region 'eu-wset-1': not a region where AWS has emr (did you mean 'eu-west-1'?); for a region newer than
    this botocore, add --allow-unknown-region``. ``newer`` is how that command reaches a region botocore lacks."""
    problem = _not_known(region, service)
    return problem and f"{flag} {region!r}: {problem}; for a region newer than this botocore, {newer}"


def _not_known(region: str, service: str) -> str | None:
    regions = known_regions(service)
    if region in regions:
        return None
    hint = did_you_mean(region, regions)
    return f"not a region where AWS has {service}" + (f" ({hint})" if hint else "")
