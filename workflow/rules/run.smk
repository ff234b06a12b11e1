# Run: one GRPO run (size x arm x seed) with power telemetry, a step log and a manifest.
# The fixed-safe arm's static setting is calibrated once per size, before its runs.


rule calibrate_fixed_safe:
    output:
        calibration=RESULTS / "calibration" / "{size}" / "fixed_safe.json",
    log:
        RESULTS / "logs" / "calibration" / "{size}.log",
    params:
        config=RESOLVED_CONFIG,
        workload=CFG.workload.model_dump_json(),
        telemetry=CFG.telemetry.model_dump_json(),
        fixed_safe=CFG.arms.fixed_safe.model_dump_json(),
        cap_w=CFG.cap_w,
    conda:
        "../../envs/training.yaml"
    threads: 2
    resources:
        mem_mb=4000,
    shell:
        "OMP_NUM_THREADS={threads} python -m grpo_power.cli calibrate --size {wildcards.size:q} "
        "--config {params.config:q} > {log:q} 2>&1"


rule run:
    input:
        run_inputs,
    output:
        trace=RESULTS / "runs" / "{size}" / "{arm}" / "seed{seed}" / "trace.parquet",
        steps=RESULTS / "runs" / "{size}" / "{arm}" / "seed{seed}" / "steps.parquet",
        manifest=RESULTS / "runs" / "{size}" / "{arm}" / "seed{seed}" / "manifest.json",
    log:
        RESULTS / "logs" / "runs" / "{size}" / "{arm}" / "seed{seed}.log",
    wildcard_constraints:
        arm="|".join(["uncontrolled", "fixed", "fixed-safe", "threshold", "ppo", "hwcap"]),
        seed=r"\d+",
    params:
        config=RESOLVED_CONFIG,
        workload=CFG.workload.model_dump_json(),
        telemetry=CFG.telemetry.model_dump_json(),
        arms=CFG.arms.model_dump_json(),
        cap_w=CFG.cap_w,
        out=lambda wildcards: run_folder(wildcards.size, wildcards.arm, wildcards.seed),
    # Whole-machine runs: arms never compete for cores, so their timings stay comparable.
    conda:
        "../../envs/training.yaml"
    threads: workflow.cores
    resources:
        mem_mb=8000,
    shell:
        "OMP_NUM_THREADS={threads} python -m grpo_power.cli run --size {wildcards.size:q} --arm {wildcards.arm:q} "
        "--seed {wildcards.seed:q} --out {params.out:q} --config {params.config:q} > {log:q} 2>&1"
