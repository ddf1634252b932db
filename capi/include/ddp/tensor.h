/**
 * @file tensor.h
 * @brief Tensors: n-dimensional arrays the collectives work on.
 *
 * A ::ddp_tensor is an opaque handle to a LibTorch tensor. It is either a
 * zero-copy view of the caller's memory (ddp_tensor_from_blob) or owned by
 * libddp (ddp_tensor_new, and every tensor a collective hands out).
 * Tensors are always contiguous.
 *
 * Threading: a tensor may move between threads; it is not for concurrent use.
 */
#ifndef DDP_TENSOR_H
#define DDP_TENSOR_H

#include "ddp/common.h"

DDP_EXTERN_C_BEGIN

/** A tensor handle (see the file's description); freed with ddp_tensor_free. */
typedef struct ddp_tensor ddp_tensor;

/**
 * Wraps caller memory as a CPU tensor without copying.
 *
 * @param[out] out   new reference; set to NULL on error.
 * @param data       the caller's memory, at least numel * ddp_dtype_size(dtype)
 *                   bytes, suitably aligned for @p dtype. It must outlive the
 *                   tensor handle and the works of the _async calls given it
 *                   (until their wait or free). Collectives read and write it in place
 *                   where libddp's shm backend performs them (on the calling
 *                   thread, or on its worker thread for a large or queued
 *                   _async call); where a backend works from threads that
 *                   libddp cannot stop (Gloo, and what shm hands to Gloo),
 *                   on a copy that libddp owns, which the wait copies back
 *                   once the work succeeded. So when a call returns (for an
 *                   _async call: its ddp_work_wait, or ddp_work_free),
 *                   whatever it returned, libddp no longer reads or writes
 *                   the memory: a failed call's shm collective has ended
 *                   before it returns, a freed one before the free returns,
 *                   and a Gloo collective still at work (a stopped peer that
 *                   resumes still sends) works on its copy.
 * @param dtype      element type.
 * @param shape      @p ndim sizes, each >= 0 (may be NULL when ndim == 0).
 * @param ndim       number of dimensions; 0 makes a scalar (one element).
 * @return DDP_OK, or DDP_E_INVALID_ARGUMENT (NULL data with elements, a
 *         negative size, an unknown dtype).
 */
DDP_API ddp_status ddp_tensor_from_blob(ddp_tensor **out, void *data, ddp_dtype dtype,
                                        const int64_t *shape, size_t ndim);

/**
 * Allocates a zero-filled tensor owned by libddp.
 *
 * @param[out] out   new reference; set to NULL on error.
 * @param dtype      element type.
 * @param shape      @p ndim sizes, each >= 0.
 * @param ndim       number of dimensions; 0 makes a scalar.
 * @param device     where the memory lives; DDP_DEVICE_CUDA needs a CUDA build
 *                   and device (DDP_E_UNSUPPORTED otherwise).
 * @return DDP_OK, DDP_E_INVALID_ARGUMENT, DDP_E_UNSUPPORTED or DDP_E_NOMEM.
 */
DDP_API ddp_status ddp_tensor_new(ddp_tensor **out, ddp_dtype dtype, const int64_t *shape,
                                  size_t ndim, ddp_device device);

/**
 * For C++ programs that use LibTorch themselves: a handle to an existing
 * at::Tensor (same storage and autograd identity, e.g. a module parameter).
 * libddp and the caller must use the same LibTorch.
 *
 * @param[out] out     new reference; NULL on error.
 * @param aten_tensor  address of an at::Tensor (const at::Tensor *); borrowed.
 */
DDP_API ddp_status ddp_tensor_from_aten(ddp_tensor **out, const void *aten_tensor);

/**
 * The reverse of ddp_tensor_from_aten: assigns the handle's tensor (same
 * storage and autograd identity, e.g. the output of ddp_strategy_batch_norm
 * with its gradient path) to an at::Tensor of the caller's. libddp and the
 * caller must use the same LibTorch.
 *
 * @param t          borrowed.
 * @param aten_out   address of the caller's at::Tensor (at::Tensor *), overwritten.
 * @return DDP_OK; DDP_E_INVALID_ARGUMENT for NULL or a handle that is not live.
 */
DDP_API ddp_status ddp_tensor_to_aten(const ddp_tensor *t, void *aten_out);

