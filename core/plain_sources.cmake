# The sources of core's LibTorch-free libraries, in one place: core's own
# build (core/CMakeLists.txt) makes them libraries; the clang builds of the
# fuzz targets (fuzz/) and the TSan stress program (tests/tsan/) compile
# them with their sanitizers. A source added here reaches all three, where
# lists kept by hand in each once broke the other two's links.
set(_core "${CMAKE_CURRENT_LIST_DIR}")

# Cluster environments.
set(DDP_ENV_SOURCES
  ${_core}/env/env_vars.cpp
  ${_core}/env/detect.cpp
  ${_core}/env/torchelastic_env.cpp
  ${_core}/env/slurm_env.cpp
  ${_core}/env/lsf_env.cpp
  ${_core}/env/mpi_env.cpp
  ${_core}/env/lightning_env.cpp
  ${_core}/env/kubeflow_env.cpp)

# Process launching: the supervisor, spawn, the workers' environment.
set(DDP_LAUNCH_SOURCES
  ${_core}/launch/supervisor.cpp
  ${_core}/launch/waitable_children.cpp
  ${_core}/launch/spawn.cpp
  ${_core}/launch/worker_env.cpp)

# The store: the meeting protocol, c10d TCPStore's wire server and client,
# and what keeps their sockets (and Gloo's) from the ranks' children.
set(DDP_STORE_SOURCES
  ${_core}/store/meeting.cpp
  ${_core}/store/wire_server.cpp
  ${_core}/store/wire_client.cpp
  ${_core}/common/kept_from_children.cpp)

# The flight recorder and the reading of its dumps.
set(DDP_DEBUG_SOURCES
  ${_core}/debug/flight_recorder.cpp
  ${_core}/debug/flight_analysis.cpp)
unset(_core)
