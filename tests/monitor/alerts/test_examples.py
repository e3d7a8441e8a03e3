"""The ready example query of a notification runs on a real store and shows each example's statements beside their
verdicts, so a surprising score is explained in one look."""

from __future__ import annotations

from datetime import timedelta

from monitor.alerts.queries import examples_sql
from monitor.alerts.windows import windows_for
from monitor.store.connection import ClickHouseStore
from tests.monitor.alerts.conftest import T0, default_rules, insert, make_row


def test_the_examples_query_returns_the_statements_with_their_verdicts(store: ClickHouseStore) -> None:
    """relevancy_drop's examples list n_statements and (statement, verdict) pairs, worst score first."""
    now = T0 + timedelta(hours=1)
    insert(
        store,
        [
            make_row(
                now - timedelta(minutes=10),
                score=0.2,
                statements=["Paris is in France.", "Buy shoes."],
                verdicts=["yes", "no"],
            ),
            make_row(now - timedelta(minutes=12), score=0.9, statements=["Paris is the capital."], verdicts=["yes"]),
        ],
    )
    [rule] = default_rules("relevancy_drop").rules
    segment = (("app", "support"), ("prompt_version", "v1"), ("judge_id", "j1"))
    result = store.query(examples_sql(rule, segment, windows_for(rule, now), store.database, store.table))
    n, pairs = result.columns.index("n_statements"), result.columns.index("statement_verdicts")
    assert [(r[n], [tuple(p) for p in r[pairs]]) for r in result.rows] == [
        (2, [("Paris is in France.", "yes"), ("Buy shoes.", "no")]),
        (1, [("Paris is the capital.", "yes")]),
    ]
