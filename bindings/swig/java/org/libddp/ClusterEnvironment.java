package org.libddp;

/**
 * Lightning's ClusterEnvironment written in Java ({@link StrategyOptions#useClusterEnvironment}):
 * asked once at setupEnvironment in place of detecting the environment. A
 * negative number, a null address or an exception fails setup with
 * {@code E_INVALID_ARGUMENT} naming the method.
 */
public interface ClusterEnvironment {
  int worldSize();
  int globalRank();
  int localRank();
  int localWorldSize();
  int nodeRank();
  String mainAddress();
  int mainPort();
}
