"""Power telemetry: sources (NVML, simulated A100), the background sampler, the trace store,
importers of nvidia-smi / DCGM logs, the one trace check, trace summaries, and the step log a
run writes beside its trace (``steplog``).

A *source* reads one sample per GPU; a :class:`~grpo_power.telemetry.sampler.PowerSampler` calls
it every ``period_s`` in a background thread and hands rows to a
:class:`~grpo_power.telemetry.store.TraceWriter`, which makes them durable every ``flush_s``.
"""
