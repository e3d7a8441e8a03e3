"""Alerting on relevancy drops: rules, evaluation against ClickHouse, alert state, notifiers, backtests.

Modules, bottom up:

- `windows`: a rule's windows and the per-segment data types (pure, no SQL)
- `stats`: the one-sided statistical tests
- `observations`: a metric's value, baseline and p-values for one segment
- `metric_specs`: one `MetricSpec` per metric (direction, tests, columns, keys), the `SPECS` registry
- `rules`: the YAML rules (pydantic)
- `budget`: the level a rule's test decides at, derived from its share of the false-alarm budget (pure)
- `outcomes`: why a rule or segment made no decision, as data and in plain words (pure)
- `evaluator`: verdicts and state transitions (pure)
- `history`: a backtest's per-bucket history of a rule and a step's windows summed from it (pure)
- `queries`: the SQL of a rule's windows (and of its history), and fetching it
- `sources`: where an evaluation gets its data: the store per query, or a history read ahead
- `baselines`: a new prompt version's or model's baseline borrowed from its parent's earlier history (pure)
- `rollouts`: the newest version against the one before it, for rollout rules (pure)
- `state`: alert state and the lease in ClickHouse
- `poster`: POSTing JSON over httpx2, retried with the one `Backoff` (awaited waits, Retry-After honoured)
- `notifiers`: webhook, Slack and Alertmanager
- `prometheus`: the evaluator's own Prometheus metrics
- `engine`: one evaluation round, and `AlertRunner` (evaluate, notify, save)
- `spending`: what a round's rules spend of the false-alarm budget, per rule and per severity
- `backtest`: replaying rules over stored history, from histories read once
- `service`: the evaluator's composition root: store, notifiers, canary and runner from settings slices

Canary metrics (`canary_*`) read the `canary_runs` table that the evaluator's canary writes (`monitor.canary`),
per judge and labelled set, through the same windows, state, notifications and backtests.

The command line is `monitor.cli.alerts` (`relevancy-monitor alerts ...`), which parses and prints only."""
