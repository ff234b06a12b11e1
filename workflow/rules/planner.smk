# Planner mode: a folder of traces (config planner.traces: nvidia-smi / DCGM CSV logs, Parquet
# traces, mixed) imported, windowed, made into a fleet, priced and reported, with no GRPO run and
# no simulator: `snakemake --cores 2 planner --config planner='{traces: DIR}'`. The same commands
# as `grpo-power planner run DIR --out results/planner`, one job each (a window job per trace).
import functools

from grpo_power.layout import PLANNER_ECONOMICS, PLANNER_FLEET, PLANNER_TRACES
from grpo_power.planner.discover import find_traces

PLANNER = LAYOUT.planner


@functools.cache
def planner_found():
    """The files under planner.traces: (traces, skipped), found when the workflow is planned."""
    if CFG.planner.traces is None:
        return [], []
    return find_traces(CFG.planner.traces, [PLANNER.traces])  # as planner_import searches it


def planner_keys():
    """The names of the traces under planner.traces."""
    return [found.key for found in planner_found()[0]]


def planner_files():
    """Every file under planner.traces the import reads (a rotated log's parts, an engine log
    beside a power log), so that a log written since the import is imported again."""
    traces, skipped = planner_found()
    return sorted({str(p) for f in traces + skipped for p in (f.path, *f.parts)})


def planner_stamp():
    """The import's record of the folder it read: missing when results/planner holds the
    traces of another folder (imported by `grpo-power planner run`, or another config)."""
    if CFG.planner.traces is None:
        return []
    return [PLANNER.traces / PLANNER_TRACES.folder_stamp(CFG.planner.traces)]


rule planner_import:
    input:
        planner_files(),
    output:
        index=PLANNER.traces / PLANNER_TRACES.index,
        traces=[PLANNER.trace(key) for key in planner_keys()],
        folder=planner_stamp(),
    log:
        LAYOUT.logs / "planner" / "import.log",
    params:
        planner=section_settings(CFG, "planner"),
        gpu=section_settings(CFG, "gpu"),
        folder=CFG.planner.traces,
        out=PLANNER.traces,
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
        trace=PLANNER.trace("{key}"),
    output:
        **WINDOWS.paths(PLANNER.windows("{key}")),
    log:
        LAYOUT.logs / "planner" / "windows" / "{key}.log",
    params:
        windows=section_settings(CFG, "windows"),
        cap_w=CFG.cap_w,
        # planner.cap_w: the cap the planner judges by, as `planner run` passes it
        cap_option="" if CFG.planner.cap_w is None else f"--cap-w {CFG.planner.cap_w!r}",
        out=lambda wildcards: PLANNER.windows(wildcards.key),
    conda:
        "../../envs/analysis.yaml"
    threads: 1
    resources:
        **analysis_resources(),
    shell:
        "python -m grpo_power.cli windows {input.trace:q} --out {params.out:q} {params.cap_option} "
        "--config {RESOLVED_CONFIG:q} > {log:q} 2>&1"


rule planner_fleet:
    input:
        bins=[PLANNER.windows(key) / WINDOWS.bins for key in planner_keys()],
    output:
        **PLANNER_FLEET.paths(PLANNER.fleet),
    log:
        LAYOUT.logs / "planner" / "fleet.log",
    params:
        fleet=section_settings(CFG, "fleet", exclude={"study_mix"}),
        windows=section_settings(CFG, "windows"),
        cap_w=CFG.cap_w,
        planner_cap_w=CFG.planner.cap_w,
        seed=CFG.seed,
        folders=lambda wildcards, input: [str(Path(b).parent) for b in input.bins],
        out=PLANNER.fleet,
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
        index=PLANNER.traces / PLANNER_TRACES.index,
        fleet=PLANNER.fleet / FLEET.summary,
    output:
        **PLANNER_ECONOMICS.paths(PLANNER.economics),
    log:
        LAYOUT.logs / "planner" / "economics.log",
    params:
        economics=section_settings(CFG, "economics"),
        traces=PLANNER.traces,
        fleet=PLANNER.fleet,
        out=PLANNER.economics,
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
        index=PLANNER.traces / PLANNER_TRACES.index,
        fleet=PLANNER.fleet / FLEET.summary,
        peaks=PLANNER.fleet / PLANNER_FLEET.trace_peaks_csv,
        economics=PLANNER.economics / PLANNER_ECONOMICS.summary,
    output:
        index=PLANNER.report / REPORT.page,
    log:
        LAYOUT.logs / "planner" / "report.log",
    params:
        report=section_settings(CFG, "report"),
        traces=PLANNER.traces,
        fleet=PLANNER.fleet,
        economics=PLANNER.economics,
        out=PLANNER.report,
    conda:
        "../../envs/analysis.yaml"
    threads: 1
    resources:
        **analysis_resources(),
    shell:
        "python -m grpo_power.cli planner report --traces {params.traces:q} --fleet {params.fleet:q} "
        "--economics {params.economics:q} --out {params.out:q} --config {RESOLVED_CONFIG:q} > {log:q} 2>&1"


def planner_target(wildcards):
    """The planner's report and the import's stamp of the configured folder (a stamp missing:
    results/planner holds another folder's traces, so the import runs again, and every step
    after it); without a folder, a WorkflowError before any job runs (it imported "None")."""
    if CFG.planner.traces is None:
        raise WorkflowError(
            "planner.traces: no folder of traces configured; expected one, as in `snakemake "
            "--cores 2 planner --config planner='{traces: DIR}'`"
        )
    return [PLANNER.report / REPORT.page, *planner_stamp()]


rule planner:
    input:
        planner_target,
