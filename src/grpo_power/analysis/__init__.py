"""Analysis stages that work on files only (never torch, TRL, workload or control).

Modules:
    windows     exceedance by averaging window, per GPU and per run; per-run energy bins
    fleet       fleets built from per-run bins: peak demand, exceedance, oversubscription,
                and the scaling study to 100,000 simulated GPUs
    reference   the reference study's figures and published oversubscription results
    io          atomic writers shared by the stages
"""
