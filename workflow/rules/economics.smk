# Economics: energy cost, carbon, the value of oversubscription and the pilot plan, priced from
# the real runs, the evaluate stage's simulated runs and the fleet stage's factors.


rule economics:
    input:
        manifests=run_files("manifest.json"),
        traces=run_files("trace.parquet"),
        steps=run_files("steps.parquet"),
        metrics=RESULTS / "evaluate" / "study" / "metrics.csv",
        fleet_summary=RESULTS / "fleet" / "summary.json",
        fleet_windows=RESULTS / "fleet" / "fleet_windows.csv",
        scaling=RESULTS / "fleet" / "scaling.csv",
    output:
        arms=report(
            RESULTS / "economics" / "arms.csv",
            caption="../report/economics_costs.rst",
            category="Economics",
        ),
        oversubscription=report(
            RESULTS / "economics" / "oversubscription.csv",
            caption="../report/economics_oversubscription.rst",
            category="Economics",
        ),
        pilot=report(
            RESULTS / "economics" / "pilot.csv",
            caption="../report/economics_pilot.rst",
            category="Economics",
        ),
        **{
            name.replace(".", "_"): RESULTS / "economics" / name
            for name in ECONOMICS_OUTPUTS
            if name not in ("arms.csv", "oversubscription.csv", "pilot.csv")
        },
    log:
        RESULTS / "logs" / "economics.log",
    params:
        economics=CFG.economics.model_dump_json(),
        gpu=CFG.gpu.model_dump_json(),
        confidence=CFG.evaluate.confidence,
        runs=lambda wildcards, input: option_args(
            "--run", [Path(manifest).parent for manifest in input.manifests]
        ),
        evaluate=RESULTS / "evaluate" / "study",
        fleet=RESULTS / "fleet",
        out=RESULTS / "economics",
    conda:
        "../../envs/analysis.yaml"
    threads: 1
    resources:
        **analysis_resources(),
    shell:
        "python -m grpo_power.cli economics --out {params.out:q} {params.runs:q} "
        "--evaluate {params.evaluate:q} --fleet {params.fleet:q} --config {RESOLVED_CONFIG:q} > {log:q} 2>&1"
