// Helpers shared by the single-process C API tests.
#pragma once

#include <ddp/ddp.h>

// True when a CUDA tensor can be made (a GPU and the NCCL/CUDA plugin).
inline bool have_cuda_device() {
  ddp_tensor* t = nullptr;
  int64_t one[1] = {1};
  ddp_device cuda = {DDP_DEVICE_CUDA, 0};
  bool ok = ddp_tensor_new(&t, DDP_FLOAT32, one, 1, cuda) == DDP_OK;
  ddp_tensor_free(t);
  return ok;
}

// A group of one rank on any free port (backend NULL: chosen by the device).
inline ddp_status single_rank_group(const char* backend, ddp_device device, ddp_group** g) {
  ddp_env* env = nullptr;
  ddp_env_new(&env, 0, 1, 0, 1, 0, "127.0.0.1", 0);
  ddp_group_options o = DDP_GROUP_OPTIONS_INIT;
  o.backend = backend;
  o.device = device;
  o.timeout_ms = 20000;
  ddp_status s = ddp_group_init(g, env, &o);
  ddp_env_free(env);
  return s;
}
