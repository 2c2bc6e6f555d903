"""Every instruction the course names, as PTX, as SASS and as the CuTeDSL call that emits it.

The book's reference page prints :data:`INSTRUCTIONS`; ``tests/test_instructions.py`` compiles the
step each row names and checks that its PTX and its SASS really contain the row's instruction,
so the table cannot drift from the kernels.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Instruction:
    what: str  # in words
    ptx: str  # the PTX instruction (its leading part)
    sass: str  # the SASS opcode (its leading part) it becomes
    cutedsl: str  # what the course's code calls
    chapter: str  # the Sphinx label of the chapter that teaches it
    step: str  # a step whose compiled kernel has it


INSTRUCTIONS = (
    Instruction("TMA load of a tile into shared memory", "cp.async.bulk.tensor.2d.shared::cta.global", "UTMALDG",
                "cute.copy(tma_atom, ...) with cpasync.CopyBulkTensorTileG2SOp", "ch2", "sm90/2"),
    Instruction("TMA load written into several CTAs (multicast)",
                "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster",
                "UTMALDG.2D.MULTICAST", "CopyBulkTensorTileG2SMulticastOp, mcast_mask=", "ch5", "sm90/5"),
    Instruction("TMA load of one CTA of a pair, signalling the leader", ".cta_group::2", "UTMALDG.2D.MULTICAST.2CTA",
                "CopyBulkTensorTileG2SMulticastOp(tcgen05.CtaGroup.TWO)", "ch5-blackwell", "sm100/5"),
    Instruction("TMA store of a staging buffer", "cp.async.bulk.tensor.2d.global.shared::cta", "UTMASTG",
                "cute.copy(tma_atom_c, ...) with cpasync.CopyBulkTensorTileS2GOp", "ch4", "sm90/4"),
    Instruction("close a group of bulk stores", "cp.async.bulk.commit_group", "UTMACMDFLUSH",
                "pipeline.PipelineTmaStore.producer_commit", "ch4", "sm90/4"),
    Instruction("barrier: initialize with an arrival count", "mbarrier.init", "SYNCS.EXCH.64",
                "cute.arch.mbarrier_init, the pipelines' create", "ch2", "sm90/2"),
    Instruction("barrier: arrive and announce the bytes TMA will deliver", "mbarrier.arrive.expect_tx", "SYNCS.ARRIVE.TRANS64",
                "cute.arch.mbarrier_arrive_and_expect_tx, producer_acquire", "ch2", "sm90/2"),
    Instruction("barrier: wait for a phase", "mbarrier.try_wait", "SYNCS.PHASECHK.TRANS64.TRYWAIT",
                "cute.arch.mbarrier_wait, consumer_wait", "ch2", "sm90/2"),
    Instruction("warpgroup MMA from shared memory (Hopper)", "wgmma.mma_async", "HGMMA",
                "cute.gemm with a warpgroup MMA (sm90_utils.make_trivial_tiled_mma)", "ch2", "sm90/2"),
    Instruction("order register writes before wgmma reads them", "wgmma.fence", "WARPGROUP.ARRIVE", "warpgroup.fence()",
                "ch2", "sm90/2"),
    Instruction("wait until at most N wgmma groups are in flight", "wgmma.wait_group", "WARPGROUP.DEPBAR",
                "warpgroup.wait_group(N)", "ch6", "sm90/6"),
    Instruction("move registers between warpgroups", "setmaxnreg", "USETMAXREG",
                "cute.arch.setmaxregister_decrease / _increase", "ch6", "sm90/6"),
    Instruction("tensor-core MMA into tensor memory, one CTA (Blackwell)", "tcgen05.mma.cta_group::1", "UTCHMMA",
                "cute.gemm with tcgen05.MmaF16BF16Op(..., CtaGroup.ONE, ...)", "ch2", "sm100/2"),
    Instruction("one MMA over the two SMs of a CTA pair", "tcgen05.mma.cta_group::2", "UTCHMMA.2CTA",
                "tcgen05.MmaF16BF16Op(..., CtaGroup.TWO, ...)", "ch5-blackwell", "sm100/5"),
    Instruction("arrive on a barrier when the issued MMAs are done", "tcgen05.commit", "UTCBAR", "tcgen05.commit(barrier)",
                "ch2", "sm100/2"),
    Instruction("allocate tensor-memory columns", "tcgen05.alloc", "UTCATOMSWS", "TmemAllocator.allocate",
                "ch2-tmem-allocation", "sm100/2"),
    Instruction("read the accumulator from tensor memory", "tcgen05.ld", "LDTM", "tcgen05.make_tmem_copy, cute.copy",
                "ch2", "sm100/2"),
    Instruction("store 8 x 8 matrices of 16-bit values to shared memory", "stmatrix", "STSM",
                "cute.nvgpu.warp.StMatrix8x8x16bOp", "ch4", "sm90/4"),
    Instruction("order the threads' shared-memory writes before the copy engine reads", "fence.proxy.async.shared::cta",
                "FENCE.VIEW.ASYNC.S", 'cute.arch.fence_proxy("async.shared", space="cta")', "ch4", "sm90/4"),
    Instruction("cluster-wide barrier", "barrier.cluster.wait", "UCGABAR_WAIT",
                "cute.arch.cluster_arrive_relaxed / cluster_wait", "ch5", "sm90/5"),
    Instruction("named barrier among some warps", "bar.sync", "BAR.SYNC", "pipeline.NamedBarrier.arrive_and_wait",
                "ch4", "sm90/4"),
    Instruction("ask the hardware for a cluster that has not launched (Blackwell)", "clusterlaunchcontrol.try_cancel",
                "UGETNEXTWORKID", "cute.arch.issue_clc_query", "ch8-blackwell", "sm100/8"),
    Instruction("decode the answer", "clusterlaunchcontrol.query_cancel", "", "cute.arch.clc_response",
                "ch8-blackwell", "sm100/8"),
    Instruction("publish / read a hand-over flag across CTAs", "st.release.gpu", "STG.E.STRONG.GPU",
                'cute.arch.store(..., sem="release", scope="gpu")', "ch11", "sm90/11"),
)
