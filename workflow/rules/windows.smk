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
        windows=section_settings(CFG, "windows"),
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


# The evaluate stage's simulated runs through the same windows code: every arm and seed of one
# deployment (SIMULATED), against the deployment's cap, at the configured and the study's
# windows; its energy bins are what the study's fleet mix composes (rule study_fleet). One job
# per deployment: the evaluation declares its summary, beside which the samples lie.
ruleorder: sim_windows > windows


rule sim_windows:
    input:
        evaluation=LAYOUT.evaluate_study / EVALUATE.summary_json,
    output:
        **SIM_WINDOWS.paths(LAYOUT.sim_windows("{deployment}")),
    log:
        LAYOUT.logs / "windows" / "simulated-{deployment}.log",
    wildcard_constraints:
        deployment=wildcard_choice(deployment_names()),
    params:
        windows=section_settings(CFG, "windows"),
        gpu=CFG.gpu.name,
        evaluation=LAYOUT.evaluate_study,
        out=lambda wildcards: LAYOUT.sim_windows(wildcards.deployment),
    conda:
        "../../envs/analysis.yaml"
    threads: 1
    resources:
        **analysis_resources(),
    shell:
        "python -m grpo_power.cli sim-windows {params.evaluation:q} "
        "--deployment {wildcards.deployment:q} --out {params.out:q} --config {RESOLVED_CONFIG:q} "
        "> {log:q} 2>&1"
