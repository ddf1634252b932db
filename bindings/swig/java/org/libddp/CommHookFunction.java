package org.libddp;

/**
 * A comm hook written in Java ({@link CommHook#custom}): run for each ready
 * bucket, on the thread that completed it, it leaves the reduced bucket in
 * {@code bucket.buffer} (e.g. {@code group.allReduce(bucket.buffer, ReduceOp.SUM)}
 * and a division by {@code bucket.divisor}). A thrown exception fails the
 * step on every rank: a {@link DdpException}'s status, else an internal
 * error, with the exception's text as the reason.
 */
@FunctionalInterface
public interface CommHookFunction {
  void run(Group group, CommBucket bucket);
}
