# Windows: exceedance of the cap by averaging window, per GPU and per run, for one trace file.
# One job per trace, so a cluster computes them in parallel; bins.parquet (the run's energy per
# wall-clock bin) is what the fleet stage combines.


rule windows:
    input:
        trace=RESULTS / "{trace}.parquet",
    output:
        **WINDOWS.paths(LAYOUT.windows(RESULTS / "{trace}.parquet")),
    log:
        LAYOUT.logs / "windows" / "{trace}.log",
    wildcard_constraints:
        # any trace under RESULTS except the outputs of this and later stages
        trace=r"(?!windows/|fleet/|logs/|calibration/).+",
    params:
        windows=CFG.windows.model_dump_json(),
        cap_w=CFG.cap_w,
        out=lambda wildcards: LAYOUT.windows(RESULTS / f"{wildcards.trace}.parquet"),
    conda:
        "../../envs/analysis.yaml"
    threads: 1
    resources:
        **analysis_resources(),
    shell:
        "python -m grpo_power.cli windows {input.trace:q} --out {params.out:q} --config {RESOLVED_CONFIG:q} "
        "> {log:q} 2>&1"
