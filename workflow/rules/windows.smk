# Windows: exceedance of the cap by averaging window, per GPU and per run, for one trace file.
# One job per trace, so a cluster computes them in parallel; bins.parquet (the run's energy per
# wall-clock bin) is what the fleet stage combines.


rule windows:
    input:
        trace=RESULTS / "{trace}.parquet",
    output:
        exceedance=RESULTS / "windows" / "{trace}" / "exceedance.csv",
        exceedance_parquet=RESULTS / "windows" / "{trace}" / "exceedance.parquet",
        gaps=RESULTS / "windows" / "{trace}" / "gaps.csv",
        bins=RESULTS / "windows" / "{trace}" / "bins.parquet",
        summary=RESULTS / "windows" / "{trace}" / "summary.json",
    log:
        RESULTS / "logs" / "windows" / "{trace}.log",
    wildcard_constraints:
        # any trace under RESULTS except the outputs of this and later stages
        trace=r"(?!windows/|fleet/|logs/|calibration/).+",
    params:
        windows=CFG.windows.model_dump_json(),
        cap_w=CFG.cap_w,
        out=lambda wildcards: RESULTS / "windows" / wildcards.trace,
    conda:
        "../../envs/analysis.yaml"
    threads: 1
    resources:
        **analysis_resources(),
    shell:
        "python -m grpo_power.cli windows {input.trace:q} --out {params.out:q} --config {RESOLVED_CONFIG:q} "
        "> {log:q} 2>&1"
