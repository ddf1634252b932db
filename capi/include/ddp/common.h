/**
 * @file common.h
 * @brief Status codes, the thread-local error message, dtypes, devices and
 *        byte buffers shared by every part of the libddp C API.
 *
 * Error model: every fallible function returns a ::ddp_status. On failure the
 * calling thread's last error message says what was wrong (rank, operation,
 * sizes, the environment variable at fault) and what to do about it. Nothing
 * is ever thrown across the C boundary.
 */
#ifndef DDP_COMMON_H
#define DDP_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "ddp/ddp_export.h"

DDP_EXTERN_C_BEGIN

/** Result of every fallible call. DDP_OK is zero, errors are negative. */
typedef int32_t ddp_status;

enum {
  DDP_OK = 0,
  /** An argument was NULL, out of range, freed, or otherwise malformed. */
  DDP_E_INVALID_ARGUMENT = -1,
  /** Wrong call order, or a handle in a state that does not allow the call
   *  (for example a group that already saw a timeout or a dead peer). */
  DDP_E_STATE = -2,
  /** A blocking call ran past its timeout. */
  DDP_E_TIMEOUT = -3,
  /** A peer died or its connection broke. The group is unusable afterwards
   *  and must be freed. */
  DDP_E_PEER_FAILED = -4,
  /** The communication backend (Gloo, NCCL) reported an error. */
  DDP_E_BACKEND = -5,
  /** Out of memory. */
  DDP_E_NOMEM = -6,
  /** Not supported in this build or on this machine (e.g. NCCL without CUDA). */
  DDP_E_UNSUPPORTED = -7,
  /** An operating-system level I/O error (files, sockets, ports in use). */
  DDP_E_IO = -8,
  /** A bug in libddp; please report it with the message. */
  DDP_E_INTERNAL = -9,
  /** A worker process started by ddp_spawn exited with an error or was
   *  killed; the message lists every rank's exit code or signal and names
   *  the first failure as the root cause. */
  DDP_E_WORKER_FAILED = -10
};

/**
 * @return a static description of @p status ("ok", "invalid argument", ...);
 *         never NULL, also for unknown values.
 */
DDP_API const char *ddp_status_string(ddp_status status);

/**
 * @return the calling thread's last error message: borrowed, valid until the
 *         next libddp call on this thread; never NULL ("" when none).
 */
DDP_API const char *ddp_last_error_message(void);

/** Clears the calling thread's last error message. */
DDP_API void ddp_error_clear(void);

/**
 * Sets the calling thread's last error message: how code called by libddp
 * (a custom comm hook, a checkpoint_io or cluster callback, written in any
 * language) says why it failed. libddp adds it to the error it reports for
 * the callback's non-OK return, on every rank.
 * @param message copied; NULL clears it as ddp_error_clear does.
 */
DDP_API void ddp_error_set(const char *message);

/** Element types. libddp's own numbering, never c10's. */
typedef enum ddp_dtype {
  DDP_FLOAT32 = 0,
  DDP_FLOAT64 = 1,
  DDP_FLOAT16 = 2,
  DDP_BFLOAT16 = 3,
  DDP_INT8 = 4,
  DDP_UINT8 = 5,
  DDP_INT32 = 6,
  DDP_INT64 = 7,
  DDP_BOOL = 8,
  /* Makes the enum int-sized with every int value valid, so that C++ code
   * can receive any value a C caller passes and reject it cleanly. */
  DDP_DTYPE_FORCE_INT = 0x7fffffff
} ddp_dtype;

/** @return the size of one element of @p dtype in bytes, 0 for an unknown value. */
DDP_API size_t ddp_dtype_size(ddp_dtype dtype);

/** @return a static name ("float32", ...), "unknown" for an unknown value. */
DDP_API const char *ddp_dtype_name(ddp_dtype dtype);

/** Device kinds. */
typedef enum ddp_device_type {
  DDP_DEVICE_CPU = 0,
  DDP_DEVICE_CUDA = 1,
  DDP_DEVICE_TYPE_FORCE_INT = 0x7fffffff /* see DDP_DTYPE_FORCE_INT */
} ddp_device_type;

/** A device: its kind and, for CUDA, the device index (ignored for CPU). */
typedef struct ddp_device {
  ddp_device_type type; /**< CPU or CUDA */
  int index; /**< the CUDA device index; 0 for the CPU */
} ddp_device;

/** Initialiser for the CPU device. */
#define DDP_DEVICE_CPU_INIT {DDP_DEVICE_CPU, 0}

/**
 * A byte buffer owned by libddp (for example the payload of
 * ddp_broadcast_bytes). Threading: may move between threads, not for
 * concurrent use.
 */
typedef struct ddp_buffer ddp_buffer;

/** @return the buffer's bytes (borrowed, live as long as @p buf); NULL for NULL or empty. */
DDP_API const void *ddp_buffer_data(const ddp_buffer *buf);

/** @return the number of bytes in @p buf; 0 for NULL. */
DDP_API size_t ddp_buffer_size(const ddp_buffer *buf);

/** Frees @p buf; NULL is accepted. */
DDP_API void ddp_buffer_free(ddp_buffer *buf);

DDP_EXTERN_C_END

#endif /* DDP_COMMON_H */
