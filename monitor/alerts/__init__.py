"""Alerting on relevancy drops: rules, evaluation against ClickHouse, alert state, notifiers, backtests.

Modules: `rules` (YAML rules), `queries` (window SQL), `stats` (tests), `metrics` (values + tests per
segment), `evaluator` (state transitions), `state` (ClickHouse state and lease), `notifiers`, `engine`
(one evaluation round), `backtest`, `cli` (`relevancy-monitor alerts ...`)."""
