"""The service runtime: everything that runs while the monitor consumes. `service` builds the collaborators from
settings and `pipeline` coordinates them (consume, handle, commit); the rest are its parts, each with one job.

It never imports the command line or the dev tools (checked by `tests/test_layers.py`)."""
