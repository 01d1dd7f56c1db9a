"""Where the job runs: the schedulers' environments read in one place (torchrun and TorchX's
elastic workers, SLURM, Kubeflow's PyTorchJob, MPI, SkyPilot), the topology resolved from them
and the flags (flags win; every value says where it came from), and the worker variables a
process that the scheduler started per device takes on."""
