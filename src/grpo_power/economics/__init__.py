"""Economics (stage 7): what the measured and simulated power is worth.

    records           per-run energy, tokens and time, read from the run and evaluate stages
    carbon            location-based intensity from CodeCarbon's packaged data (offline)
    cost              energy cost, carbon and GPU time per million tokens; fleet-year savings
    oversubscription  extra GPUs in the same provisioned power, and the capital avoided
    pilot             the smallest real deployment that would confirm the gain and headroom
    sensitivity       the headline at the ends of each assumption's range
    stage             the stage: reads stage outputs, writes results/economics/

Works on files only; never imports torch or TRL.
"""
