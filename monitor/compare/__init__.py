"""Comparing two judges on the events both scored (a primary and its shadow, say): `agreement` holds the pure
statistics, `queries` reads the shared events from the store. `relevancy-monitor compare` prints them."""
