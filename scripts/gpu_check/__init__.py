"""The GPU check (scripts/cuda_check.py): what a lent GPU machine runs, outside the runtime package."""
