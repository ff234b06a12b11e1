"""Workloads whose power is measured: the demo phase loop (and, later, the TRL GRPO runner)."""
