"""Four hosts on one switch (network namespaces on a bridge, each host's link shaped): ddp across
them, one process each, trains like one process, and probe-link reads each link's rate. (ddp
across two hosts joined by one link is the schedulers' tests' and tune's two-host tests'.)"""

import json
import subprocess
import sys

import pytest

import netlab
from conftest import child_env, load_state, max_abs_diff
from helpers_train import train_here
from test_netns import PORT, REASON, RUN_LIMIT_S, STEPS, _train_args, needs_netns

RATE, RATE_BITS = "200mbit", 200e6


def _on_every_host(net: netlab.NetHosts, argv: list[str], meanwhile=lambda: None) -> str:
    """Run ``argv`` on every host at once, and ``meanwhile()`` here while they run; their
    outputs, joined (each must exit 0)."""
    nodes = [
        net.popen(side, argv, env=child_env(), stdout=subprocess.PIPE,
                  stderr=subprocess.STDOUT, text=True)
        for side in net.sides
    ]  # fmt: skip
    meanwhile()
    outputs = [node.communicate(timeout=RUN_LIMIT_S)[0] for node in nodes]
    for node, out in zip(nodes, outputs, strict=True):
        assert node.returncode == 0, out
    return "\n".join(outputs)


@needs_netns
@pytest.mark.slow
def test_four_hosts_train_like_one_process(tmp_path):
    assert REASON is None, REASON
    single = {}

    def train_single() -> None:  # here, while the hosts start (their rendezvous leaves cores idle)
        single.update(train_here(tmp_path / "single", epochs=1, max_steps=STEPS)[0])

    with netlab.NetHosts(4, rate=RATE) as net:
        endpoint = f"{net.addr['a']}:{PORT}"
        said = _on_every_host(net, _train_args(tmp_path / "mn", endpoint, 4), train_single)
    assert max_abs_diff(single, load_state(tmp_path / "mn" / "final.pt")) <= 1e-5
    workers = json.loads((tmp_path / "mn" / "metrics.json").read_text())["workers"]
    assert sorted(w["address"] for w in workers) == sorted(net.addr.values())
    assert all(f"({address})" in said for address in net.addr.values())  # the run names them
    for side in "bcd":  # each names where its rendezvous is and that it is not its own
        assert f"from {net.addr[side]} on {net.dev[side]}; another node hosts" in said
    assert netlab.leftovers(net.tag) == []


@needs_netns
@pytest.mark.slow
def test_probe_link_across_four_hosts_reads_each_links_rate(tmp_path):
    with netlab.NetHosts(4, rate=RATE) as net:
        probe = [sys.executable, "-m", "dpwise", "probe-link", "--nnodes", "4", "--nproc", "1",
                 "--rdzv-endpoint", f"{net.addr['a']}:{PORT}", "--max-bytes", "2MiB",
                 "--timeout", "60", "--out", str(tmp_path / "link.json")]  # fmt: skip
        _on_every_host(net, probe)
    link = json.loads((tmp_path / "link.json").read_text())
    largest = link["ops"]["all_reduce"]["points"][-1]
    assert link["world_size"] == 4 and largest["bytes"] >= 2 << 20
    # busbw (algbw × 2(n−1)/n) is each host's link rate: tbf lets nothing through faster than
    # its rate beyond one bucket (4 ms of traffic), and the ring keeps every link busy
    assert largest["busbw_bytes_per_s"] * 8 <= RATE_BITS * 1.03
    assert largest["busbw_bytes_per_s"] * 8 >= RATE_BITS * 0.5  # the links, not loopback
    assert netlab.leftovers(net.tag) == []
