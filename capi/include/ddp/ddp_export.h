/**
 * @file ddp_export.h
 * @brief Symbol visibility for libddp's public API.
 *
 * libddp is built with hidden visibility and a linker version script; only
 * declarations marked DDP_API are exported.
 */
#ifndef DDP_EXPORT_H
#define DDP_EXPORT_H

#if defined(_WIN32)
#  if defined(DDP_BUILDING_LIBRARY)
#    define DDP_API __declspec(dllexport)
#  else
#    define DDP_API __declspec(dllimport)
#  endif
#elif defined(__GNUC__) && __GNUC__ >= 4
#  define DDP_API __attribute__((visibility("default")))
#else
#  define DDP_API
#endif

#ifdef __cplusplus
#  define DDP_EXTERN_C_BEGIN extern "C" {
#  define DDP_EXTERN_C_END }
#else
#  define DDP_EXTERN_C_BEGIN
#  define DDP_EXTERN_C_END
#endif

#endif /* DDP_EXPORT_H */
