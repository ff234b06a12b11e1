"""The real GRPO workload whose power is measured: the TRL runner (``runner``) and its trainer
subclass with the occupancy actuator (``trainer``), the actuators (``actuators``), the arms as
controllers (``arms``), the controller callback (``hook``) and its fail-safe (``failsafe``),
model presets (``models``), the task and rewards (``task``), checkpoints and resume
(``resume``), the run lock (``lock``), the manifest (``manifest``), the fixed-safe calibration
(``fixed_safe``), the real-workload sweep (``sweep``), multi-process runs (``distributed``) and
the phase-loop demo (``demo``)."""
