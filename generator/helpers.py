"""The helpers a template can call: ``random.*``, ``date.*`` and faker.js-style names backed by ``Faker``.

Who calls it: ``kinesis_generator.template`` compiles each ``{{module.method(args)}}`` placeholder by looking its name
up here. A helper is a *factory*: it gets the parsed arguments once, at compile time (so bad arguments fail before
anything is sent), and returns a zero-argument function that renders one value. All randomness goes through
one ``Context`` (a ``random.Random`` and a ``Faker``) so that ``--seed`` makes the output reproducible.
"""

from __future__ import annotations

import bisect
import itertools
import json
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from random import Random
from typing import Any

from faker import Faker

from kinesis_generator.dates import DEFAULT_FORMAT, compile_format

Render = Callable[[], Any]
Factory = Callable[["Context", Any], Render]
NO_ARGS = object()  # a placeholder written without parentheses, e.g. {{random.uuid}}


@dataclass
class Context:
    """The random sources shared by every helper of a run; ``seed`` makes them reproducible."""

    seed: int | None = None
    rng: Random = field(init=False)
    faker: Faker = field(init=False)

    def __post_init__(self) -> None:
        self.rng = Random(self.seed)
        self.faker = Faker()
        if self.seed is not None:
            self.faker.seed_instance(self.seed)


class HelperArgumentError(ValueError):
    """Arguments a helper cannot use; the template compiler adds the placeholder's position."""


# --- random.* ----------------------------------------------------------------------------------------------


def _number(ctx: Context, args: Any) -> Render:
    """random.number(max) -> 0..max; random.number({"min", "max", "precision"}) as faker.js (0, 99999, 1)."""
    if args is NO_ARGS or args is None:
        args = {}
    if isinstance(args, bool) or not isinstance(args, int | float | dict):
        raise HelperArgumentError(f"expects a number or {{'min':..,'max':..,'precision':..}}, got {args!r}")
    spec = {"max": args} if not isinstance(args, dict) else args
    unknown = set(spec) - {"min", "max", "precision"}
    if unknown:
        raise HelperArgumentError(f"unknown keys {sorted(unknown)}; allowed: min, max, precision")
    low, high, precision = spec.get("min", 0), spec.get("max", 99999), spec.get("precision", 1)
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in (low, high, precision)):
        raise HelperArgumentError(f"min, max and precision must be numbers, got {spec!r}")
    if high < low or precision <= 0:
        raise HelperArgumentError(f"needs min <= max and precision > 0, got min={low} max={high} precision={precision}")
    rand = ctx.rng.random
    if precision == 1 and isinstance(low, int) and isinstance(high, int):
        span = high - low + 1
        return lambda: low + int(rand() * span)
    # faker.js: floor(rand * (max/p - min/p + 1) + min/p) * p, shown with the precision's decimals.
    steps_low, steps = low / precision, int(high / precision - low / precision) + 1
    decimals = max(0, -int(f"{precision:e}".split("e")[1]))
    if decimals == 0:
        return lambda: int((int(rand() * steps) + steps_low) * precision)
    return lambda: round((int(rand() * steps) + steps_low) * precision, decimals)


def _array_element(ctx: Context, args: Any) -> Render:
    if not isinstance(args, list) or not args:
        raise HelperArgumentError(f"expects a non-empty JSON array, got {args!r}")
    elements = _as_text(args)
    return lambda: ctx.rng.choice(elements)


def _weighted_array_element(ctx: Context, args: Any) -> Render:
    if not isinstance(args, dict) or set(args) != {"weights", "data"}:
        raise HelperArgumentError(f'expects {{"weights": [...], "data": [...]}}, got {args!r}')
    weights, data = args["weights"], args["data"]
    valid = isinstance(weights, list) and isinstance(data, list) and len(weights) == len(data) > 0
    if not valid or not all(isinstance(w, int | float) and w >= 0 for w in weights) or sum(weights) <= 0:
        raise HelperArgumentError(
            "weights and data must be arrays of the same non-zero length, weights >= 0 with a positive sum; "
            f"got {args!r}"
        )
    data = _as_text(data)
    cumulative = list(itertools.accumulate(weights))
    total, rand = cumulative[-1], ctx.rng.random
    return lambda: data[bisect.bisect_right(cumulative, rand() * total)]


