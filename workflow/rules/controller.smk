# Controller: the PPO meta-controller of one deployment, trained in the calibrated simulator on
# the action space the authority table gives it (one job per deployment, in parallel), and the
# ppo+hwcap arm's, trained under the GPU power limit it tunes first (the hardware tier).


rule controller:
    input:
        calibration=LAYOUT.identify / IDENTIFY.calibration,
        authority=LAYOUT.identify / IDENTIFY.authority_json,
    output:
        **CONTROLLER.paths(LAYOUT.controller("{deployment}")),
    log:
        LAYOUT.logs / "controller" / "{deployment}.log",
    wildcard_constraints:
        deployment=wildcard_choice(deployment_names()),
    params:
        controller=section_settings(CFG, "controller"),
        objective=section_settings(CFG, "objective"),
        oracle_search=(
            f"{CFG.evaluate.tuning_seeds} {CFG.evaluate.tuning_budget_frac} "
            f"{CFG.evaluate.oracle_finalists}"
        ),
        sim=section_settings(CFG, "sim"),
        # the simulator's sampling period and power model (sensor window, noise)
        telemetry=SIM_TELEMETRY,
        workload=section_settings(CFG, "workload"),
        arms=section_settings(CFG, "arms", include={"observation_window_s"}),
        cap_w=CFG.cap_w,
        arm="ppo",
        out=lambda wildcards: LAYOUT.controller(wildcards.deployment),
    conda:
        "../../envs/training.yaml"
    threads: 1
    resources:
        **analysis_resources(mem_mb=2000, runtime=120, cpus_per_task=1),
    shell:
        "OMP_NUM_THREADS={threads} python -m grpo_power.cli controller train "
        "--deployment {wildcards.deployment:q} --arm {params.arm:q} --out {params.out:q} "
        "--calibration {input.calibration:q} --authority {input.authority:q} "
        "--config {RESOLVED_CONFIG:q} > {log:q} 2>&1"


use rule controller as controller_hwcap with:
    output:
        **CONTROLLER.paths(LAYOUT.controller("{deployment}", "ppo+hwcap")),
    log:
        LAYOUT.logs / "controller" / "{deployment}+hwcap.log",
    params:
        arm="ppo+hwcap",
        limits=CFG.evaluate.oracle_power_limit_fracs,
        out=lambda wildcards: LAYOUT.controller(wildcards.deployment, "ppo+hwcap"),
