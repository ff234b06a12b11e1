# Identify: actuator sweeps on every simulated deployment and on the real workload (short tiny
# runs at each actuator's bounds), the authority table (DESIGN.md section 2), and the simulator's
# calibration file (sourced defaults plus a fit of the real runs, with residuals).


rule identify:
    input:
        calibration=study_calibration_inputs(),
    output:
        calibration=RESULTS / "identify" / "calibration.json",
        authority=RESULTS / "identify" / "authority.json",
        authority_csv=RESULTS / "identify" / "authority.csv",
        authority_md=report(
            RESULTS / "identify" / "authority.md",
            caption="../report/authority.rst",
            category="Authority",
        ),
        sweeps=RESULTS / "identify" / "sweeps.csv",
    log:
        RESULTS / "logs" / "identify.log",
    params:
        config=RESOLVED_CONFIG,
        sim=CFG.sim.model_dump_json(),
        authority=CFG.authority.model_dump_json(),
        workload=CFG.workload.model_dump_json(),
        telemetry=CFG.telemetry.model_dump_json(),
        reward=CFG.controller.reward.model_dump_json(),
        calibration=lambda wildcards, input: option_args("--calibration", input.calibration),
        out=RESULTS / "identify",
    conda:
        "../../envs/training.yaml"
    threads: 2
    resources:
        mem_mb=4000,
    shell:
        "OMP_NUM_THREADS={threads} python -m grpo_power.cli identify --out {params.out:q} "
        "{params.calibration:q} --config {params.config:q} > {log:q} 2>&1"
