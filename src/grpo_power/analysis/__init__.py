"""Analysis stages that work on files only (never torch, TRL, workload or control).

Modules:
    windows     exceedance by averaging window, per GPU and per run; per-run energy bins
    fleet       fleets built from per-run bins: peak demand, exceedance, oversubscription,
                and the scaling study to 100,000 simulated GPUs
    authority   which actuators move power on which deployment (the identify stage)
    evaluate    per-run metrics and arm-vs-arm comparisons with confidence intervals
    reference   the reference study's figures and published oversubscription results
"""
