"""The service runtime: everything that runs while the monitor consumes. `service` builds the collaborators from
settings and `pipeline` coordinates them (consume, handle a batch, commit); the rest are its parts, each with one job.
The judging guards it shares with replay, canaries and calibration are in `monitor.judging`; the store in
`monitor.store`.

It never imports the command line or the dev tools (an import contract in pyproject.toml)."""
