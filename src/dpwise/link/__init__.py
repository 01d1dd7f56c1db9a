"""The link probe: collectives timed over message sizes, bandwidths and a latency/bandwidth fit.

``probe_link`` (dpwise.link.probe) measures inside an initialised process group; the arithmetic
and the fit (dpwise.link.fit) are pure functions.
"""
