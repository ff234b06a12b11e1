"""Speed and memory benchmarks, run with `make bench` (or `python -m benchmarks [NAME...]`)."""
