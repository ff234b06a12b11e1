# Run: the GRPO runs of one size and arm, every seed (trace, step log, manifest per seed); on a
# cluster one submitit job array over the seeds. The fixed-safe arm's static setting is
# calibrated once per size before its runs, its candidates measured as one job array too. A
# run's folder is its output: a run of other settings found there (a stopped run, then a changed
# config) is discarded with a note (--replace-other), where the same run resumes.
# Both rules run GRPO on GPUs: they are local rules that submit GPU jobs and wait (Snakefile).


rule calibrate_fixed_safe:
    output:
        **FIXED_SAFE.paths(LAYOUT.calibration("{size}")),
    log:
        LAYOUT.logs / "calibration" / "{size}.log",
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
        **{field: seed_outputs(name) for field, name in zip(("trace", "steps", "manifest"), RUN.names())},
    log:
        LAYOUT.logs / "runs" / "{size}" / "{arm}.log",
    wildcard_constraints:
        arm=wildcard_choice(ARM_NAMES),
    params:
        settings=lambda wildcards: run_settings(CFG, wildcards.arm),
        seeds=option_args("--seed", CFG.seeds),
        out=lambda wildcards: LAYOUT.run(wildcards.size, wildcards.arm, "{seed}"),
    conda:
        "../../envs/training.yaml"
    threads: submitter_threads()
    shell:
        "OMP_NUM_THREADS={threads} python -m grpo_power.cli run --size {wildcards.size:q} "
        "--arm {wildcards.arm:q} {params.seeds:q} --out {params.out:q} --replace-other "
        "--config {RESOLVED_CONFIG:q} > {log:q} 2>&1"
