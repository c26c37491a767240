"""GPU leaves, tested under numba's CUDA simulator (no GPU here), and batches sized by
measured rate."""

import os
import subprocess
import sys

import programs
import pytest

import dac
from stealing.tree.placement import plan_topology, steal_params
from stealing.tree.topology import Cluster, Host, Topology, parse_topology

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples")

KERNEL_CHECK = r"""
import sys
sys.path.insert(0, {examples!r})
import numpy as np
from nqueens_gpu import count_batch
from nqueens_kernels import children, count_from
for n in range(4, 11):
    boards = [b for c in children(n, 0, 0, 0) for b in children(n, *c)] or [(0, 0, 0)]
    a = np.array(boards, dtype=np.int64).reshape(-1, 3)
    got = count_batch(np.full(len(a), n), a[:, 0], a[:, 1], a[:, 2]).tolist()
    want = [int(count_from(n, *map(int, b))) for b in a]
    assert got == want, (n, got, want)
    print(n, sum(got))
"""


def test_gpu_kernel_matches_the_cpu_leaf_for_n_4_to_10():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    res = subprocess.run([sys.executable, "-c", KERNEL_CHECK.format(examples=EXAMPLES)],
                         capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    counts = {int(a): int(b) for a, b in (line.split() for line in res.stdout.split("\n")
                                            if line.strip())}
    assert counts == {n: programs.QUEENS[n] for n in range(4, 11)}


def test_mixed_run_with_a_simulated_gpu_leaf():
    cuda_before = "numba.cuda" in sys.modules
    report = dac.run_report(programs.queens_gpu, 9, 0, 0, 0, procs=1, gpus=1,
                            gpu_simulate=True, depth=3, root_helps=False)
    assert report.result == programs.QUEENS[9]
    leaves = [p for p in report.stats["processes"] if p["role"] == "leaf"]
    gpu = [p for p in leaves if p.get("device", -1) == 0]
    cpu = [p for p in leaves if p.get("device", -1) < 0]
    assert len(gpu) == 1 and len(cpu) == 1
    assert gpu[0]["tasks"] > 0 and cpu[0]["tasks"] > 0
    assert gpu[0]["tasks"] + cpu[0]["tasks"] == report.stats["tasks"]
    # batches are sized by each leaf's own measured rate
    assert gpu[0]["largest_batch"] != cpu[0]["largest_batch"]
    # the root never loads CUDA (only leaves may hold a CUDA context)
    assert ("numba.cuda" in sys.modules) == cuda_before


def test_a_gpu_topology_without_a_gpu_says_so():
    with pytest.raises(dac.ProcessError) as info:
        dac.run(programs.queens_gpu, 6, 0, 0, 0, procs=1, gpus=1, depth=2)
    err = info.value
    assert err.type_name == "GPUUnavailable" and err.role == "leaf"
    assert err.doing == "starting CUDA on GPU 0"
    assert "has no usable CUDA GPU for GPU leaf 0" in str(err)
    assert "--gpu-simulate" in str(err)
    assert dac.run(programs.fib, 12, procs=1) == 144       # the next run works


def test_gpu_hosts_get_one_pinned_leaf_per_gpu():
    topo = parse_topology({"clusters": [{"name": "g", "hosts": [
        {"name": "a", "slots": 2, "gpus": 2}, {"name": "b", "slots": 1}]}]})
    assert topo.procs == 5 and topo.slots == 3
    tree = plan_topology(topo, steal_params(topo), "root")
    assert [(leaf.host, leaf.device) for leaf in tree.leaves()] == \
        [("a", -1), ("a", -1), ("a", 0), ("a", 1), ("b", -1)]
    assert "gpu=1" in tree.render()


def test_cli_runs_a_gpu_topology_simulated(tmp_path):
    topo = tmp_path / "gpu.toml"
    topo.write_text('[[clusters]]\nname = "g"\nhosts = [{ name = "gpuhost", slots = 1, '
                    'gpus = 1 }]\n')
    cmd = [sys.executable, "-c", "import sys; from launcher.cli import main; "
           "sys.exit(main())", "run", "--topology", str(topo), "--local",
           "--gpu-simulate", "examples/nqueens.py", "8", "--depth", "3"]
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "8-queens: 92 solutions" in res.stdout
    assert "\ngpu0 " in res.stdout


@pytest.mark.parametrize("batch", ["rate"])
def test_rate_sized_batches_split_work_by_speed(batch):
    # one host 5x slower: tasks split ~5:1 and both leaves finish together
    topo = Topology([Cluster("c", [Host("fast", 1), Host("slow", 1, slowdown=5.0)])])
    report = dac.run_report(programs.range_sum, 0, 1024, 0.002, topology=topo.localized(),
                            depth=10, batch=batch, root_helps=False)
    assert report.result == sum(range(1024))
    leaves = [p for p in report.stats["processes"] if p["role"] == "leaf"]
    fast, slow = sorted(leaves, key=lambda p: -p["tasks"])
    ratio = fast["tasks"] / slow["tasks"]
    assert 5 * 0.85 <= ratio <= 5 * 1.15, (fast["tasks"], slow["tasks"])
    assert abs(fast["busy_s"] - slow["busy_s"]) <= 0.15 * max(fast["busy_s"],
                                                             slow["busy_s"])
    assert fast["largest_batch"] > slow["largest_batch"]


def test_a_real_gpu_leaf_doubles_its_batch_until_a_batch_takes_half_a_second():
    from stealing.roles.gpu import GPU_BATCH_S, GPU_MAX_BATCH, GPU_MIN_BATCH, next_gpu_batch
    size, sizes = GPU_MIN_BATCH, []
    # a device that takes 0.4 s a launch until it is full at 40,000 boards, then
    # grows linearly: the floor doubles while launches stay short, then holds
    for _ in range(10):
        spent = 0.1 * max(1.0, size / 40_000) * 4
        size = next_gpu_batch(size, size, spent)
        sizes.append(size)
    assert sizes[:4] == [4096, 8192, 16384, 32768]
    assert sizes[4:] == [65536] * 6             # 65,536 boards take 0.66 s > 0.5
    assert 0.4 * 65536 / 40_000 >= GPU_BATCH_S
    # a batch that came short of the ask (the parent had less) does not double it
    assert next_gpu_batch(8192, 5000, 0.01) == 8192
    assert next_gpu_batch(GPU_MAX_BATCH, GPU_MAX_BATCH, 0.01) == GPU_MAX_BATCH


def test_a_gpu_batch_is_split_into_deeper_boards_whose_counts_sum_back():
    import numpy as np
    from nqueens_kernels import children, count_from, split_boards
    for n, depth, fill in ((8, 2, 100), (11, 2, 2000), (5, 4, 50), (4, 3, 10)):
        boards = [(0, 0, 0)]
        for _ in range(depth):
            boards = [c for b in boards for c in children(n, *b)]
        a = np.array(boards, dtype=np.int64).reshape(-1, 3)
        nn, cols, d1, d2, owner = split_boards(np.full(len(a), n), a[:, 0].copy(),
                                               a[:, 1].copy(), a[:, 2].copy(), fill)
        # deep enough, unless the boards run out of children (n = 4, 5: complete
        # boards stay, dead ends go)
        assert owner.size >= fill or n <= 5, (n, owner.size)
        assert (nn == n).all() and np.all(np.diff(owner) >= 0)
        sums = np.zeros(len(a), np.int64)
        np.add.at(sums, owner, [count_from(n, int(c), int(x), int(y))
                                for c, x, y in zip(cols, d1, d2)])
        assert sums.tolist() == [count_from(n, *map(int, b)) for b in a]
        assert int(sums.sum()) == programs.QUEENS[n]
