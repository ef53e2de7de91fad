"""Stands in for Theano, which takes its GPU when imported (THEANO_FLAGS=device=cuda): notes
each import in PROBE_MARKS/theano.log ("pid job|ahead": HPSEARCH_REPORTS is set only once the
process runs its job), so a test can tell whether any happened ahead of a job."""

import os

with open(os.path.join(os.environ["PROBE_MARKS"], "theano.log"), "a") as f:
    f.write(f"{os.getpid()} {'job' if os.environ.get('HPSEARCH_REPORTS') else 'ahead'}\n")
