import pytest


def _gpu_target():
    try:
        from gemm_course.arch import machine

        return machine().target
    except Exception:
        return None


def pytest_collection_modifyitems(config, items):
    if _gpu_target():
        return
    skip = pytest.mark.skip(reason="needs a GPU with a course target (sm_90a or sm_100a)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
