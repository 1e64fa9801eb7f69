"""When a model *retrieves*: an effect size, not only a significant difference (lessons 09-11, 13).

A significance test alone calls a model at 0.38 against a null of 0.34 "retrieving" once enough queries are scored;
that model copies, with a small edge. The course's criterion asks for a size as well, declared before any run:

    retrieves   accuracy − null ≥ MARGIN_SHARE · (1 − null), with the whole 95% interval (clustered by example) at
                or above that margin, where null is the best key-free rule on the same queries (diffattn.data.nulls);
                and, where a rule that finds the key but ignores which binding came last scores below 1 (any_binding
                on `rebind`: 1/2 on a rebound key), the whole interval of accuracy − that rule above 0 as well

With MARGIN_SHARE = 1/2 a model must close at least half the distance from the null to a perfect score. A null of 1
(one record, one query) leaves no room: nothing retrieves there, by construction.
"""

from __future__ import annotations

from typing import Sequence

from diffattn.data import nulls
from diffattn.core.stats import clustered_difference

MARGIN_SHARE = 0.5


def margin(null: float) -> float:
    """The smallest accuracy − null that counts as retrieval on queries whose best key-free null is `null`."""
    return MARGIN_SHARE * (1.0 - null)


def verdict(flags: Sequence[float], rules: dict[str, Sequence[float]], clusters: Sequence) -> dict:
    """The criterion on one set of scored queries: flags (1/0 answered), every null rule's probability per query
    (diffattn.data.nulls.query_nulls) and each query's example. Returns the margin, both paired tests and
    `retrieves`."""
    flags = [float(f) for f in flags]
    best = nulls.best_key_free(rules)
    null = sum(rules[best]) / len(rules[best])
    need = margin(null)
    vs_null = clustered_difference(flags, rules[best], clusters)
    order_blind = sum(rules["any_binding"]) / len(rules["any_binding"])
    vs_order = clustered_difference(flags, rules["any_binding"], clusters) if order_blind < 1 else None
    retrieves = need > 0 and vs_null["ci95"][0] >= need and (vs_order is None or vs_order["above"])
    return {"null_rule": best, "null_best": null, "margin": need, "vs_null": vs_null,
            "order_blind": order_blind, "vs_order_blind": vs_order, "retrieves": retrieves}
