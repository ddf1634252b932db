package org.libddp;

/**
 * Lightning's CheckpointIO written in Java ({@link StrategyOptions#useCheckpointIo}):
 * where the strategy's checkpoint bytes are stored. save and remove run on
 * global rank 0, load on every rank, each on the thread that called the
 * strategy. An exception fails that call with {@code E_IO} naming the
 * callback and the path on every rank (its stack trace is printed).
 */
public interface CheckpointIO {
  /** Stores {@code data} under {@code path}, whole or not at all. */
  void save(String path, byte[] data) throws Exception;

  /** The bytes stored under {@code path}. */
  byte[] load(String path) throws Exception;

  /** Removes {@code path}. */
  void remove(String path) throws Exception;
}
