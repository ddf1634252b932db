/**
 * @file launch.h
 * @brief Running a function in N local worker processes (Lightning's
 *        DDPSpawnStrategy.spawn and DDPStrategy's start methods).
 *
 * ddp_spawn starts `nprocs` workers on this machine, each with a
 * TorchElastic-style environment (MASTER_ADDR, MASTER_PORT, WORLD_SIZE,
 * RANK, LOCAL_RANK, LOCAL_WORLD_SIZE, NODE_RANK, GROUP_RANK, and
 * OMP_NUM_THREADS=1 unless already set), so that ddp_env_detect and
 * ddp_group_init(NULL env) in the worker join the job. MASTER_PORT is bound
 * once by the launcher and the listening socket handed to rank 0's store:
 * no other process can take the port between choosing and using it.
 *
 * Start methods:
 *  - DDP_START_POPEN (default): re-executes the current program (same
 *    binary, same argv, the current working directory). In the worker the
 *    program runs from main() again and reaches the same ddp_spawn call,
 *    which then runs @p fn and exits the process with its return code.
 *    Safe whatever threads the parent has. Code before the call runs again
 *    in every worker; an earlier ddp_spawn call returns DDP_OK at once there
 *    (with *rank0_result = NULL), so a program may call ddp_spawn several times.
 *  - DDP_START_FORK: forks; @p fn runs in the copy of the caller. Only for
 *    processes with a single thread: refused with DDP_E_STATE otherwise.
 *
 * Supervision: the first worker to fail (non-zero return, a signal) is the
 * root cause; the others get SIGTERM, then SIGKILL after a grace period.
 * Workers die with the launcher (PR_SET_PDEATHSIG). Nothing is left running.
 *
 * SIGCHLD: where the program ignores it (SIG_IGN or SA_NOCLDWAIT, as a
 * parent's SIG_IGN survives exec), it has its default action while the call
 * waits, and the program's is put back after, with the program's own
 * children that ended meanwhile reaped as the kernel would have. A
 * SIGCHLD handler of the program's that reaps every child (waitpid(-1))
 * takes the workers' statuses: the call then ends with
 * DDP_E_WORKER_FAILED saying so; have it wait for its own children by pid.
 */
#ifndef DDP_LAUNCH_H
#define DDP_LAUNCH_H

#include "ddp/common.h"

DDP_EXTERN_C_BEGIN

/** How ddp_spawn starts its workers. */
typedef enum ddp_start_method {
  DDP_START_POPEN = 0,
  DDP_START_FORK = 1,
  DDP_START_METHOD_FORCE_INT = 0x7fffffff /* see DDP_DTYPE_FORCE_INT */
} ddp_start_method;

/** A worker's view of its job, valid during the worker function. Not for concurrent use. */
typedef struct ddp_worker ddp_worker;

/**
 * The function ddp_spawn runs in every worker.
 * @param worker    the worker's context (borrowed, valid during the call).
 * @param arg       the bytes given to ddp_spawn (borrowed, valid during the call).
 * @param arg_len   their length.
 * @return 0 on success; anything else makes the job fail with this exit code.
 */
typedef int (*ddp_worker_fn)(ddp_worker *worker, const void *arg, size_t arg_len);

/** The version of ::ddp_spawn_options this header declares (its first field; the _INIT macro sets it). */
#define DDP_SPAWN_OPTIONS_VERSION 1

/** Options of ddp_spawn. Initialise with DDP_SPAWN_OPTIONS_INIT or ddp_spawn_options_init. */
typedef struct ddp_spawn_options {
  unsigned int version;          /**< DDP_SPAWN_OPTIONS_VERSION */
  int nprocs;                    /**< number of workers (>= 1) */
  ddp_start_method start_method; /**< DDP_START_POPEN */
  const char *master_addr;       /**< NULL: "127.0.0.1" */
  int master_port;               /**< 0: a free port */
  int64_t timeout_ms;            /**< whole job; 0: no limit (DDP_E_TIMEOUT when exceeded); at most 3e12 (about 95 years) */
  int64_t grace_ms;              /**< SIGTERM -> SIGKILL after a failure; 0: 5000; at most 2^31 - 1 */
} ddp_spawn_options;

/** An initialiser of ::ddp_spawn_options with the defaults: `ddp_spawn_options o = DDP_SPAWN_OPTIONS_INIT;` */
#define DDP_SPAWN_OPTIONS_INIT {DDP_SPAWN_OPTIONS_VERSION, 1, DDP_START_POPEN, NULL, 0, 0, 0}

/** Fills @p opts with the defaults of @p version (DDP_E_INVALID_ARGUMENT for an unknown one). */
DDP_API ddp_status ddp_spawn_options_init(ddp_spawn_options *opts, unsigned int version);

/**
 * Runs @p fn in opts->nprocs worker processes and waits for all of them.
 *
 * @param opts          NULL: one worker, popen.
 * @param fn            the worker function.
 * @param arg           bytes handed to every worker (copied; may be NULL when arg_len is 0).
 * @param arg_len       their length.
 * @param[out] rank0_result  may be NULL. On success, a new reference to the
 *                      bytes rank 0 passed to ddp_worker_set_result, or NULL
 *                      when it set none. NULL on error.
 * The argument and rank 0's result pass through files in a directory of
 * the call's own under ${TMPDIR:-/tmp}, removed before the call returns.
 *
 * A popen worker runs the program's main again, with its arguments and
 * from the directory the program started in (where libddp was loaded), so
 * that main's relative paths and chdir calls mean what they meant; the call
 * it belongs to runs fn there and does not return, the program's earlier
 * calls return DDP_OK at once. A popen worker whose main ends before
 * the call (a program read from standard input or typed at an interpreter's
 * prompt) fails the job (DDP_E_WORKER_FAILED saying so) rather than
 * counting as done. Workers read /dev/null, as Python's multiprocessing
 * gives its workers. Only the processes a call started are its workers: a
 * program that a worker runs (and so inherits its environment) starts a
 * job of its own. Inside fn, ddp_spawn starts a nested job with
 * DDP_START_FORK; with DDP_START_POPEN it is DDP_E_STATE, as its workers
 * would run main again and never reach the call.
 *
 * @return DDP_OK; DDP_E_WORKER_FAILED (the message lists every rank's exit
 *         code or signal and the root cause); DDP_E_TIMEOUT; DDP_E_STATE (fork
 *         with threads, popen inside a worker); DDP_E_IO (cannot bind
 *         master_port, e.g. in use, or cannot write the call's files: the
 *         message names them); DDP_E_INVALID_ARGUMENT.
 */
DDP_API ddp_status ddp_spawn(const ddp_spawn_options *opts, ddp_worker_fn fn, const void *arg,
                             size_t arg_len, ddp_buffer **rank0_result);

/** @return the worker's global rank, -1 for NULL. */
DDP_API int ddp_worker_rank(const ddp_worker *worker);
/** @return the number of workers, -1 for NULL. */
DDP_API int ddp_worker_world_size(const ddp_worker *worker);
/** @return the worker's rank on this machine, -1 for NULL. */
DDP_API int ddp_worker_local_rank(const ddp_worker *worker);

/**
 * Sets the bytes ddp_spawn hands back to its caller (used on rank 0 only;
 * a later call replaces an earlier one). The bytes are copied.
 */
DDP_API ddp_status ddp_worker_set_result(ddp_worker *worker, const void *data, size_t len);

DDP_EXTERN_C_END

#endif /* DDP_LAUNCH_H */
