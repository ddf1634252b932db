/**
 * @file version.h
 * @brief Compile-time and run-time version of libddp.
 *
 * The SOVERSION of libddp.so is DDP_VERSION_MAJOR. A function whose signature
 * has to change gets a new `_v2` name; the old one stays.
 */
#ifndef DDP_VERSION_H
#define DDP_VERSION_H

#include "ddp/ddp_export.h"

/** The version of libddp these headers are (semantic versioning: the ABI changes only with the major). */
#define DDP_VERSION_MAJOR 0
/** The minor version: functions added, nothing removed. */
#define DDP_VERSION_MINOR 1
/** The patch version: fixes only. */
#define DDP_VERSION_PATCH 0
/** major*10000 + minor*100 + patch */
#define DDP_VERSION_NUMBER \
  (DDP_VERSION_MAJOR * 10000 + DDP_VERSION_MINOR * 100 + DDP_VERSION_PATCH)

DDP_EXTERN_C_BEGIN

/** @return DDP_VERSION_NUMBER of the library actually loaded. */
DDP_API unsigned int ddp_version_number(void);

/** @return "major.minor.patch" of the library actually loaded (static, never NULL). */
DDP_API const char *ddp_version_string(void);

DDP_EXTERN_C_END

#endif /* DDP_VERSION_H */
