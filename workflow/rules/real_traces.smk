# The simulator against real traces: measured inference runs (an nvidia-smi power.csv beside the
# engine's engine.csv each), imported with per-sample concurrency, the decode power model fitted
# and validated on held-out runs, and every run's windowed exceedance (docs: calibration). Only
# when the config sets real_traces.folder; the report's section reads what it writes.


rule real_traces:
    input:
        real_trace_logs(),
    output:
        **real_trace_outputs(),
        traces=directory(LAYOUT.real_traces / REAL_TRACES.traces),
    log:
        LAYOUT.logs / "real_traces.log",
    params:
        real_traces=section_settings(CFG, "real_traces"),
        gpu=section_settings(CFG, "gpu"),
        cap_w=CFG.cap_w,
        windows=section_settings(CFG, "windows"),
        out=LAYOUT.real_traces,
    conda:
        "../../envs/analysis.yaml"
    threads: 1
    resources:
        **analysis_resources(),
    shell:
        "python -m grpo_power.cli real-traces --out {params.out:q} "
        "--config {RESOLVED_CONFIG:q} > {log:q} 2>&1"
