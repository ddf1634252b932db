package org.libddp;

/**
 * The caller's own optimizer step ({@link Strategy#optimizerStepFn}): run on
 * the calling thread inside the precision's step (unscale, clip; skipped
 * when the gradient scaler found an inf or NaN). An exception it throws
 * comes back out of {@code optimizerStepFn} unchanged.
 */
@FunctionalInterface
public interface OptimizerStep {
  void step();
}
