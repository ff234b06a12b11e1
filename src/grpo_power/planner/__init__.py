"""Planner mode: a folder of power traces to fleet, economics and a report, with no GRPO run.

    settings   the ``planner`` config section (which folder, the logs' time zone)
    discover   find the traces in a folder (nvidia-smi CSV, DCGM CSV, Parquet, trace CSV)
               and import them into one folder of traces
    fleet      the fleet made of those traces (the fleet stage on their windows)
    economics  energy, cost, carbon and oversubscription value of the traces
    report     the planner's HTML page and figures
    stage      all of it in one call (``grpo-power planner run``)
    cli        the ``grpo-power planner`` commands

Never imports torch or TRL.
"""
