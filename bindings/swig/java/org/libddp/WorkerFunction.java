package org.libddp;

/** What {@link ddp#spawn} runs in each worker process; returns 0 or an exit code. */
@FunctionalInterface
public interface WorkerFunction {
  int run(Worker worker, byte[] arg);
}
