# Planner mode: a folder of traces (config planner.traces: nvidia-smi / DCGM CSV logs, Parquet
# traces, mixed) imported, windowed, made into a fleet, priced and reported, with no GRPO run and
# no simulator: `snakemake --cores 2 planner --config planner='{traces: DIR}'`. The same commands
# as `grpo-power planner run DIR --out results/planner`, one job each (a window job per trace).
from grpo_power.planner.discover import find_traces

PLANNER = RESULTS / "planner"
PLANNER_WINDOWS = ["exceedance.csv", "exceedance.parquet", "gaps.csv", "bins.parquet", "summary.json"]


def planner_keys():
    """The names of the traces under planner.traces (found when the workflow is planned)."""
    if CFG.planner.traces is None:
        return []
    return [found.key for found in find_traces(CFG.planner.traces)[0]]


rule planner_import:
    output:
        index=PLANNER / "traces" / "index.csv",
        traces=[PLANNER / "traces" / f"{key}.parquet" for key in planner_keys()],
    log:
        RESULTS / "logs" / "planner" / "import.log",
    params:
        planner=CFG.planner.model_dump_json(),
        gpu=CFG.gpu.model_dump_json(),
        folder=CFG.planner.traces,
        out=PLANNER / "traces",
    conda:
        "../../envs/analysis.yaml"
    threads: 1
    resources:
        **analysis_resources(),
    shell:
        "python -m grpo_power.cli planner import {params.folder:q} --out {params.out:q} "
        "--config {RESOLVED_CONFIG:q} > {log:q} 2>&1"


rule planner_windows:
    input:
        trace=PLANNER / "traces" / "{key}.parquet",
    output:
        **{name.replace(".", "_"): PLANNER / "windows" / "{key}" / name for name in PLANNER_WINDOWS},
    log:
        RESULTS / "logs" / "planner" / "windows" / "{key}.log",
    params:
        windows=CFG.windows.model_dump_json(),
        cap_w=CFG.cap_w,
        out=lambda wildcards: PLANNER / "windows" / wildcards.key,
    conda:
        "../../envs/analysis.yaml"
    threads: 1
    resources:
        **analysis_resources(),
    shell:
        "python -m grpo_power.cli windows {input.trace:q} --out {params.out:q} "
        "--config {RESOLVED_CONFIG:q} > {log:q} 2>&1"


rule planner_fleet:
    input:
        bins=[PLANNER / "windows" / key / "bins.parquet" for key in planner_keys()],
    output:
        **{name.replace(".", "_"): PLANNER / "fleet" / name for name in FLEET_OUTPUTS},
        summary=PLANNER / "fleet" / "summary.json",
    log:
        RESULTS / "logs" / "planner" / "fleet.log",
    params:
        fleet=CFG.fleet.model_dump_json(),
        windows=CFG.windows.model_dump_json(),
        cap_w=CFG.cap_w,
        seed=CFG.seed,
        folders=lambda wildcards, input: [str(Path(b).parent) for b in input.bins],
        out=PLANNER / "fleet",
    conda:
        "../../envs/analysis.yaml"
    threads: 1
    resources:
        **analysis_resources(),
    shell:
        "python -m grpo_power.cli planner fleet {params.folders:q} --out {params.out:q} "
        "--config {RESOLVED_CONFIG:q} > {log:q} 2>&1"


rule planner_economics:
    input:
        index=PLANNER / "traces" / "index.csv",
        fleet=PLANNER / "fleet" / "summary.json",
    output:
        **{name.replace(".", "_"): PLANNER / "economics" / name for name in ["constants.csv", "traces.csv", "oversubscription.csv", "summary.json"]},
    log:
        RESULTS / "logs" / "planner" / "economics.log",
    params:
        economics=CFG.economics.model_dump_json(),
        traces=PLANNER / "traces",
        fleet=PLANNER / "fleet",
        out=PLANNER / "economics",
    conda:
        "../../envs/analysis.yaml"
    threads: 1
    resources:
        **analysis_resources(),
    shell:
        "python -m grpo_power.cli planner economics --traces {params.traces:q} "
        "--fleet {params.fleet:q} --out {params.out:q} --config {RESOLVED_CONFIG:q} > {log:q} 2>&1"


rule planner_report:
    input:
        index=PLANNER / "traces" / "index.csv",
        fleet=PLANNER / "fleet" / "summary.json",
        economics=PLANNER / "economics" / "summary.json",
    output:
        index=PLANNER / "report" / "index.html",
    log:
        RESULTS / "logs" / "planner" / "report.log",
    params:
        report=CFG.report.model_dump_json(),
        traces=PLANNER / "traces",
        fleet=PLANNER / "fleet",
        economics=PLANNER / "economics",
        out=PLANNER / "report",
    conda:
        "../../envs/analysis.yaml"
    threads: 1
    resources:
        **analysis_resources(),
    shell:
        "python -m grpo_power.cli planner report --traces {params.traces:q} --fleet {params.fleet:q} "
        "--economics {params.economics:q} --out {params.out:q} --config {RESOLVED_CONFIG:q} > {log:q} 2>&1"


rule planner:
    input:
        PLANNER / "report" / "index.html",
