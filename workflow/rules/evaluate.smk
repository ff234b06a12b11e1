# Evaluate: every arm on every deployment over the evaluation seeds in the simulator, with 95 %
# confidence intervals and the study's ratios; and each configured scenario (another cap or
# calibration), where the study's controllers run as they are and after retraining.


rule evaluate:
    input:
        controllers=controller_outputs(),
        calibration=LAYOUT.identify / IDENTIFY.calibration,
        authority=LAYOUT.identify / IDENTIFY.authority_json,
    output:
        **{
            **EVALUATE.paths(LAYOUT.evaluate_study),
            "table": report(
                LAYOUT.evaluate_study / EVALUATE.table,
                caption="../report/evaluate.rst",
                category="Evaluation",
            ),
        },
    log:
        LAYOUT.logs / "evaluate" / "study.log",
    params:
        evaluate=section_settings(CFG, "evaluate", exclude={"scenarios"}),
        sim=section_settings(CFG, "sim"),
        # the simulator's sampling period and power model (sensor window, noise)
        telemetry=SIM_TELEMETRY,
        arms=section_settings(CFG, "arms", exclude={"run"}),
        reward=section_settings(CFG, "controller.reward"),
        objective=section_settings(CFG, "objective"),
        out=LAYOUT.evaluate_study,
        controllers=LAYOUT.controllers,
    conda:
        "../../envs/training.yaml"
    threads: 1
    resources:
        **analysis_resources(mem_mb=4000, runtime=120, cpus_per_task=1),
    shell:
        "OMP_NUM_THREADS={threads} python -m grpo_power.cli evaluate --out {params.out:q} "
        "--controllers {params.controllers:q} --calibration {input.calibration:q} "
        "--authority {input.authority:q} --config {RESOLVED_CONFIG:q} > {log:q} 2>&1"


rule evaluate_scenario:
    input:
        controllers=controller_outputs(),
        calibration=LAYOUT.identify / IDENTIFY.calibration,
        authority=LAYOUT.identify / IDENTIFY.authority_json,
        scenario_calibration=lambda wildcards: scenario_calibration_inputs(wildcards.scenario),
    output:
        **{
            **EVALUATE.paths(LAYOUT.evaluate_scenario("{scenario}")),
            "table": report(
                LAYOUT.evaluate_scenario("{scenario}") / EVALUATE.table,
                caption="../report/scenario.rst",
                category="Evaluation",
            ),
        },
    log:
        LAYOUT.logs / "evaluate" / "scenario-{scenario}.log",
    wildcard_constraints:
        scenario=wildcard_choice(s.name for s in CFG.evaluate.scenarios),
    params:
        # the study's evaluate settings and this scenario's entry: adding or changing another
        # scenario reruns no other scenario
        evaluate=section_settings(CFG, "evaluate", exclude={"scenarios"}),
        scenario=lambda wildcards: scenario(wildcards.scenario).model_dump_json(),
        sim=section_settings(CFG, "sim"),
        # the simulator's sampling period and power model (sensor window, noise)
        telemetry=SIM_TELEMETRY,
        arms=section_settings(CFG, "arms", exclude={"run"}),
        controller=section_settings(CFG, "controller"),
        objective=section_settings(CFG, "objective"),
        out=lambda wildcards: LAYOUT.evaluate_scenario(wildcards.scenario),
        controllers=LAYOUT.controllers,
    conda:
        "../../envs/training.yaml"
    threads: 1
    resources:
        **analysis_resources(mem_mb=4000, runtime=120, cpus_per_task=1),
    shell:
        "OMP_NUM_THREADS={threads} python -m grpo_power.cli evaluate --scenario {wildcards.scenario:q} "
        "--out {params.out:q} --controllers {params.controllers:q} "
        "--calibration {input.calibration:q} --authority {input.authority:q} "
        "--config {RESOLVED_CONFIG:q} > {log:q} 2>&1"
