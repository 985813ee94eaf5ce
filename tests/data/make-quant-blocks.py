#!/usr/bin/env python3
"""Writes tests/data/quant-blocks.bin: random blocks of the block formats the
engine reads and their values as gguf-py (llama.cpp's Python package,
`pip install gguf`) dequantizes them, for test-gguf to compare with the
engine's dequantizers bit for bit. Every byte of a block is random except
its f16 scales, which are finite (random bytes there could be inf or NaN,
whose propagation says nothing about the layout). Seeded: running the
script again gives the same file.

    python3 tests/data/make-quant-blocks.py tests/data/quant-blocks.bin

Layout, little-endian: per record u32 ggml type, u32 block count n, then
n blocks of the type's bytes, then n * block_elems f32 values.
"""
import struct
import sys

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import quants

# (type, block bytes, offsets of its f16 scales)
FORMATS = [
    (T.Q4_0, 18, [0]), (T.Q4_1, 20, [0, 2]), (T.Q5_0, 22, [0]), (T.Q5_1, 24, [0, 2]),
    (T.Q8_0, 34, [0]), (T.Q2_K, 84, [80, 82]), (T.Q3_K, 110, [108]),
    (T.Q4_K, 144, [0, 2]), (T.Q5_K, 176, [0, 2]), (T.Q6_K, 210, [208]),
    (T.IQ4_NL, 18, [0]), (T.IQ4_XS, 136, [0]),
    (T.MXFP4, 17, []),  # its scale is a byte (E8M0): every value of it is a power of two
]
N_BLOCKS = 4


def main(out):
    rng = np.random.default_rng(20261202)
    with open(out, "wb") as f:
        for qtype, nbytes, scales in FORMATS:
            blocks = rng.integers(0, 256, size=(N_BLOCKS, nbytes), dtype=np.uint8)
            for b in range(N_BLOCKS):
                for off in scales:
                    # magnitudes from subnormal to large, both signs
                    v = np.float16(rng.choice([-1, 1]) * 10.0 ** rng.uniform(-7, 2))
                    blocks[b, off:off + 2] = np.frombuffer(v.tobytes(), dtype=np.uint8)
            values = quants.dequantize(blocks.reshape(-1), qtype).astype("<f4").reshape(-1)
            f.write(struct.pack("<II", int(qtype), N_BLOCKS))
            f.write(blocks.tobytes())
            f.write(values.tobytes())


if __name__ == "__main__":
    main(sys.argv[1])
