"""What the models count in: banks, wavefronts, chunks, the SMs and the tensor cores' rate."""

from ... import hardware

BANKS = 32
BANK_BYTES = 4
WAVEFRONT_BYTES = BANKS * BANK_BYTES  # 128
CHUNK_BYTES = 16  # one ldmatrix row / one TMA and swizzle unit
H100_SMS = hardware.H100_SXM.sms  # 132: H100 SXM and H200
SMEM_BYTES_PER_CLOCK = WAVEFRONT_BYTES  # one wavefront per clock per SM
TENSOR_FLOP_PER_CLOCK = 4096  # dense bf16 per SM and clock on Hopper: 989 TFLOP/s / (132 SMs x 1.83 GHz)
ROW_MAJOR = "row-major"  # a first attempt's layout: plain rows, no swizzle, no interleave
PATTERNS = ("core-matrix column", "row")
