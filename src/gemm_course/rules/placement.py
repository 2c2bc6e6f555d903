"""Where the GPU puts a clustered grid's CTAs, and a cluster order that follows it.

Hopper's L2 *request coalescer* merges loads of the same sector that SMs issue at nearly the
same time, but (as measured on the H200, NOTES.md) only between SMs of one GPC: the hardware
deals a grid's clusters out to the GPCs in turn, so clusters c and c + 1, which a tile order
gives neighbouring tiles, sit in different GPCs and never merge their loads. Probe launches
(GPU only, each once per process) find out which cluster lands in which GPC:

* the grid the persistent kernels launch (``clusters`` clusters, one CTA per SM): each
  cluster's SM id;
* clusters of 16 and of 8 CTAs, which the hardware must keep inside one GPC: which SMs share one.

``cluster_order`` turns that into a permutation of the cluster indices that gives each GPC's
clusters consecutive places in every wave of the tile order. It is a permutation whatever the
probes find, so a kernel that uses it computes every tile once even where the GPU places a
launch differently (another process on the GPU, say); only the merging would be lost.

``main`` writes the probes' record with :func:`gemm_course.measure.records.write_records`; nothing here
imports :mod:`gemm_course.measure.bench`. The Nsight Compute counters that show the coalescer at work are
``records.COALESCER_METRICS``.
"""

import functools
from typing import Dict, List, Sequence

PROBE_SMEM_BYTES = 200 * 1024  # one CTA per SM, as the persistent kernels
PROBE_SPIN = 20000  # iterations each probe CTA stays resident, so the whole grid is there at once
GPC_CLUSTERS = (16, 8)  # cluster sizes whose CTAs share a GPC (16 needs a non-portable size)


def gpc_groups(sms: int, same_gpc_runs: Sequence[Sequence[int]]) -> Dict[int, int]:
    """SM id -> group id: SMs that ran CTAs of one cluster share a GPC (union-find over every
    cluster seen). SMs never seen together with another get a group of their own."""
    parent = list(range(sms))

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for cluster in same_gpc_runs:
        for sm in cluster[1:]:
            parent[find(sm)] = find(cluster[0])
    roots = sorted({find(s) for s in range(sms)})
    return {s: roots.index(find(s)) for s in range(sms)}


def order_from_placement(cluster_sms: Sequence[int], group_of_sm: Dict[int, int]) -> List[int]:
    """Place of each cluster in a wave: clusters of one GPC take consecutive places (GPCs in the
    order their first cluster was launched; inside a GPC, by cluster index). Always a permutation
    of range(len(cluster_sms))."""
    first_seen: Dict[int, int] = {}
    for c, sm in enumerate(cluster_sms):
        first_seen.setdefault(group_of_sm.get(sm, -1 - c), c)
    ranked = sorted(range(len(cluster_sms)), key=lambda c: (first_seen[group_of_sm.get(cluster_sms[c], -1 - c)], c))
    place = [0] * len(cluster_sms)
    for p, c in enumerate(ranked):
        place[c] = p
    return place


def same_gpc_sets(runs: Sequence[dict]) -> List[List[int]]:
    """The SMs of each cluster in probe runs ({"cluster": size, "smid": [...]}) of a size in GPC_CLUSTERS."""
    return [run["smid"][i:i + run["cluster"]] for run in runs if run["cluster"] in GPC_CLUSTERS
            for i in range(0, len(run["smid"]), run["cluster"])]


def from_probe_record(record: dict, cluster_size: int = 2) -> dict:
    """From a probe record (``main``'s JSON): the grid's clusters' SMs, the SM groups and the places."""
    groups = gpc_groups(record["sms"], same_gpc_sets(record["runs"]))
    grid = max((r for r in record["runs"] if r["cluster"] == cluster_size), key=lambda r: r["ctas"])
    cluster_sms = grid["smid"][::cluster_size]
    return {"cluster_sms": cluster_sms, "groups": groups, "places": order_from_placement(cluster_sms, groups)}


# ---- the probes (GPU only) -------------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def _probe_launcher():
    import cutlass
    import cutlass.cute as cute

    @cute.kernel
    def record_sm(out: cute.Tensor):
        tidx, _, _ = cute.arch.thread_idx()
        bidx, _, _ = cute.arch.block_idx()
        if tidx == 0:
            out[bidx] = cute.arch.smid()
            for _ in cutlass.range(PROBE_SPIN, unroll=1):  # stay resident while the grid lands
                cute.arch.sync_warp()

    @cute.jit
    def launch(out: cute.Tensor, ctas: cutlass.Constexpr, cluster: cutlass.Constexpr):
        record_sm(out).launch(grid=[ctas, 1, 1], block=[32, 1, 1], cluster=[cluster, 1, 1], smem=PROBE_SMEM_BYTES)

    return launch


def probe(cluster: int, ctas: int) -> List[int]:
    """SM id of every CTA of one launch of ``ctas`` CTAs in clusters of ``cluster``."""
    import cutlass.cute as cute
    import torch
    from cutlass.cute.runtime import from_dlpack

    out = torch.full((ctas,), -1, dtype=torch.int32, device="cuda")
    launch = _probe_launcher()
    cute.compile(launch, from_dlpack(out), ctas, cluster)(from_dlpack(out))
    torch.cuda.synchronize()
    return out.tolist()


@functools.lru_cache(maxsize=None)
def measured_groups() -> Dict[int, int]:
    import torch

    sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    runs = []
    for size in GPC_CLUSTERS:
        try:
            runs.append({"cluster": size, "smid": probe(size, sms // size * size)})
        except Exception:  # a cluster size this GPU cannot launch
            continue
    return gpc_groups(sms, same_gpc_sets(runs))


@functools.lru_cache(maxsize=None)
def cluster_order(cluster_size: int, clusters: int) -> tuple:
    """Each cluster's place in a wave, for a grid of ``clusters`` clusters of ``cluster_size``."""
    smids = probe(cluster_size, clusters * cluster_size)
    return tuple(order_from_placement(smids[::cluster_size], measured_groups()))


def main(argv=None):
    """``python -m gemm_course.rules.placement [--out DIR]``: the probes' raw SM ids as a record of kind
    ``placement`` (``results/<gpu>/<date>_placement.json`` unless ``--out``)."""
    import argparse
    import datetime

    import torch

    from ..measure import records

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--out", default=None, help="folder for the record (default results/<gpu>/)")
    parser.add_argument("--cluster", type=int, nargs="+", default=[2, 4, 8, 16])
    args = parser.parse_args(argv)
    sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    runs = []
    for size in args.cluster:
        for ctas in sorted({sms // size * size, size * 8}):
            try:
                runs.append({"cluster": size, "ctas": ctas, "smid": probe(size, ctas)})
            except Exception as e:  # a cluster size this GPU cannot launch
                print(f"clusters of {size}: {type(e).__name__}: {str(e)[:200]}")
    record = {"schema": 1, "kind": "placement", "gpu": torch.cuda.get_device_name(), "sms": sms, "torch": torch.__version__,
              "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), "runs": runs,
              "command": "python3 -m gemm_course.rules.placement"}
    print("wrote", records.write_records([record], "placement", args.out))


if __name__ == "__main__":
    main()
