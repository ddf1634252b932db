package org.libddp;

/** One ready bucket, as a {@link CommHookFunction} sees it; valid during the call only. */
public final class CommBucket {
  /** The flat bucket (a direct view of libddp's memory): reduce it in place. */
  public final Tensor buffer;
  /** The bucket's position in the step (buckets run in index order). */
  public final long index;
  public final boolean isLast;
  /** Divide by this to average (the group's size, or the ranks not joined). */
  public final int divisor;
  /** For each gradient in the bucket: its parameter index, element offset in the buffer and shape. */
  public final long[] paramIndices, offsets;
  public final long[][] shapes;

  CommBucket(Tensor buffer, long index, boolean isLast, int divisor, long[] paramIndices, long[] offsets,
             long[][] shapes) {
    this.buffer = buffer;
    this.index = index;
    this.isLast = isLast;
    this.divisor = divisor;
    this.paramIndices = paramIndices;
    this.offsets = offsets;
    this.shapes = shapes;
  }
}
