"""The live CPU tensor peak read from torch.profiler's memory records (measure.profile), where
the profiler missed a free: a block whose address is handed out again was freed in between."""

import json

from dpwise.measure.profile import peak_live_cpu_bytes


def _trace(tmp_path, records):
    """A Chrome trace of [memory] events: (bytes, address) each, in order, with the running
    total the profiler keeps (which a missed free never lowers)."""
    total, events = 0, []
    for ts, (size, address) in enumerate(records):
        total += size
        args = {"Bytes": size, "Addr": address, "Total Allocated": total, "Device Type": 0}
        events.append({"name": "[memory]", "ts": ts, "args": args})
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def test_a_block_freed_unseen_leaves_the_peak_when_its_address_is_reused(tmp_path):
    # gloo's copy of a gradient, 2 MB, four times at one address, its frees unrecorded
    copies = [(2_000_000, 0xA0)] * 4
    trace = _trace(tmp_path, [(1_000_000, 0x10), *copies, (-1_000_000, 0x10)])
    assert peak_live_cpu_bytes(trace) == 3_000_000  # the running total would say 9,000,000


def test_recorded_frees_and_blocks_from_before_recording_count_as_the_total_does(tmp_path):
    records = [(-500, 0x99), (4_000, 0x10), (8_000, 0x20), (-4_000, 0x10), (2_000, 0x10)]
    assert peak_live_cpu_bytes(_trace(tmp_path, records)) == 11_500  # -500 + 4,000 + 8,000
    assert peak_live_cpu_bytes(_trace(tmp_path, [(-500, 0x99)])) == 0
