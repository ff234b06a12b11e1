# Report: publication figures (PDF + PNG, one seaborn style) and results/report/index.html, from
# every earlier stage's outputs; `snakemake --report` shows the figures with their captions.


rule report:
    input:
        manifests=run_files(RUN.manifest),
        traces=run_files(RUN.trace),
        steps=run_files(RUN.steps),
        exceedance=windows_outputs(WINDOWS.exceedance_csv),
        fleet=[
            LAYOUT.fleet / name
            for name in (FLEET.summary, FLEET.fleet_csv, FLEET.scaling_csv, FLEET.comparison_csv)
        ],
        authority=LAYOUT.identify / IDENTIFY.authority_csv,
        sweeps=LAYOUT.identify / IDENTIFY.sweeps,
        controllers=controller_outputs(),
        evaluate=[
            LAYOUT.evaluate_study / name
            for name in (EVALUATE.summary_csv, EVALUATE.ratios, EVALUATE.summary_json, EVALUATE.metrics)
        ],
        scenarios=[
            folder / name
            for folder in scenario_folders()
            for name in (EVALUATE.summary_csv, EVALUATE.ratios, EVALUATE.summary_json, EVALUATE.metrics)
        ],
        economics=list(ECONOMICS.paths(LAYOUT.economics).values()),
        real_traces=list(real_trace_outputs().values()),
        study_fleet=list(study_fleet_outputs().values()),
    output:
        index=report(
            LAYOUT.report / REPORT.page,
            caption="../report/index.rst",
            category="Report",
        ),
        **{
            f"{name}_png": report(
                LAYOUT.report / "figures" / f"{name}.png",
                caption=f"../report/figure_{name}.rst",
                category="Figures",
            )
            for name in REPORT_FIGURES
        },
        **{f"{name}_pdf": LAYOUT.report / "figures" / f"{name}.pdf" for name in REPORT_FIGURES},
        # the real-traces section's figure, when real_traces.folder names measured runs
        **(
            {
                "real_traces_png": report(
                    LAYOUT.report / "figures" / f"{REAL_TRACES_FIGURE}.png",
                    caption=f"../report/figure_{REAL_TRACES_FIGURE}.rst",
                    category="Figures",
                ),
                "real_traces_pdf": LAYOUT.report / "figures" / f"{REAL_TRACES_FIGURE}.pdf",
            }
            if real_trace_outputs()
            else {}
        ),
    log:
        LAYOUT.logs / "report.log",
    params:
        report=section_settings(CFG, "report"),
        economics=section_settings(CFG, "economics"),
        runs=lambda wildcards, input: option_args(
            "--run", [Path(manifest).parent for manifest in input.manifests]
        ),
        exceedance=lambda wildcards, input: option_args("--exceedance", input.exceedance),
        controllers=option_args("--controller", controller_folders()),
        fleet=LAYOUT.fleet,
        identify=LAYOUT.identify,
        evaluate=LAYOUT.evaluate_study,
        economics_dir=LAYOUT.economics,
        real_traces=option_args("--real-traces", [LAYOUT.real_traces] if real_trace_outputs() else []),
        study_fleet=option_args("--study-fleet", [LAYOUT.study_fleet] if study_fleet_outputs() else []),
        scenarios=option_args("--scenario", scenario_folders()),
        out=LAYOUT.report,
    conda:
        "../../envs/analysis.yaml"
    threads: 1
    resources:
        **analysis_resources(mem_mb=4000, runtime=30, cpus_per_task=1),
    shell:
        "python -m grpo_power.cli report --out {params.out:q} {params.runs:q} {params.exceedance:q} "
        "{params.controllers:q} --fleet {params.fleet:q} --identify {params.identify:q} "
        "--evaluate {params.evaluate:q} --economics {params.economics_dir:q} {params.real_traces:q} "
        "{params.study_fleet:q} {params.scenarios:q} "
        "--config {RESOLVED_CONFIG:q} > {log:q} 2>&1"
