"""Comparing a batch with a baseline (`flower-batch compare`, `matrix --baseline`).

sides.py   a results.json (or a batch's) read back into per-job rows
stats.py   Newcombe's interval for a difference of proportions, Fisher's exact test
diff.py    BatchDiff: per cell, per variant, overall; the regression rule
render.py  the terminal table and the Markdown ($GITHUB_STEP_SUMMARY)
html.py    the comparison section of report.html
"""
