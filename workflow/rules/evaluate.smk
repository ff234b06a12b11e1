# Evaluate: every arm on every deployment over the evaluation seeds in the simulator, with 95 %
# confidence intervals and the study's ratios; and each configured scenario (another cap or
# calibration), where the study's controllers run as they are and after retraining.


rule evaluate:
    input:
        controllers=controller_outputs(),
        calibration=RESULTS / "identify" / "calibration.json",
        authority=RESULTS / "identify" / "authority.json",
    output:
        table=report(
            RESULTS / "evaluate" / "study" / "table.md",
            caption="../report/evaluate.rst",
            category="Evaluation",
        ),
        **{
            f"{name}_csv": RESULTS / "evaluate" / "study" / f"{name}.csv"
            for name in EVALUATE_TABLES
        },
        summary=RESULTS / "evaluate" / "study" / "summary.json",
    log:
        RESULTS / "logs" / "evaluate" / "study.log",
    params:
        evaluate=CFG.evaluate.model_dump_json(exclude={"scenarios"}),
        sim=CFG.sim.model_dump_json(),
        arms=CFG.arms.model_dump_json(),
        reward=CFG.controller.reward.model_dump_json(),
        out=RESULTS / "evaluate" / "study",
        controllers=RESULTS / "controller",
    conda:
        "../../envs/training.yaml"
    threads: 1
    resources:
        **analysis_resources(),
    shell:
        "OMP_NUM_THREADS={threads} python -m grpo_power.cli evaluate --out {params.out:q} "
        "--controllers {params.controllers:q} --calibration {input.calibration:q} "
        "--authority {input.authority:q} --config {RESOLVED_CONFIG:q} > {log:q} 2>&1"


rule evaluate_scenario:
    input:
        controllers=controller_outputs(),
        calibration=RESULTS / "identify" / "calibration.json",
        authority=RESULTS / "identify" / "authority.json",
        scenario_calibration=lambda wildcards: scenario_calibration_inputs(wildcards.scenario),
    output:
        table=report(
            RESULTS / "evaluate" / "scenarios" / "{scenario}" / "table.md",
            caption="../report/scenario.rst",
            category="Evaluation",
        ),
        **{
            f"{name}_csv": RESULTS / "evaluate" / "scenarios" / "{scenario}" / f"{name}.csv"
            for name in EVALUATE_TABLES
        },
        summary=RESULTS / "evaluate" / "scenarios" / "{scenario}" / "summary.json",
    log:
        RESULTS / "logs" / "evaluate" / "scenario-{scenario}.log",
    wildcard_constraints:
        scenario="|".join(s.name for s in CFG.evaluate.scenarios) or "(?!)",
    params:
        evaluate=CFG.evaluate.model_dump_json(),
        sim=CFG.sim.model_dump_json(),
        controller=CFG.controller.model_dump_json(),
        out=lambda wildcards: RESULTS / "evaluate" / "scenarios" / wildcards.scenario,
        controllers=RESULTS / "controller",
    conda:
        "../../envs/training.yaml"
    threads: 1
    resources:
        **analysis_resources(),
    shell:
        "OMP_NUM_THREADS={threads} python -m grpo_power.cli evaluate --scenario {wildcards.scenario:q} "
        "--out {params.out:q} --controllers {params.controllers:q} "
        "--calibration {input.calibration:q} --authority {input.authority:q} "
        "--config {RESOLVED_CONFIG:q} > {log:q} 2>&1"
