"""Every public figure of ``gemm_course.viz``, drawn from inputs like the book's: the committed
records under results/ where a page draws those (the intro's ladder, the results page), models
and synthetic stand-ins for what a chapter reads from a compiled kernel. ``CASES`` maps a case
name to (figure function, speed mark, builder); tests/test_viz.py checks each case's legibility.
Kernels are never compiled here; the cases marked ``compile`` trace the kernels' CuTe layouts.
"""

from __future__ import annotations

from synthetic import bench_record, decode_record, write_runs

from gemm_course import viz
from gemm_course.kernels.sm100.layouts import PairShare, multicast_masks
from gemm_course.measure import bench
from gemm_course.measure import records as rec
from gemm_course.rules import tile_order
from gemm_course.runtime import ladder
from gemm_course.runtime.problem import GemmProblem
from gemm_course.teaching import chapter, exercises, sim


def _records(kind="bench"):
    return bench.load_records(kind=kind)


def ladder_intro(tmp_path):
    return viz.ladder_bars(_records(), arch="sm90")


def ladder_8192(tmp_path):
    return viz.ladder_bars(_records(), arch="sm90", shape=(8192, 8192, 8192))


def ladder_blackwell(tmp_path):
    return viz.ladder_bars(_records(), arch="sm100")


def ladder_chapter(tmp_path):
    return chapter.step_bars(_records(), [6, 7])


def ladder_live(tmp_path):
    recs = write_runs(tmp_path, {"a": [bench_record("sm90/1", 0.9, 700.0, "2030-01-01T00:00:00"),
                                   bench_record("sm90/2", 110.0, 720.0, "2030-01-01T00:00:01")],
                             "b": [bench_record("sm90/3", 500.0, 760.0, "2030-01-02T00:00:00")]})
    return viz.ladder_bars(recs, live=[bench_record("sm90/1", 0.95, 710.0, "2030-03-01T00:00:00")], highlight=(1,))


def sweep_ratios(tmp_path):
    return viz.sweep_ratios(_records())


def sweep_ratios_empty(tmp_path):
    return viz.sweep_ratios(write_runs(tmp_path, {}), "sm90/10")


def bandwidth_bars(tmp_path):
    shapes = rec.decode_shapes()
    return viz.bandwidth_bars([decode_record(s, 0.01 * (i + 1), 0.0095 * (i + 1), "2026-12-05") for i, s in enumerate(shapes)])


def bandwidth_bars_empty(tmp_path):
    return viz.bandwidth_bars(rec.decode_sweep(_records()))


def roofline_naive(tmp_path):
    h200 = viz.DATASHEET["H200"]
    problem = GemmProblem.square(4096)
    points = [{"label": "naive: every load from DRAM", "intensity": 0.5},
              {"label": "the GEMM, A/B/C moved once", "intensity": problem.arithmetic_intensity},
              {"label": "naive, measured on NVIDIA H200", "intensity": 0.5, "tflops": 0.92}]
    return viz.roofline(problem, h200["bf16_dense_tflops"], h200["hbm_tbs"], points,
                        machine_label=f"H200, {h200['source']}", ceilings={"fp32 FMA, no tensor cores": h200["fp32_tflops"]})


def roofline_results(tmp_path):
    """As the results page draws it: each step at its tile's intensity, labelled, cuBLAS a level."""
    records = _records()
    def intensity(c):  # FLOP per byte of A and B a CTA tile loads, B multicast over cluster_m
        return c["tile_m"] * c["tile_n"] / (c["tile_m"] + c["tile_n"] / c.get("cluster_m", 1))

    points = [{"label": f"step {number}", "intensity": intensity(r["config"]), "tflops": r["tflops"]["median"]}
              for number, r in rec.latest_per_step(records, "sm90", (4096, 4096, 4096)).items() if r is not None and number >= 2]
    return viz.roofline(GemmProblem(4096, 4096, 4096), 989, 4.8, points, machine_label="H200 datasheet",
                        ceilings={"at the sustained clock (71% of boost)": 989 * 0.71}, levels={"cuBLAS": 779.0},
                        annotate=True, x_label="FLOP per byte of A and B that a CTA tile loads",
                        title="Hopper steps 2-11 at 4096^3 (measured) by the intensity of their tiles, under the H200's roofs")


def roofline_primer(tmp_path):
    """The primer's: hollow tile points and long labels in the legend, under the axes."""
    problem = GemmProblem(4096, 4096, 4096)
    points = [{"label": "naive, every operand from DRAM", "intensity": 0.5}]
    points += [{"label": f"{bm}x{bn} tile, no reuse across tiles", "intensity": bm * bn / (bm + bn)}
               for bm, bn in [(64, 256), (128, 256), (256, 256)]]
    return viz.roofline(problem, 989, 4.8, points, machine_label="H200 datasheet",
                        title=f"A {problem.label} BF16 GEMM on the H200 roofline (datasheet figures, not measurements)")


