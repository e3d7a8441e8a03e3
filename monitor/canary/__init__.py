"""Canaries: the alert evaluator re-scores a labelled set (the shipped golden set, or ALERTS_CANARY_FILE) with the live
judge on a schedule, so that a relevancy drop can be told apart from a judge that drifted (a provider model update,
a prompt edit): the product got worse when live scores fall while the canaries hold, the judge moved when they move.

Modules, bottom up:

- `model`: a run's figures and what a round did (plain data; the alert engine names these)
- `figures`: a run's Spearman ρ, quadratic-weighted κ, mean shift and error rate (pure, the calibration's statistics)
- `schedule`: when the next run is due (pure)
- `run`: one run, every pair judged concurrently through the service's flow limits, within a deadline
- `table`: the `canary_runs` table and a run as its rows (pure)
- `service`: `Canary`, what `alerts run` ticks each round: write a finished run, start the next when due

The rules over the table are the alert engine's (`canary_*` metrics in `monitor.alerts.metric_specs`)."""
