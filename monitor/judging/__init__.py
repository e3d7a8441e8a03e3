"""Judging: the guards every caller that judges goes through, live, replay, canary and calibration alike.

- `guarded_judge`: one judge behind the circuit breaker, adaptive concurrency and the client-side rate limit
  (`flow`), with a timeout and deferral; `shadow` decides what a second judge sees.
- `cost_control` and `budget`: the spend caps and freshness factor the sampler multiplies by, synced across replicas
  through the store; `traffic_counts` counts what was consumed and sampled per segment.
- `verdict_reuse`: one call for concurrent duplicates and a cache of recent verdicts.
- `metrics`: what these export.
- `settings`: their settings slices (flow, budget, shadow), which `monitor.config` composes.

It never imports the runtime, replay or the command line (an import contract in pyproject.toml)."""