/**
 * A tensor over another framework's memory, without a copy, by DLPack: @p
 * dl_managed_tensor is dlpack.h's DLManagedTensor (the unversioned struct a
 * `__dlpack__()` capsule named "dltensor" holds, torch.utils.dlpack.to_dlpack
 * makes, and NumPy, JAX and DLPack.jl exchange): contiguous memory (as
 * every ddp_tensor), any dtype of ddp_dtype, CPU or CUDA. Unlike ddp_tensor_from_aten, the producer's
 * LibTorch version does not matter.
 *
 * @param dl_managed_tensor ownership passes to libddp on every return: its
 *        deleter runs when the last tensor sharing the memory is freed, or
 *        at once when it is refused.
 * @return DDP_OK; DDP_E_INVALID_ARGUMENT for NULL, a strided (not
 *         contiguous) tensor, or a dtype or device LibTorch cannot take
 *         (naming it); DDP_E_UNSUPPORTED for a dtype
 *         without a ddp_dtype (complex), naming it.
 */
DDP_API ddp_status ddp_tensor_from_dlpack(ddp_tensor **out, void *dl_managed_tensor);

/**
 * The reverse: a new DLManagedTensor sharing @p t's memory (its shape and
 * device), which the consumer (torch.from_dlpack, numpy.from_dlpack via a
 * capsule) owns and deletes once through its deleter. The memory stays
 * valid until then, even after @p t is freed.
 *
 * @param[out] dl_managed_tensor the new DLManagedTensor *.
 * @return DDP_OK; DDP_E_INVALID_ARGUMENT for NULL or a handle that is not live.
 */
DDP_API ddp_status ddp_tensor_to_dlpack(const ddp_tensor *t, void **dl_managed_tensor);

/**
 * @return the LibTorch version libddp was built against ("2.11.0"), static.
 *         The functions that take a LibTorch object's address
 *         (ddp_tensor_from_aten, ddp_optimizer_from_torch) read it as this
 *         LibTorch lays it out.
 */
DDP_API const char *ddp_torch_version(void);

/**
 * Whether objects of the caller's LibTorch can be handed to libddp by address:
 * the same major and minor version as ddp_torch_version() (LibTorch keeps
 * its C++ ABI within a minor release, not across). Call it once before
 * ddp_tensor_from_aten when the caller's LibTorch is not the one libddp
 * links (JavaCPP's presets, tch-rs): a mismatch is then a status, where an
 * object of another layout would be undefined behaviour. torch.hpp, the
 * Java binding and the Rust crate call it for you.
 *
 * @param caller_version the caller's LibTorch version, e.g. TORCH_VERSION
 *        from <torch/version.h>, or torch.__version__ ("2.11.0+cpu").
 * @return DDP_OK; DDP_E_UNSUPPORTED naming both versions;
 *         DDP_E_INVALID_ARGUMENT for NULL or text that is not a version.
 */
DDP_API ddp_status ddp_torch_check_version(const char *caller_version);

/** Frees the handle (and the memory if libddp owns it); NULL is accepted. */
DDP_API void ddp_tensor_free(ddp_tensor *t);

/**
 * @return the first element's address (borrowed, lives as long as @p t; device
 *         memory for CUDA tensors); NULL for NULL, a freed handle, or no elements.
 */
DDP_API void *ddp_tensor_data(const ddp_tensor *t);

/** @return number of dimensions, 0 for a scalar or an invalid handle. */
DDP_API size_t ddp_tensor_ndim(const ddp_tensor *t);

/**
 * @return the sizes, ddp_tensor_ndim(t) of them (borrowed, lives as long as
 *         @p t); NULL for a scalar or an invalid handle.
 */
DDP_API const int64_t *ddp_tensor_shape(const ddp_tensor *t);

/** @return the element type (DDP_FLOAT32 for an invalid handle). */
DDP_API ddp_dtype ddp_tensor_dtype(const ddp_tensor *t);

/** @return the number of elements (1 for a scalar, 0 for an invalid handle). */
DDP_API int64_t ddp_tensor_numel(const ddp_tensor *t);

/** @return the number of bytes of data (numel * element size). */
DDP_API size_t ddp_tensor_nbytes(const ddp_tensor *t);

/** @return the device the tensor lives on (CPU for an invalid handle). */
DDP_API ddp_device ddp_tensor_device(const ddp_tensor *t);

/**
 * Copies the tensor's elements (from any device) into host memory.
 *
 * @param t       the source.
 * @param dst     host memory of at least @p nbytes.
 * @param nbytes  must equal ddp_tensor_nbytes(t), else DDP_E_INVALID_ARGUMENT.
 */
DDP_API ddp_status ddp_tensor_copy_to(const ddp_tensor *t, void *dst, size_t nbytes);

/**
 * Copies host memory into the tensor's elements (on any device), e.g. to
 * fill a CUDA tensor. The tensor must be contiguous.
 *
 * @param t       the destination.
 * @param src     host memory of at least @p nbytes.
 * @param nbytes  must equal ddp_tensor_nbytes(t), else DDP_E_INVALID_ARGUMENT.
 */
DDP_API ddp_status ddp_tensor_copy_from(ddp_tensor *t, const void *src, size_t nbytes);

DDP_EXTERN_C_END

#endif /* DDP_TENSOR_H */