def smem_traffic_bars(tmp_path):
    rows = {
        "128 x 256, two warpgroups (this kernel)": sim.smem_traffic(128, 256),
        "same, two 64 x 128 wgmma per warpgroup (mma_n = 128)": sim.smem_traffic(128, 256, 128),
        "ping-pong: 64 x 256 per warpgroup": sim.smem_traffic(64, 256),
        "ping-pong: 128 x 128 per warpgroup": sim.smem_traffic(128, 128),
        "192 x 192, three warpgroups (cuBLAS, large N)": sim.smem_traffic(192, 192),
        "192 x 256, three warpgroups": sim.smem_traffic(192, 256),
    }
    return viz.smem_traffic_bars(rows)


MIX = {"global load": 40, "global store": 8, "shared load": 0, "integer / address": 120, "FP32 FMA": 64,
       "conversion": 32, "branch / control": 18, "barrier / sync": 2, "tensor-core MMA": 0, "TMA copy": 0, "other": 30}


def instruction_mix(tmp_path):
    other = {k: v * 2 for k, v in MIX.items()}
    return viz.instruction_mix({"naive, sm_90a": MIX, "naive, sm_100a": other}, title="Naive kernel: static SASS instruction mix")


def opcode_families(tmp_path):
    families = {"global stores": ("STG",), "stmatrix": ("STSM",), "TMA stores": ("UTMASTG",),
                "TMA loads": ("UTMALDG",), "named barriers": ("BAR",), "bf16 packing": ("F2FP",)}
    a = {"STG.E": 64, "F2FP.BF16": 64, "UTMALDG.2D": 2, "BAR.SYNC": 1}
    b = {"STSM.16.M88.4": 16, "UTMASTG.2D": 8, "F2FP.BF16": 64, "UTMALDG.2D": 2, "BAR.SYNC": 9}
    return viz.opcode_families({"sm90/3 (154 registers)": a, "sm90/4 (168 registers)": b}, families,
                               title="Epilogue instructions in SASS: step 3 stores from registers, step 4 through shared memory")


def sweep(tmp_path):
    rows = []
    for step in ("sm90/2", "sm90/3"):
        for tile_n in (64, 128, 256):
            for tile_k in (32, 64):
                rows.append({"ok": True, "step": step, "target": "sm_90a", "label": f"tile_n={tile_n}, tile_k={tile_k}",
                             "registers": 40 + tile_n // 2, "smem_bytes": 2 * (64 + tile_n) * tile_k + 1024,
                             "spills": tile_n == 256 and tile_k == 64})
    rows.append({"ok": False, "step": "sm90/3", "target": "sm_90a", "label": "tile_n=512, tile_k=64", "reason": "no"})
    return viz.sweep(rows, title="Hopper steps 2 and 3: resources per configuration (compiled on this machine)")


def occupancy_bars(tmp_path):
    rows = {"step 3": sim.occupancy(154, 128, 33792), "step 4": sim.occupancy(168, 128, 51200),
            "step 5": sim.occupancy(168, 384, 200704, stages=4)}
    return viz.occupancy_bars(rows)


def register_split(tmp_path):
    return viz.register_split(168, 128, 40, 256, 232)


def _table(shape, stride, text):
    rows, cols = shape
    return {"text": text, "offsets": [[r * stride[0] + c * stride[1] for c in range(cols)] for r in range(rows)]}


def layout_grid(tmp_path):
    return viz.layout_grid(_table((4, 8), (8, 1), "(4,8):(8,1)"), highlight=[(2, 3)])


def layout_grid_wide(tmp_path):
    return viz.layout_grid(_table((8, 12), (12, 1), "(8,12):(12,1)"),
                           title="local_tile(t, (4, 4), (1, 2)) covers the outlined elements",
                           highlight=[(r, c) for r in range(4, 8) for c in range(8, 12)])


