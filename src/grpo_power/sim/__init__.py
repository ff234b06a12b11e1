"""Physics only; everything it produces is simulated.

    power_model   the A100 power model: power against occupancy, phase and power limit
    defaults      every default parameter with its range and published source
    calibration   a calibration: the parameters in use, its file, its checks against a config
    fit           identify's fit of the parameters from measured step logs and traces
    step_model    one GRPO step: its phases, durations and power; closed-form expected rates
    grpo_sim      runs of steps with NVML-like telemetry; the authority sweeps

Imports nothing of grpo-power but ``config``, ``stats``, ``layout`` and ``atomic``.
"""
