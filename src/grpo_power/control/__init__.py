"""Control: the observation/action contract between a run and its controller, and controllers.

The same contract serves real runs (the workload's controller hook) and the simulator's
gymnasium environment (``env``), so the PPO meta-controller trained in simulation (``ppo``) runs
unchanged on a real run. ``oracle`` is the simulator-only limit; ``rollout`` runs every arm in
the simulator for the evaluate stage. Control uses ``sim``; ``sim`` never uses control.
"""
