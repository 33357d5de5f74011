"""Sweeps: the candidates of many experiments judged as one family against one calibration (`tracking sweep`).

`members.py` finds a sweep's candidate runs in the store and reads their values and their band; `confirmation.py`
re-trains the selected best on fresh seeds through the candidate repeats' machinery; `page.py` writes the report,
the expected-best plot and the sweep's MLflow parent run; `family.py` puts them together. The statistics are
`tracking.noise.sweep`'s and `tracking.noise.selection`'s, which know nothing of runs.
"""