def _as_text(values: list[Any]) -> list[str]:
    """Elements as they appear in the record: strings as is, anything else as JSON (true, not Python's True)."""
    return [value if isinstance(value, str) else json.dumps(value) for value in values]


def _uuid(ctx: Context, args: Any) -> Render:
    _no_args(args)
    bits = ctx.rng.getrandbits
    return lambda: str(uuid.UUID(int=bits(128), version=4))


def _boolean(ctx: Context, args: Any) -> Render:
    _no_args(args)
    return lambda: "true" if ctx.rng.random() < 0.5 else "false"


def _alpha_numeric(ctx: Context, args: Any) -> Render:
    length = 1 if args is NO_ARGS else args
    if isinstance(length, bool) or not isinstance(length, int) or length < 1:
        raise HelperArgumentError(f"expects a length >= 1, got {args!r}")
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
    return lambda: "".join(ctx.rng.choices(alphabet, k=length))


def _no_args(args: Any) -> None:
    if args is not NO_ARGS:
        raise HelperArgumentError(f"takes no arguments, got {args!r}")


# --- date.* ------------------------------------------------------------------------------------------------


def _date(utc: bool) -> Factory:
    """date.now(format) in local time, date.utc(format) in UTC; cached per second when the format allows."""

    def factory(ctx: Context, args: Any) -> Render:
        fmt = DEFAULT_FORMAT if args is NO_ARGS else args
        if not isinstance(fmt, str):
            raise HelperArgumentError(f'expects a moment.js format string such as "YYYY-MM-DD HH:mm:ss", got {args!r}')
        formatter, sub_second = compile_format(fmt)

        def now() -> str:
            return formatter(datetime.now(UTC) if utc else datetime.now().astimezone())

        if sub_second:
            return now
        cache = [-1, ""]

        def per_second() -> str:
            second = int(time.time())
            if second != cache[0]:
                cache[0], cache[1] = second, now()
            return cache[1]

        return per_second

    return factory


def _date_timestamp(ctx: Context, args: Any) -> Render:
    _no_args(args)
    return lambda: str(int(time.time() * 1000))


# --- faker.js names on Python's Faker ------------------------------------------------------------------------

# faker.js (the KDG's library) name -> Python Faker method, where the snake_case name is not the answer.
FAKER_JS_NAMES: dict[str, str] = {
    "name.firstName": "first_name",
    "name.lastName": "last_name",
    "name.findName": "name",
    "name.fullName": "name",
    "name.jobTitle": "job",
    "name.prefix": "prefix",
    "name.suffix": "suffix",
    "address.city": "city",
    "address.streetAddress": "street_address",
    "address.streetName": "street_name",
    "address.zipCode": "postcode",
    "address.state": "state",
    "address.stateAbbr": "state_abbr",
    "address.country": "country",
    "address.countryCode": "country_code",
    "address.latitude": "latitude",
    "address.longitude": "longitude",
    "internet.email": "email",
    "internet.userName": "user_name",
    "internet.url": "url",
    "internet.domainName": "domain_name",
    "internet.ip": "ipv4",
    "internet.ipv6": "ipv6",
    "internet.mac": "mac_address",
    "internet.userAgent": "user_agent",
    "internet.password": "password",
    "lorem.word": "word",
    "lorem.sentence": "sentence",
    "lorem.paragraph": "paragraph",
    "lorem.text": "text",
    "company.companyName": "company",
    "company.catchPhrase": "catch_phrase",
    "phone.phoneNumber": "phone_number",
    "finance.currencyCode": "currency_code",
    "finance.iban": "iban",
    "commerce.color": "color_name",
    "commerce.department": "",  # built in below: Python Faker has no commerce provider
    "commerce.productName": "",
    "commerce.price": "",
    "lorem.words": "",
    "finance.amount": "",
}
_DEPARTMENTS = ["Books", "Electronics", "Garden", "Grocery", "Health", "Home", "Kids", "Music", "Sports", "Toys"]
_ADJECTIVES = ["Small", "Ergonomic", "Rustic", "Intelligent", "Gorgeous", "Incredible", "Practical", "Sleek"]
_MATERIALS = ["Steel", "Wooden", "Concrete", "Plastic", "Cotton", "Granite", "Rubber", "Fresh", "Frozen"]
_PRODUCTS = ["Chair", "Car", "Computer", "Keyboard", "Mouse", "Bike", "Ball", "Gloves", "Pants", "Shirt", "Table"]


