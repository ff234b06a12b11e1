"""Physics only: models of GPU power and (later) GRPO steps and fleets. Imports nothing else of
grpo_power but ``config``."""
