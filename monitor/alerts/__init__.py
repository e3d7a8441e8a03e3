"""Alerting on relevancy drops: rules, evaluation against ClickHouse, alert state, notifiers, backtests.

Modules, bottom up:

- `windows`: a rule's windows and the per-segment data types (pure, no SQL)
- `stats`: the one-sided statistical tests
- `observations`: a metric's value, baseline and p-values for one segment
- `metric_specs`: one `MetricSpec` per metric (direction, tests, columns, keys), the `SPECS` registry
- `rules`: the YAML rules (pydantic)
- `evaluator`: verdicts and state transitions (pure)
- `queries`: the SQL of a rule's windows, and fetching it
- `baselines`: a new prompt version's or model's baseline borrowed from its parent's earlier history (pure)
- `rollouts`: the newest version against the one before it, for rollout rules (pure)
- `state`: alert state and the lease in ClickHouse
- `notifiers`: webhook, Slack and Alertmanager
- `prometheus`: the evaluator's own Prometheus metrics
- `engine`: one evaluation round, and `AlertRunner` (evaluate, notify, save)
- `backtest`: replaying rules over stored history

The command line is `monitor.cli.alerts` (`relevancy-monitor alerts ...`)."""
