"""Calibration: how far a judge agrees with human relevancy labels (or with another judge).

`labels` reads a labelled set, `agreement` holds the pure statistics, `run` judges the pairs under the service's
flow limits."""
