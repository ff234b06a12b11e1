# Telemetry: a power trace of the demo workload (until the run stage replaces it as main job).


rule telemetry_demo:
    output:
        trace=RESULTS / "telemetry" / "demo.parquet",
    log:
        RESULTS / "logs" / "telemetry_demo.log",
    params:
        config=RESOLVED_CONFIG,
        telemetry=CFG.telemetry.model_dump_json(),
        seconds=20,
    threads: 1
    shell:
        "grpo-power telemetry record --config {params.config} --out {output.trace} -- "
        "python -m grpo_power.workload.demo --seconds {params.seconds} > {log} 2>&1"
