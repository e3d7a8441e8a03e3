"""The Kafka side of relevancy-monitor: consuming, decoding, sampling, offsets and dead-lettering.

Imports `schemas` only.
"""
