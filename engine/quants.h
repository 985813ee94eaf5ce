/* Block formats to f32 and f16 (private to the engine). */
#ifndef ENGINE_QUANTS_H
#define ENGINE_QUANTS_H

#include <stddef.h>
#include <stdint.h>

/* IEEE half <-> float, exact for every half, round-to-nearest-even for float. */
float eng_f16_to_f32(uint16_t h);
uint16_t eng_f32_to_f16(float f);
float eng_bf16_to_f32(uint16_t h);

void eng_f16_to_f32_row(const uint16_t *src, float *dst, size_t n);
void eng_f32_to_f16_row(const float *src, uint16_t *dst, size_t n);

/* Dequantizes n elements (a whole number of blocks) of a ggml type.
 * Returns 0, or -EINVAL for an unknown type or a partial block. */
int eng_dequant_row_f32(uint32_t type, const void *src, float *dst, size_t n);
int eng_dequant_row_f16(uint32_t type, const void *src, uint16_t *dst, size_t n);

/* Quantizes (for the synthetic model writer and tests): F32, F16, BF16, Q8_0,
 * Q4_0, Q4_1, Q5_0, Q5_1, the K types, IQ4_NL, IQ4_XS and MXFP4 (-ENOTSUP
 * for another type). */
int eng_quant_row(uint32_t type, const float *src, void *dst, size_t n);

/* n elements (whole blocks) of MXFP4 as Q8_0 blocks holding the same
 * values (gpt-oss's experts, kept in 8 bits); 0, or -EINVAL. */
int eng_mxfp4_to_q8_0(const void *src, void *dst, size_t n);

#endif
