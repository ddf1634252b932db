/**
 * @file ddp.h
 * @brief libddp: PyTorch Lightning's distributed-data-parallel layer for C.
 *
 * Include this one header to get the whole public API.
 */
#ifndef DDP_DDP_H
#define DDP_DDP_H

#include "ddp/ddp_export.h"
#include "ddp/version.h"
#include "ddp/common.h"
#include "ddp/tensor.h"
#include "ddp/ops.h"
#include "ddp/seed.h"
#include "ddp/env.h"
#include "ddp/group.h"
#include "ddp/collectives.h"
#include "ddp/launch.h"
#include "ddp/comm_hook.h"
#include "ddp/model_averager.h"
#include "ddp/reducer.h"
#include "ddp/sampler.h"
#include "ddp/model.h"
#include "ddp/strategy.h"
#include "ddp/metric.h"

#endif /* DDP_DDP_H */
