"""The review queue and the labels: what reviewers are asked to label, their labels, and the judge against them."""
