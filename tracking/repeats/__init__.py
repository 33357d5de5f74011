"""Repeats: what a calibration repeat or a candidate's extra run is, its identity, its planning, the kept ones
reused, the local and Ray runs, and keeping them; the calibrate stage, the candidate's extra runs, a team
script's calibration and the audit train their repeats here."""
