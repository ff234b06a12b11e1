# Fleet: every run's energy bins combined into a fleet (by wall clock where the runs were
# concurrent, else by Monte Carlo over start offsets); peak vs nameplate, oversubscription, the
# scaling study to 100,000 GPUs, and the comparison with the study and published results.


rule fleet:
    input:
        bins=windows_outputs(WINDOWS.bins),
        exceedance=windows_outputs(WINDOWS.exceedance_parquet),
    output:
        **FLEET.paths(LAYOUT.fleet),
    log:
        LAYOUT.logs / "fleet.log",
    params:
        fleet=section_settings(CFG, "fleet", exclude={"study_mix"}),
        windows=section_settings(CFG, "windows"),
        cap_w=CFG.cap_w,
        seed=CFG.seed,
        out=LAYOUT.fleet,
    conda:
        "../../envs/analysis.yaml"
    threads: 1
    resources:  # 16 GB: the Monte Carlo scaling study to 100,000 GPUs
        **analysis_resources(mem_mb=16000, runtime=60, cpus_per_task=1),
    shell:
        "python -m grpo_power.cli fleet {input.bins:q} --out {params.out:q} --config {RESOLVED_CONFIG:q} > {log:q} 2>&1"


# The study's fleet (fleet.study_mix: 2 x 72b, 2 x 14b, 4 x 7b) composed of the deployments'
# simulated runs per arm, beside the study's 30 s peaks and the 72B windows (SIMULATED); only
# when the mix is configured.
rule study_fleet:
    input:
        windows=study_fleet_inputs(),
    output:
        **STUDY_FLEET.paths(LAYOUT.study_fleet),
    log:
        LAYOUT.logs / "study_fleet.log",
    params:
        fleet=section_settings(CFG, "fleet"),
        windows=section_settings(CFG, "windows"),
        deployments=section_settings(CFG, "sim", include={"deployments"}),
        seed=CFG.seed,
        folders=[LAYOUT.sim_windows(entry.deployment) for entry in CFG.fleet.study_mix],
        out=LAYOUT.study_fleet,
    conda:
        "../../envs/analysis.yaml"
    threads: 1
    resources:  # about 0.3 GB for the default study's 3 deployments x 9 arms x 5 seeds
        **analysis_resources(mem_mb=2000, runtime=30, cpus_per_task=1),
    shell:
        "python -m grpo_power.cli study-fleet {params.folders:q} --out {params.out:q} "
        "--config {RESOLVED_CONFIG:q} > {log:q} 2>&1"
