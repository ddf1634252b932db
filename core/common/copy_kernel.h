// The byte copy for large buffers: every piece that goes into or out of a
// shared-memory slot, and every bucket copied back into the gradients.
//
// glibc's memcpy moves blocks from 2 KiB up to its non-temporal threshold
// with `rep movsb`. On the AMD EPYC VMs we measure on, that ran 5x slower
// than a vector loop between a rank's buffers and a slot another core had
// just written (bench/run_shm_vs_mpi.sh, 2 ranks, 1-64 MiB: 740 us vs
// 144 us at 1 MiB with GLIBC_TUNABLES raising rep_movsb_threshold). The
// copy here never uses it.
#pragma once

#include <cstddef>

namespace ddp::core {

void copy_bytes(void* dst, const void* src, size_t n);
void copy_bytes_streaming(void* dst, const void* src, size_t n);

// Whether this CPU runs AVX2, asked once: the copy and scale loops here and
// the shared-memory reductions pick their AVX2 twins by it.
bool cpu_has_avx2();

// dst[i] = src[i] * factor: how PyTorch's reducer averages a gradient on
// its way into the bucket (the float factor is 1/world rounded to float),
// here and wherever libddp does the same, so that the bits agree. dst may
// be src.
void copy_scaled(float* dst, const float* src, size_t n, float factor);
void copy_scaled(double* dst, const double* src, size_t n, double factor);

}  // namespace ddp::core
