"""The report (stage 8): publication figures and the HTML report, from stage outputs only.

    inputs   what the report reads: run folders, simulated runs, loaded into tidy frames
    figures  one seaborn style; every figure saved as PDF and PNG, simulated panels labelled
    tables   tables whose every number carries the file, row and column it came from
    html     rendering: escaped markup, traceable numbers, relative links, one page
    stage    the stage: draws the figures and writes results/report/index.html

Never imports torch or TRL.
"""
