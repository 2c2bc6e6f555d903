"""The optional on-disk compile cache (GEMM_COURSE_COMPILE_CACHE): same artifacts, keyed by the sources."""

import pytest

from gemm_course.runtime import arch, ladder

pytestmark = pytest.mark.compile


def test_disk_cache_returns_what_a_compile_returns(tmp_path, monkeypatch):
    monkeypatch.setenv("GEMM_COURSE_COMPILE_CACHE", str(tmp_path))
    step = ladder.get("sm100/3")
    config = step.config(tile_n=128)
    arch.clear_cache()
    fresh = arch.compile_step(step, config, target="sm_100a")
    assert fresh.compiled is not None and len(list(tmp_path.iterdir())) == 2  # .json and .cubin
    arch.clear_cache()  # as another process would see it
    cached = arch.compile_step(step, config, target="sm_100a")
    assert cached.compiled is None  # artifacts only: nothing to launch
    assert (cached.ptx, cached.cubin, cached.dynamic_smem) == (fresh.ptx, fresh.cubin, fresh.dynamic_smem)
    other = arch.compile_step(step, step.config(tile_n=64), target="sm_100a")
    assert other.ptx != fresh.ptx and len(list(tmp_path.iterdir())) == 4


def test_key_depends_on_the_sources(monkeypatch, tmp_path):
    monkeypatch.setenv("GEMM_COURSE_COMPILE_CACHE", str(tmp_path))
    step = ladder.get("sm100/3")
    before = arch._disk_path(step, step.default, "sm_100a", "dynamic")
    arch._source_digest.cache_clear()
    monkeypatch.setattr(arch, "_source_digest", lambda: "an edited package")
    assert arch._disk_path(step, step.default, "sm_100a", "dynamic") != before
    monkeypatch.delenv("GEMM_COURSE_COMPILE_CACHE")
    assert arch._disk_path(step, step.default, "sm_100a", "dynamic") is None
