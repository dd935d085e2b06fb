"""Evaluation: question streams, the virtual-clock benchmark, reports."""