def _hopper_owners():
    thread = [[32 * (r // 16) + 4 * (r % 8) + (c % 8) // 2 for c in range(256)] for r in range(64)]
    value = [[(c // 8) * 4 + ((r % 16) // 8) * 2 + c % 2 for c in range(256)] for r in range(64)]
    return {"thread": thread, "value": value, "source": "From the step's wgmma accumulator fragment, traced."}


def ownership(tmp_path):
    return viz.ownership(_hopper_owners(), title="Hopper: wgmma m64n256k16 accumulator fragment (registers)")


def tmem_map(tmp_path):
    addresses = {(r, c): (32 * (r // 16) + r % 16, c) for r in range(64) for c in range(256)}
    return viz.tmem_map(addresses, title="Blackwell: where the 64 x 256 fp32 accumulator sits in tensor memory")


def bank_maps(tmp_path):
    return viz.bank_maps(("row-major", "sm90/2", "sm90/3"))


def xor_pattern(tmp_path):
    return viz.xor_pattern("sm90/3")


def xor_pattern_blackwell(tmp_path):
    return viz.xor_pattern("sm100/3")


def cluster_multicast(tmp_path):
    return viz.cluster_multicast(2, 1, 128, 256, 64)


def cluster_multicast_2x2(tmp_path):
    return viz.cluster_multicast(2, 2, 128, 256, 64)


def _pair_split():
    shares = {}
    for v in (0, 1):
        a = tuple((128 * v + r, k) for r in range(128) for k in range(64))
        b = tuple((128 * v + r, k) for r in range(128) for k in range(64))
        c = tuple((128 * v + r, col) for r in range(128) for col in range(256))
        tmem = tuple((r, col) for r in range(128) for col in range(256))
        shares[v] = PairShare(v, a, b, c, tmem)
    return shares


def cta_pair_split(tmp_path):
    return viz.cta_pair_split(_pair_split())


def multicast_mask_grid(tmp_path):
    return viz.multicast_mask_grid(multicast_masks(4, 1), 4, 1)


def k_loop_schedule_sm90(tmp_path):
    return viz.k_loop_schedule("sm90", 4, 2, 40960, mma_name="wgmma m64n256k16")


def k_loop_schedule_sm100(tmp_path):
    return viz.k_loop_schedule("sm100", 4, 2, 49152, mma_name="tcgen05.mma")


def epilogue_path(tmp_path):
    return viz.epilogue_path(64, 256, 64, 32, 2, 128, 16, 8)


def epilogue_path_tmem(tmp_path):
    return viz.epilogue_path(64, 256, 64, 32, 2, 128, 16, 8, tmem_load="16x256b")


def pipeline_timeline(tmp_path):
    models = {"sm90/5 (one stage, one role)": sim.pipeline_model(1, 8),
              "sm90/6 (warp-specialized)": sim.pipeline_model(4, 8)}
    return viz.pipeline_timeline(models)


def pipeline_timeline_tiles(tmp_path):
    models = {"step 6: 2 tiles as 2 CTAs": sim.pipeline_model(4, 8, tiles_per_cta=1, ctas=2),
              "step 7: 2 tiles in one CTA": sim.pipeline_model(4, 8, tiles_per_cta=2, ctas=1)}
    return viz.pipeline_timeline(models, title="Two output tiles on one SM (schematic model)")


def tmem_timeline(tmp_path):
    plans = {f"{n} accumulator{'s' if n > 1 else ''}": sim.tmem_plan([18.0] * 4, [3.0] * 4, n, 256) for n in (1, 2)}
    return viz.tmem_timeline(plans)


def launch_timeline(tmp_path):
    timelines = _records("timeline")
    newest = [r for r in timelines if r["_file"] == max(r["_file"] for r in timelines)]
    return viz.launch_timeline(newest)


def tile_orders(tmp_path):
    return viz.tile_orders(16, 16, kinds=("row", "grouped", "gilbert"), group=8, wave=66)


def tile_orders_small(tmp_path):
    return viz.tile_orders(4, 6, kinds=("row", "gilbert"), group=2, wave=5)


def tile_orders_rect(tmp_path):
    return viz.tile_orders(8, 13, kinds=("grouped", "gilbert"), group=8, wave=66)


def l2_panels(tmp_path):
    traffic = sim.compare_orders(32, 32, kinds=("row", "grouped", "gilbert"), group=8, sms=66, tile_m=256,
                                 tile_n=256, k=8192)
    return viz.l2_panels(traffic, title="L2 panel model at 8192^3 (waves of 66 cluster-tiles)")


def persistent_grid(tmp_path):
    schedule = exercises.step_schedule(ladder.get("sm90/8"), 4096, 4096)
    return viz.persistent_grid(schedule, title="Step 8 at 4096^3: the static schedule (row raster)")


def persistent_grid_small(tmp_path):
    return viz.persistent_grid(sim.persistent_schedule(4, 5, 6, tile_order.row_tile))


def stream_k_tail(tmp_path):
    return viz.stream_k_tail(1024, 66, 128, title="8192^3: 1024 cluster-tiles of 128 K tiles over 66 clusters")


def tile_choice_map(tmp_path):
    return viz.tile_choice_map()


def stream_k_tail_lockstep(tmp_path):
    return viz.stream_k_tail(512, 66, 448, title="8192 x 4096 x 28672, lockstep: 512 cluster-tiles of 448 K tiles "
                                                 "over 66 clusters")


def clc_timeline(tmp_path):
    return viz.clc_timeline(sim.clc_schedule(64, 16, policy="lowest", seed=0))


def dynamic_tail(tmp_path):
    return viz.dynamic_tail(19, 8, 64)  # as chapter 11 draws it


def cluster_placement(tmp_path):
    probes = rec.newest_run(_records("placement"))
    return viz.cluster_placement(probes[-1])


def power_limit_bars(tmp_path):
    return viz.power_limit_bars(_records("clocks"))


def order_energy(tmp_path):
    clock_records = _records("clocks")
    split = rec.power_limit_split(clock_records)
    files = {r["file"] for r in split if r["step"] == "sm90/8"}
    return viz.order_energy([r for r in clock_records if r["_file"] in files])


# name -> (figure function, mark, builder)
CASES = {name: (fn, mark, builder) for name, fn, mark, builder in [
    ("ladder_intro", "ladder_bars", "fast", ladder_intro),
    ("ladder_8192", "ladder_bars", "fast", ladder_8192),
    ("ladder_blackwell", "ladder_bars", "fast", ladder_blackwell),
    ("ladder_chapter", "ladder_bars", "fast", ladder_chapter),
    ("ladder_live", "ladder_bars", "fast", ladder_live),
    ("sweep_ratios", "sweep_ratios", "fast", sweep_ratios),
    ("sweep_ratios_empty", "sweep_ratios", "fast", sweep_ratios_empty),
    ("roofline_naive", "roofline", "fast", roofline_naive),
    ("bandwidth_bars", "bandwidth_bars", "fast", bandwidth_bars),
    ("bandwidth_bars_empty", "bandwidth_bars", "fast", bandwidth_bars_empty),
    ("roofline_results", "roofline", "fast", roofline_results),
    ("roofline_primer", "roofline", "fast", roofline_primer),
    ("smem_traffic_bars", "smem_traffic_bars", "fast", smem_traffic_bars),
    ("instruction_mix", "instruction_mix", "fast", instruction_mix),
    ("opcode_families", "opcode_families", "fast", opcode_families),
    ("sweep", "sweep", "fast", sweep),
    ("occupancy_bars", "occupancy_bars", "fast", occupancy_bars),
    ("register_split", "register_split", "fast", register_split),
    ("layout_grid", "layout_grid", "fast", layout_grid),
    ("layout_grid_wide", "layout_grid", "fast", layout_grid_wide),
    ("ownership", "ownership", "fast", ownership),
    ("tmem_map", "tmem_map", "fast", tmem_map),
    ("bank_maps", "bank_maps", "compile", bank_maps),
    ("xor_pattern", "xor_pattern", "compile", xor_pattern),
    ("xor_pattern_blackwell", "xor_pattern", "compile", xor_pattern_blackwell),
    ("cluster_multicast", "cluster_multicast", "fast", cluster_multicast),
    ("cluster_multicast_2x2", "cluster_multicast", "fast", cluster_multicast_2x2),
    ("cta_pair_split", "cta_pair_split", "fast", cta_pair_split),
    ("multicast_mask_grid", "multicast_mask_grid", "fast", multicast_mask_grid),
    ("k_loop_schedule_sm90", "k_loop_schedule", "fast", k_loop_schedule_sm90),
    ("k_loop_schedule_sm100", "k_loop_schedule", "fast", k_loop_schedule_sm100),
    ("epilogue_path", "epilogue_path", "fast", epilogue_path),
    ("epilogue_path_tmem", "epilogue_path", "fast", epilogue_path_tmem),
    ("pipeline_timeline", "pipeline_timeline", "fast", pipeline_timeline),
    ("pipeline_timeline_tiles", "pipeline_timeline", "fast", pipeline_timeline_tiles),
    ("tmem_timeline", "tmem_timeline", "fast", tmem_timeline),
    ("launch_timeline", "launch_timeline", "fast", launch_timeline),
    ("tile_orders", "tile_orders", "fast", tile_orders),
    ("tile_orders_small", "tile_orders", "fast", tile_orders_small),
    ("tile_orders_rect", "tile_orders", "fast", tile_orders_rect),
    ("l2_panels", "l2_panels", "fast", l2_panels),
    ("persistent_grid", "persistent_grid", "fast", persistent_grid),
    ("persistent_grid_small", "persistent_grid", "fast", persistent_grid_small),
    ("stream_k_tail", "stream_k_tail", "fast", stream_k_tail),
    ("stream_k_tail_lockstep", "stream_k_tail", "fast", stream_k_tail_lockstep),
    ("tile_choice_map", "tile_choice_map", "fast", tile_choice_map),
    ("clc_timeline", "clc_timeline", "fast", clc_timeline),
    ("dynamic_tail", "dynamic_tail", "fast", dynamic_tail),
    ("cluster_placement", "cluster_placement", "fast", cluster_placement),
    ("power_limit_bars", "power_limit_bars", "fast", power_limit_bars),
    ("order_energy", "order_energy", "fast", order_energy),
]}
