# Economics: energy cost, carbon, the value of oversubscription and the pilot plan, priced from
# the real runs, the evaluate stage's simulated runs and the fleet stage's factors.


rule economics:
    input:
        manifests=run_files(RUN.manifest),
        traces=run_files(RUN.trace),
        steps=run_files(RUN.steps),
        metrics=LAYOUT.evaluate_study / EVALUATE.metrics,
        fleet_summary=LAYOUT.fleet / FLEET.summary,
        fleet_windows=LAYOUT.fleet / FLEET.fleet_csv,
        scaling=LAYOUT.fleet / FLEET.scaling_csv,
    output:
        **{
            **ECONOMICS.paths(LAYOUT.economics),
            "arms": report(
                LAYOUT.economics / ECONOMICS.arms,
                caption="../report/economics_costs.rst",
                category="Economics",
            ),
            "oversubscription": report(
                LAYOUT.economics / ECONOMICS.oversubscription,
                caption="../report/economics_oversubscription.rst",
                category="Economics",
            ),
            "pilot": report(
                LAYOUT.economics / ECONOMICS.pilot,
                caption="../report/economics_pilot.rst",
                category="Economics",
            ),
        },
    log:
        LAYOUT.logs / "economics.log",
    params:
        economics=section_settings(CFG, "economics"),
        gpu=section_settings(CFG, "gpu"),
        confidence=CFG.evaluate.confidence,
        runs=lambda wildcards, input: option_args(
            "--run", [Path(manifest).parent for manifest in input.manifests]
        ),
        evaluate=LAYOUT.evaluate_study,
        fleet=LAYOUT.fleet,
        out=LAYOUT.economics,
    conda:
        "../../envs/analysis.yaml"
    threads: 1
    resources:
        **analysis_resources(mem_mb=2000, runtime=30, cpus_per_task=1),
    shell:
        "python -m grpo_power.cli economics --out {params.out:q} {params.runs:q} "
        "--evaluate {params.evaluate:q} --fleet {params.fleet:q} --config {RESOLVED_CONFIG:q} > {log:q} 2>&1"
