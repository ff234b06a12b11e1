# Run: the GRPO runs of one size and arm, every seed (trace, step log, manifest per seed); on a
# cluster one submitit job array over the seeds. The fixed-safe arm's static setting is
# calibrated once per size before its runs, its candidates measured as one job array too.
# Both rules run GRPO on GPUs: they are local rules that submit GPU jobs and wait (Snakefile).


rule calibrate_fixed_safe:
    output:
        calibration=RESULTS / "calibration" / "{size}" / "fixed_safe.json",
    log:
        RESULTS / "logs" / "calibration" / "{size}.log",
    params:
        settings=lambda wildcards: calibration_settings(CFG),
    conda:
        "../../envs/training.yaml"
    threads: submitter_threads()
    shell:
        "OMP_NUM_THREADS={threads} python -m grpo_power.cli calibrate --size {wildcards.size:q} "
        "--config {RESOLVED_CONFIG:q} > {log:q} 2>&1"


rule run:
    input:
        run_inputs,
    output:
        traces=seed_outputs("trace.parquet"),
        steps=seed_outputs("steps.parquet"),
        manifests=seed_outputs("manifest.json"),
    log:
        RESULTS / "logs" / "runs" / "{size}" / "{arm}.log",
    wildcard_constraints:
        arm="|".join(ARM_NAMES),
    params:
        settings=lambda wildcards: run_settings(CFG, wildcards.arm),
        seeds=option_args("--seed", CFG.seeds),
        out=lambda wildcards: RESULTS / "runs" / wildcards.size / wildcards.arm / "seed{seed}",
    conda:
        "../../envs/training.yaml"
    threads: submitter_threads()
    shell:
        "OMP_NUM_THREADS={threads} python -m grpo_power.cli run --size {wildcards.size:q} "
        "--arm {wildcards.arm:q} {params.seeds:q} --out {params.out:q} "
        "--config {RESOLVED_CONFIG:q} > {log:q} 2>&1"
