"""``pyspark_aws_kinesis.aws.regions``: a region is checked against botocore's partition data, with the closest
known region for a misspelled one, in the one line every command line prints."""

from __future__ import annotations

from pyspark_aws_kinesis.aws.regions import known_regions, unknown_region_line, unknown_region_problem


def test_the_regions_of_every_partition_are_known() -> None:
    regions = known_regions()
    assert {"us-east-1", "eu-west-1", "cn-north-1"} <= regions
    assert "eu-wset-1" not in regions


def test_a_service_is_found_by_its_endpoint_prefix_and_an_unknown_one_has_no_regions() -> None:
    assert "eu-west-1" in known_regions("emr")  # listed under its endpoint prefix, "elasticmapreduce"
    assert known_regions("no-such-service") == frozenset()


def test_a_known_region_has_no_problem() -> None:
    assert unknown_region_problem("eu-west-1") is None
    assert unknown_region_line("eu-west-1") is None


def test_a_misspelled_region_names_the_closest_one_first() -> None:
    problem = unknown_region_problem("eu-centrall-1")
    # What else it suggests depends on the regions this botocore knows.
    assert problem is not None and problem.startswith(
        "'eu-centrall-1' is not a region where AWS has kinesis (did you mean 'eu-central-1'"
    )


def test_the_line_names_the_flag_the_service_and_how_to_reach_a_newer_region() -> None:
    line = unknown_region_line("eu-centrall-1", flag="--emr-region", service="emr", newer="pass --allow-new")
    assert line is not None
    assert line.startswith("--emr-region 'eu-centrall-1': not a region where AWS has emr (did you mean 'eu-central-1'")
    assert line.endswith("?); for a region newer than this botocore, pass --allow-new")


def test_a_region_unlike_any_other_gets_no_suggestion() -> None:
    assert unknown_region_problem("qqqqqqqqqqqqqqqq") == "'qqqqqqqqqqqqqqqq' is not a region where AWS has kinesis"
