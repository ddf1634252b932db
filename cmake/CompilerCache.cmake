# Compiles through ccache where it is installed; included by the main build
# and by the clang builds of fuzz/ and tests/tsan/ (which scripts/fuzz.sh and
# scripts/test_tsan.sh configure afresh in each clone). Set DDP_REPO_ROOT to
# the checkout's root before including it.
# pch_defines/time_macros: let ccache reuse objects built with a PCH.
# BASEDIR/NOHASHDIR: paths under the checkout are hashed relative to it, so
# another clone (CI's fresh one, a second worktree) reuses the objects.
find_program(DDP_CCACHE ccache)
if(DDP_CCACHE)
  get_filename_component(_ddp_cache_base "${DDP_REPO_ROOT}" ABSOLUTE)
  set(_ddp_launcher "${CMAKE_COMMAND}" -E env
      "CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime"
      "CCACHE_BASEDIR=${_ddp_cache_base}" "CCACHE_NOHASHDIR=1"
      "${DDP_CCACHE}")
  set(CMAKE_C_COMPILER_LAUNCHER ${_ddp_launcher})
  set(CMAKE_CXX_COMPILER_LAUNCHER ${_ddp_launcher})
endif()
