"""Owns: the scaling projection: link presets with their sources, the torch-free model, what a
comparison measured, results.json's section, advise's sentence.
May import: results, infra, errors
Imported by: advise, compare

Scaling projection: what ddp (and fsdp, with a stated upper bound) would give at 2…1024
devices over a link, from what `dpwise compare` measured on this machine.

The API (what the validation bench and advise call):

- ``inputs_from_results(results_json_dict) -> Inputs`` (``projection.inputs``): the ddp run at
  the largest world size ≥ 2: its step under no_sync (the per-device compute), gradient bytes,
  the buckets DDP launched (``communication["buckets"]``: bytes and ms before the last launch);
  raises ``NoInputs`` (a DpwiseError) saying why when there is none.
- ``link_from_probe(probe_dict) -> Link`` (``projection.links``): the all-reduce fit (α, β) of a
  link probe (results.json's "link_probe" or the JSON of ``dpwise probe-link``).
- ``PRESETS[name] -> Link`` and ``custom("12.5GB/s@5us", flag) -> Link``: named links with their
  published source, and a link written on the command line.
- ``project_ddp(inputs, link, n) -> Point`` (``projection.model``): projected step, exposed
  communication, samples/s and efficiency at ``n`` devices; ``project_fsdp`` likewise (no
  overlap assumed, an upper bound); ``ring_all_reduce_ms(nbytes, n, link)``.
- ``build(results, link_names, devices, probe=None) -> dict`` (``projection.section``): the
  "projection" section of results.json.

Nothing is imported here: ``dpwise.projection.links`` and ``.model`` stay free of torch (the
command line builds its help from them before torch is imported).
"""
