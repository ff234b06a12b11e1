# Report: publication figures (PDF + PNG, one seaborn style) and results/report/index.html, from
# every earlier stage's outputs; `snakemake --report` shows the figures with their captions.


rule report:
    input:
        manifests=run_files("manifest.json"),
        traces=run_files("trace.parquet"),
        steps=run_files("steps.parquet"),
        exceedance=windows_outputs("exceedance.csv"),
        fleet=[
            RESULTS / "fleet" / name
            for name in ("summary.json", "fleet_windows.csv", "scaling.csv", "comparison.csv")
        ],
        authority=RESULTS / "identify" / "authority.csv",
        controllers=controller_outputs(),
        evaluate=[
            RESULTS / "evaluate" / "study" / name
            for name in ("summary.csv", "ratios.csv", "summary.json")
        ],
        economics=[RESULTS / "economics" / name for name in ECONOMICS_OUTPUTS],
    output:
        index=report(
            RESULTS / "report" / "index.html",
            caption="../report/index.rst",
            category="Report",
        ),
        **{
            f"{name}_png": report(
                RESULTS / "report" / "figures" / f"{name}.png",
                caption=f"../report/figure_{name}.rst",
                category="Figures",
            )
            for name in REPORT_FIGURES
        },
        **{
            f"{name}_pdf": RESULTS / "report" / "figures" / f"{name}.pdf"
            for name in REPORT_FIGURES
        },
    log:
        RESULTS / "logs" / "report.log",
    params:
        report=CFG.report.model_dump_json(),
        economics=CFG.economics.model_dump_json(),
        runs=lambda wildcards, input: option_args(
            "--run", [Path(manifest).parent for manifest in input.manifests]
        ),
        exceedance=lambda wildcards, input: option_args("--exceedance", input.exceedance),
        controllers=option_args("--controller", controller_folders()),
        fleet=RESULTS / "fleet",
        identify=RESULTS / "identify",
        evaluate=RESULTS / "evaluate" / "study",
        economics_dir=RESULTS / "economics",
        out=RESULTS / "report",
    conda:
        "../../envs/analysis.yaml"
    threads: 1
    resources:
        **analysis_resources(),
    shell:
        "python -m grpo_power.cli report --out {params.out:q} {params.runs:q} {params.exceedance:q} "
        "{params.controllers:q} --fleet {params.fleet:q} --identify {params.identify:q} "
        "--evaluate {params.evaluate:q} --economics {params.economics_dir:q} "
        "--config {RESOLVED_CONFIG:q} > {log:q} 2>&1"
