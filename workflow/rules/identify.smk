# Identify: actuator sweeps on every simulated deployment and on the real workload (short runs at
# each actuator's bounds), the authority table (docs: authority), and the simulator's calibration
# file (sourced defaults plus a fit of the real runs, with residuals). The real-workload sweep
# runs GRPO, so it is its own rule: a local rule that submits its runs as one GPU job array on a
# cluster (launch.launcher: submitit); identify itself is a CPU-only analysis job.


rule sweep:
    output:
        **SWEEP.paths(LAYOUT.real_sweep),
    log:
        LAYOUT.logs / "sweep.log",
    params:
        settings=lambda wildcards: real_sweep_settings(CFG),
        out=LAYOUT.real_sweep,
    conda:
        "../../envs/training.yaml"
    threads: submitter_threads()
    shell:
        "OMP_NUM_THREADS={threads} python -m grpo_power.cli sweep --out {params.out:q} "
        "--config {RESOLVED_CONFIG:q} > {log:q} 2>&1"


rule identify:
    input:
        calibration=study_calibration_inputs(),
        sweep=sweep_inputs(),
    output:
        **{
            **IDENTIFY.paths(LAYOUT.identify),
            "authority_md": report(
                LAYOUT.identify / IDENTIFY.authority_md,
                caption="../report/authority.rst",
                category="Authority",
            ),
        },
    log:
        LAYOUT.logs / "identify.log",
    params:
        sim=section_settings(CFG, "sim"),
        # the simulator's sampling period and power model (sensor window, noise)
        telemetry=SIM_TELEMETRY,
        authority=section_settings(CFG, "authority"),
        workload=section_settings(CFG, "workload"),
        gpu=section_settings(CFG, "gpu"),
        cap_w=CFG.cap_w,
        reward=section_settings(CFG, "controller.reward"),
        calibration=lambda wildcards, input: option_args("--calibration", input.calibration),
        sweep=lambda wildcards, input: option_args(
            "--sweep", [Path(index).parent for index in input.sweep]
        ),
        out=LAYOUT.identify,
    conda:
        "../../envs/training.yaml"
    threads: 2
    resources:
        **analysis_resources(mem_mb=4000, runtime=60, cpus_per_task=2),
    shell:
        "OMP_NUM_THREADS={threads} python -m grpo_power.cli identify --out {params.out:q} "
        "{params.calibration:q} {params.sweep:q} --config {RESOLVED_CONFIG:q} > {log:q} 2>&1"
