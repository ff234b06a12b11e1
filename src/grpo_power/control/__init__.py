"""Control: the observation/action contract between a run and its controller, and controllers.

The same contract serves real runs (the workload's controller hook) and, later, the simulator's
gymnasium environment, so a policy trained in simulation runs unchanged on a real run.
"""