def _faker_method(method: str) -> Factory:
    """A Faker provider method; JSON args become positional (array), keyword (object) or one positional arg."""

    def factory(ctx: Context, args: Any) -> Render:
        fn = getattr(ctx.faker, method)
        if args is NO_ARGS:
            return fn
        if isinstance(args, list):
            return lambda: fn(*args)
        if isinstance(args, dict):
            return lambda: fn(**args)
        return lambda: fn(args)

    return factory


def _lorem_words(ctx: Context, args: Any) -> Render:
    count = 3 if args is NO_ARGS else args
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise HelperArgumentError(f"expects a word count >= 1, got {args!r}")
    return lambda: " ".join(ctx.faker.words(count))


def _price(ctx: Context, args: Any) -> Render:
    """commerce.price(min, max) as faker.js: a string with two decimals (args: [min, max] or {"min", "max"})."""
    low, high = 1, 1000
    if isinstance(args, list) and len(args) >= 1:
        low, high = [*args, high][:2]
    elif isinstance(args, dict):
        low, high = args.get("min", low), args.get("max", high)
    elif isinstance(args, int | float) and not isinstance(args, bool):
        low = args
    elif args is not NO_ARGS:
        raise HelperArgumentError(f"expects [min, max] or {{'min':..,'max':..}}, got {args!r}")
    if not (isinstance(low, int | float) and isinstance(high, int | float) and low <= high):
        raise HelperArgumentError(f"needs numbers min <= max, got min={low!r} max={high!r}")
    return lambda: f"{ctx.rng.uniform(low, high):.2f}"


def _choice_of(words: list[list[str]]) -> Factory:
    def factory(ctx: Context, args: Any) -> Render:
        _no_args(args)
        return lambda: " ".join(ctx.rng.choice(group) for group in words)

    return factory


HELPERS: dict[str, Factory] = {
    "random.number": _number,
    "random.arrayElement": _array_element,
    "random.weightedArrayElement": _weighted_array_element,
    "random.uuid": _uuid,
    "random.boolean": _boolean,
    "random.alphaNumeric": _alpha_numeric,
    "date.now": _date(utc=False),
    "date.utc": _date(utc=True),
    "date.timestamp": _date_timestamp,
    "lorem.words": _lorem_words,
    "commerce.price": _price,
    "commerce.department": _choice_of([_DEPARTMENTS]),
    "commerce.productName": _choice_of([_ADJECTIVES, _MATERIALS, _PRODUCTS]),
    "finance.amount": _price,
    **{name: _faker_method(method) for name, method in FAKER_JS_NAMES.items() if method},
}


def _snake_case(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def lookup(name: str, ctx: Context) -> Factory | None:
    """The factory for ``module.method``: a known helper, ``faker.<any Faker method>``, or a faker.js module
    method whose snake_case name Faker has (``internet.ipv4``, ``address.buildingNumber``); else None."""
    if name in HELPERS:
        return HELPERS[name]
    module, _, method = name.partition(".")
    if module == "faker" and method and not method.startswith("_") and callable(getattr(ctx.faker, method, None)):
        return _faker_method(method)
    if module in FAKER_MODULES and callable(getattr(ctx.faker, _snake_case(method), None)):
        return _faker_method(_snake_case(method))
    return None


FAKER_MODULES = frozenset(name.partition(".")[0] for name in FAKER_JS_NAMES)


def known_helpers() -> list[str]:
    """Every helper name for error messages, plus the generic Faker forms."""
    return [*sorted(HELPERS), "faker.<any Faker method>", "<faker.js module>.<camelCase Faker method>"]
