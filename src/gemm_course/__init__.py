"""gemm_course: the package behind the course "From a naive GEMM to speed of light in CuTeDSL".

Data flows ``problem -> ladder step + config -> arch.compile_step -> inspect | run/check/bench ->
records -> viz/widgets``. Import the pieces you need; nothing here imports CuTeDSL or torch at
package import time, so ``import gemm_course`` is cheap.
"""

__version__ = "0.1.0"
