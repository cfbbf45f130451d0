"""``--ray nodes`` (grading/classroom/cluster.py): a Ray cluster of this machine made as a cloud's nodes make one, a
node per GPU with its share of the cores, for issue 59's comparison of one node with two. On the CPU: two nodes of
one core each, a grader on each, each node's processes on its own core, and nothing left running after close."""
import os

import pytest

ray = pytest.importorskip("ray")


def _raylets() -> list:
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        if "raylet" in cmd or "gcs_server" in cmd:
            out.append(cmd[:120])
    return out


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="two nodes need two cores")
def test_each_node_has_its_share_of_the_cores_and_a_grader(monkeypatch):
    from kernellab.grading.classroom import cluster
    before = _raylets()
    cores = sorted(os.sched_getaffinity(0))
    grader = cluster.RayGrader(cluster.NODES, jobs=2, init={"nodes": 2, "gpus": False})
    try:
        nodes = [n for n in ray.nodes() if n.get("Alive")]
        assert len(nodes) == 2 and all(n["Resources"].get("CPU") == len(cores) // 2 for n in nodes)
        assert len(grader.graders) == 2 and "nodes of this machine" in grader.describe()

        @ray.remote(num_cpus=0)  # each node's one core is its grader's
        def where():
            return ray.get_runtime_context().get_node_id(), sorted(os.sched_getaffinity(0))
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
        seen = ray.get([where.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False))
                        .remote() for n in nodes])
        assert {node for node, _ in seen} == {n["NodeID"] for n in nodes}
        share = len(cores) // 2
        assert sorted(c for _, mine in seen for c in mine) == cores[:2 * share]  # the cores split, none shared
        assert os.sched_getaffinity(0) == set(cores)  # the driver keeps every core
    finally:
        grader.close()
    assert not ray.is_initialized()
    assert _raylets() == before


@pytest.mark.parametrize("gpu_id, node_gpus", [("0", 1), ("1", 1), ("3", 2)])
def test_a_node_s_timed_cores_are_its_own_and_never_untimed(gpu_id, node_gpus):
    # A node made by --ray nodes on one host has one GPU whose Ray id is the machine's number ("1"): its timed
    # cores must come from its own share, apart from the cores its untimed grading runs on.
    from kernellab.grading.classroom import cluster
    from kernellab.grading.classroom.slots import GpuSlots
    slots = GpuSlots(1, visible=[gpu_id], first=cluster._gpu_index(gpu_id, node_gpus), node_gpus=node_gpus)
    slots.all_cores = set(range(16, 32))  # the node's share of a 32-core host
    timed, untimed = slots.cores(True), slots.cores(False)
    assert timed and timed <= slots.all_cores and not timed & untimed
    assert timed | untimed == slots.all_cores or node_gpus > 1
