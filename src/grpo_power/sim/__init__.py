"""Physics only: the A100 power model (``power_model``), the GRPO step simulator of the study's
deployments (``grpo_sim``) and its calibration (``calibration``). Imports nothing else of
grpo_power but ``config``; everything it produces is simulated."""
