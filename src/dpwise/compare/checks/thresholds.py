"""Every threshold of the checks, the verdict, the claims and the report: one place, one story."""

from __future__ import annotations

# Speed: a run counts as faster than another only when the whole confidence interval of their
# paired throughput ratio lies beyond this practical margin (5 %).
SPEED_MARGIN = 1.05
# The confidence of that interval (distribution-free, for the median of the per-round ratios).
CONFIDENCE = 0.95
# A one-process run does single's work; beyond this margin it is a sign the set-up differs.
ONE_PROCESS_MARGIN = 1.10
# Communication: DDP's gradient sync counts as hidden behind compute while the exposed share of
# the step stays below this; at or above it the step is stalled by communication.
EXPOSED_SHARE_LIMIT = 0.25
# Scaling: keep this share of the ideal (GPUs: world size × single; one CPU: single's throughput).
SCALING_FLOOR = 0.70
# Memory: "DDP needs about half of DataParallel's memory" holds at or below this ratio.
HALF_MEMORY = 0.60
# Memory: "FSDP needs less memory per device than DDP" holds below this ratio of the peaks per
# process (FSDP / DDP, same world size): sharding the model state can only lower the peak, so
# any ratio under 1 is the documented saving seen; at or above 1 it was not seen.
FSDP_LESS_MEMORY = 1.0
# Communication bytes: all-reduced bytes within this share of the gradient bytes count as full.
BYTES_TOLERANCE = 0.05
# "DDP scales almost linearly": scaling efficiency at the largest world size at or above this.
NEAR_LINEAR = 0.85
# Contention: on a CPU a run of W processes can at most use min(W, cores) cores where single used
# at least one, so its speed-up cannot pass min(W, cores) × this margin (threads that gain little
# in single leave room for some of it); a one-process run cannot beat single beyond
# ONE_PROCESS_MARGIN. A figure past these is other processes' load, not the strategy.
CONTENTION_MARGIN = 1.25
