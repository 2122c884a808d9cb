"""Templates without any server: the seed template, each helper, moment.js formats, error positions, seeding."""

from __future__ import annotations

import json
import re
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta, timezone

import pytest

from kinesis_generator import Template, TemplateError, seed_template
from kinesis_generator.dates import compile_format
from kinesis_generator.helpers import Context

SEED = (
    '{"id": {{random.number(100)}}, "data": "{{random.arrayElement(["Spain","Portugal","Finland","France"])}}", '
    '"date": "{{date.now("YYYY-MM-DD hh:mm:ss")}}"}'
)


def values(source: str, n: int = 2000, seed: int | None = 1) -> list[str]:
    template = Template(source, Context(seed))
    return [template.render() for _ in range(n)]


def test_seed_template_ships_exactly_and_renders_valid_json():
    assert seed_template() == SEED
    before = datetime.now().replace(microsecond=0)
    rows = [json.loads(text) for text in values(seed_template(), 500)]
    assert {row["data"] for row in rows} == {"Spain", "Portugal", "Finland", "France"}
    assert {row["id"] for row in rows} <= set(range(101)) and len({row["id"] for row in rows}) > 50
    for row in rows[:5]:
        assert re.fullmatch(r"\d{4}-\d\d-\d\d (0[1-9]|1[0-2]):[0-5]\d:[0-5]\d", row["date"])
        hour12 = datetime.strptime(row["date"], "%Y-%m-%d %I:%M:%S")
        # hh is the 12-hour clock: equal to now up to 12 hours, within a few seconds.
        delta = (hour12 - before.replace(hour=(before.hour % 12) or 12)) % timedelta(hours=12)
        assert delta < timedelta(seconds=5) or delta > timedelta(hours=12) - timedelta(seconds=5)


def test_random_number_bounds_and_precision():
    assert {int(v) for v in values("{{random.number(3)}}")} == {0, 1, 2, 3}
    assert {int(v) for v in values('{{random.number({"min": 5, "max": 7})}}')} == {5, 6, 7}
    decimals = values('{{random.number({"min": 1, "max": 2, "precision": 0.01})}}')
    assert all(1 <= float(v) <= 2 and len(v.partition(".")[2]) <= 2 for v in decimals)
    assert len(set(decimals)) > 50


def test_weighted_array_element_follows_weights():
    counts = Counter(values('{{random.weightedArrayElement({"weights": [0.8, 0.2, 0], "data": ["a", "b", "c"]})}}'))
    assert set(counts) == {"a", "b"}
    assert 0.74 < counts["a"] / 2000 < 0.86


def test_uuid_array_element_and_boolean():
    assert all(uuid.UUID(v).version == 4 for v in values("{{random.uuid}}", 50))
    mixed = set(values('{{random.arrayElement(["x", 2, true, null, {"a": 1}])}}'))
    assert mixed == {"x", "2", "true", "null", '{"a": 1}'}  # JSON, as the KDG renders them
    assert set(values("{{random.number(2.5)}}")) == {"0", "1", "2"}
    assert set(values("{{random.boolean}}")) == {"true", "false"}


def test_plain_string_arguments_without_quotes_or_json():
    assert re.fullmatch(r"\d{4}/\d\d", Template("{{date.utc(YYYY/MM)}}").render())


def test_moment_format_tokens():
    moment = datetime(2026, 3, 1, 13, 5, 9, 42_000, tzinfo=timezone(timedelta(hours=2)))
    formatter, sub_second = compile_format("YYYY-MM-DD hh:mm:ss A [at] H[h] Do MMMM ddd YY M/D SSS Z ZZ X")
    assert formatter(moment) == (
        "2026-03-01 01:05:09 PM at 13h 1st March Sun 26 3/1 042 +02:00 +0200 " + str(int(moment.timestamp()))
    )
    assert sub_second
    assert compile_format("HH:mm:ss")[1] is False


def test_date_utc_and_now_are_current():
    utc = datetime.strptime(Template('{{date.utc("YYYY-MM-DDTHH:mm:ss")}}').render(), "%Y-%m-%dT%H:%M:%S")
    assert abs(utc - datetime.now(UTC).replace(tzinfo=None)) < timedelta(seconds=5)
    local = datetime.strptime(Template('{{date.now("YYYY-MM-DD HH:mm")}}').render(), "%Y-%m-%d %H:%M")
    assert abs(local - datetime.now()) < timedelta(minutes=2)


def test_faker_helpers():
    text = Template(
        "{{name.firstName}}|{{address.city}}|{{internet.email}}|{{lorem.words(4)}}|{{commerce.productName}}|"
        "{{commerce.price([10, 20])}}|{{internet.ipv4}}|{{faker.iban}}|{{company.companyName}}",
        Context(3),
    ).render()
    first, city, email, words, product, price, ip, iban, company = text.split("|")
    assert first and city and company and iban[:2].isalpha()
    assert re.fullmatch(r"[^@\s]+@[^@\s]+", email)
    assert len(words.split()) == 4 and len(product.split()) == 3
    assert 10 <= float(price) <= 20 and re.fullmatch(r"\d+\.\d\d", price)
    assert re.fullmatch(r"\d+\.\d+\.\d+\.\d+", ip)


def test_seed_makes_output_reproducible():
    source = "{{name.fullName}} {{random.uuid}} {{random.number(1000)}} {{lorem.sentence}}"
    assert values(source, 20, seed=7) == values(source, 20, seed=7)
    assert values(source, 20, seed=7) != values(source, 20, seed=8)


def test_unknown_helper_reports_placeholder_line_column_and_helpers():
    with pytest.raises(TemplateError) as caught:
        Template('{\n  "a": 1,\n    "b": "{{random.numbr(5)}}"\n}')
    error = caught.value
    assert (error.line, error.column) == (3, 11)
    assert error.placeholder == "{{random.numbr(5)}}"
    message = str(error)
    assert "line 3, column 11" in message and "random.numbr" in message
    assert "random.number" in message and "date.now" in message  # the known helpers are listed


@pytest.mark.parametrize(
    ("source", "problem", "column"),
    [
        ('x {{random.number("many")}}', "expects a number", 3),
        ("ab{{random.number(3)", "expected '}}'", 3),
        ("{{random.arrayElement([1, 2)}}", "unbalanced", 1),
        ("  {{nodot}}", "expected module.method", 3),
        ('{{random.weightedArrayElement({"weights": [1], "data": []})}}', "same non-zero length", 1),
        ("{{faker.first_name(1, 2, 3)}}", "faker.first_name", 1),
    ],
)
def test_bad_placeholders_fail_at_compile_with_position(source: str, problem: str, column: int):
    with pytest.raises(TemplateError) as caught:
        Template(source)
    assert problem in str(caught.value)
    assert (caught.value.line, caught.value.column) == (1, column)


def test_json_with_braces_inside_arguments():
    assert Template('{{random.arrayElement(["}}", "{{"])}}', Context(1)).render() in {"}}", "{{"}
