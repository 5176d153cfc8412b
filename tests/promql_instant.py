"""An instant-query evaluator for the PromQL the alert rules use, over a handful of samples, so a
test can say which series a rule returns (it fires on them once `for` has passed). It walks the
syntax tree `promql_parser` builds and knows only what the rules need: selectors, `max`/`sum`/
`count` by labels, `label_replace`, arithmetic and comparison between vectors and numbers with
one-to-one matching, and `and`/`or`/`unless` with `on`; anything else raises, so a rule that
outgrows it fails its test instead of passing unread. Semantics from the Prometheus docs
("Operators", "Functions": label_replace's regex is anchored, a comparison filters)."""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import promql_parser

Labels = tuple[tuple[str, str], ...]
Vector = dict[Labels, float]
NAME = "__name__"


def series(name: str, value: float, **labels: str) -> tuple[Labels, float]:
    """One sample: its metric name, labels and value."""
    return tuple(sorted({NAME: name, **labels}.items())), value


def evaluate(expr: str, samples: Sequence[tuple[Labels, float]]) -> list[dict[str, str]]:
    """The label sets `expr` returns at the samples' instant."""
    result = _eval(promql_parser.parse(expr), dict(samples))
    if not isinstance(result, dict):
        raise TypeError(f"{expr} is a scalar, not a vector")
    return sorted((dict(labels) for labels in result), key=lambda found: sorted(found.items()))


def _matches(labels: Mapping[str, str], matcher: Any) -> bool:
    value, op, wanted = labels.get(matcher.name, ""), str(matcher.op), str(matcher.value)
    if op == "MatchOp.Equal":
        return value == wanted
    if op == "MatchOp.NotEqual":
        return value != wanted
    found = re.fullmatch(wanted, value) is not None
    if op == "MatchOp.Re":
        return found
    if op == "MatchOp.NotRe":
        return not found
    raise NotImplementedError(op)


def _key(labels: Labels, on: Sequence[str] | None) -> Labels:
    if on is None:
        return tuple((k, v) for k, v in labels if k != NAME)
    return tuple((k, v) for k, v in labels if k in on)


ARITHMETIC: dict[str, Callable[[float, float], float]] = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
}  # fmt: skip
AGGREGATIONS: dict[str, Callable[[list[float]], float]] = {
    "max": lambda values: max(values), "sum": lambda values: float(sum(values)),
    "count": lambda values: float(len(values)),
}  # fmt: skip
COMPARISON: dict[str, Callable[[float, float], bool]] = {
    ">": operator.gt, "<": operator.lt, ">=": operator.ge, "<=": operator.le,
    "==": operator.eq, "!=": operator.ne,
}  # fmt: skip


def _eval(node: Any, samples: Vector) -> Vector | float:
    kind = type(node).__name__
    if kind == "NumberLiteral":
        return float(node.val)
    if kind == "ParenExpr":
        return _eval(node.expr, samples)
    if kind == "VectorSelector":
        found = {}
        for labels, value in samples.items():
            named = dict(labels)
            if node.name and named[NAME] != node.name:
                continue
            if all(_matches(named, m) for m in node.matchers.matchers):
                found[labels] = value
        return found
    if kind == "AggregateExpr":
        inner = _eval(node.expr, samples)
        assert isinstance(inner, dict) and str(node.modifier.type) == "AggModifierType.By"
        groups: dict[Labels, list[float]] = {}
        for labels, value in inner.items():
            groups.setdefault(_key(labels, list(node.modifier.labels)), []).append(value)
        reduce = AGGREGATIONS[str(node.op)]
        return {group: reduce(values) for group, values in groups.items()}
    if kind == "Call" and node.func.name == "label_replace":
        inner = _eval(node.args[0], samples)
        assert isinstance(inner, dict)
        target, replacement, source, regex = (a.val for a in node.args[1:])
        out = {}
        for labels, value in inner.items():
            named = dict(labels)
            match = re.fullmatch(regex, named.get(source, ""))
            if match is not None:
                named[target] = match.expand(replacement.replace("$", "\\"))
            out[tuple(sorted(named.items()))] = value
        return out
    if kind == "BinaryExpr":
        return _binary(node, _eval(node.lhs, samples), _eval(node.rhs, samples))
    raise NotImplementedError(f"{kind}: {node}")


def _binary(node: Any, lhs: Vector | float, rhs: Vector | float) -> Vector | float:
    op = str(node.op)
    matching = node.modifier.matching if node.modifier is not None else None
    on = list(matching.labels) if matching is not None else None
    if op in ("and", "or", "unless"):
        assert isinstance(lhs, dict) and isinstance(rhs, dict)
        keys = {_key(labels, on) for labels in rhs}
        if op == "and":
            return {k: v for k, v in lhs.items() if _key(k, on) in keys}
        if op == "unless":
            return {k: v for k, v in lhs.items() if _key(k, on) not in keys}
        left = {_key(labels, on) for labels in lhs}
        return {**lhs, **{k: v for k, v in rhs.items() if _key(k, on) not in left}}
    apply = ARITHMETIC.get(op) or COMPARISON.get(op)
    if apply is None:
        raise NotImplementedError(op)
    if isinstance(lhs, float) and isinstance(rhs, float):
        return float(apply(lhs, rhs))
    if isinstance(rhs, float) and isinstance(lhs, dict):
        pairs = [(k, v, rhs) for k, v in lhs.items()]
    elif isinstance(lhs, float) and isinstance(rhs, dict):
        pairs = [(k, lhs, v) for k, v in rhs.items()]
    else:
        assert isinstance(lhs, dict) and isinstance(rhs, dict)
        right = {_key(k, on): v for k, v in rhs.items()}
        pairs = [(k, v, right[_key(k, on)]) for k, v in lhs.items() if _key(k, on) in right]
    out = {}
    for labels, a, b in pairs:
        kept = _key(labels, None)
        if op in COMPARISON:
            if apply(a, b):
                out[kept] = a
        else:
            out[kept] = float(apply(a, b))
    return out
