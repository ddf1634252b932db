import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import org.libddp.*;

/** One rank of the Java binding's 2-rank test (started by ddprun): prints "rank R OK" when every check held. */
public class TwoRankWorker {
  static ByteBuffer floats(float... v) {
    ByteBuffer b = ByteBuffer.allocateDirect(4 * v.length).order(ByteOrder.nativeOrder());
    b.asFloatBuffer().put(v);
    return b;
  }

  static float at(ByteBuffer b, int i) { return b.asFloatBuffer().get(i); }

  static void check(boolean ok, String what) {
    if (!ok) throw new AssertionError(what);
  }

  public static void main(String[] args) {
    try (Group g = Group.fromEnvironment()) {
      int rank = g.rank(), world = g.size();
      check(world == 2, "world size");
      // all_reduce in place in a direct ByteBuffer.
      ByteBuffer x = floats(rank, rank + 1, rank + 2);
      try (Tensor t = Tensor.wrap(x, DType.FLOAT32, new long[] {3})) {
        g.allReduce(t, ReduceOp.SUM);
      }
      check(at(x, 0) == 1 && at(x, 1) == 3 && at(x, 2) == 5, "all_reduce");
      // Uneven all_gather: rank r sends r + 1 values equal to r.
      float[] mine = new float[rank + 1];
      java.util.Arrays.fill(mine, rank);
      try (Tensor t = Tensor.wrap(floats(mine), DType.FLOAT32, new long[] {rank + 1})) {
        Tensor[] parts = g.allGatherUneven(t);
        check(parts.length == world, "uneven: one tensor per rank");
        for (int r = 0; r < world; ++r) {
          check(parts[r].numel() == r + 1, "uneven: sizes");
          ByteBuffer out = ByteBuffer.allocateDirect((int) parts[r].nbytes()).order(ByteOrder.nativeOrder());
          parts[r].copyTo(out);
          check(at(out, 0) == r, "uneven: values");
          parts[r].close();
        }
      }
      // PyTorch's all_gather_into_tensor: into a buffer of the caller's, 2 ranks x 2.
      ByteBuffer both = ByteBuffer.allocateDirect(16).order(ByteOrder.nativeOrder());
      try (Tensor in = Tensor.wrap(floats(rank + 5, rank + 5), DType.FLOAT32, new long[] {2});
           Tensor out = Tensor.wrap(both, DType.FLOAT32, new long[] {2, 2})) {
        g.allGatherIntoTensor(in, out);
      }
      check(at(both, 0) == 5 && at(both, 1) == 5 && at(both, 2) == 6 && at(both, 3) == 6, "all_gather_into_tensor");
      // Lightning's broadcast(obj) as bytes.
      byte[] got = g.broadcastBytes(rank == 0 ? "from rank 0".getBytes(StandardCharsets.UTF_8) : new byte[0], 0);
      check(new String(got, StandardCharsets.UTF_8).equals("from rank 0"), "broadcast_bytes");
      // A reducer step with the fp16 hook over a caller-owned gradient.
      ByteBuffer grad = floats(rank == 0 ? new float[] {1, 2, 3, 4} : new float[] {3, 4, 5, 6});
      try (Tensor tg = Tensor.wrap(grad, DType.FLOAT32, new long[] {2, 2});
           CommHook hook = CommHook.fp16Compress();
           Reducer r = Reducer.create(g, new Tensor[] {tg}, 25, 1, false)) {
        r.setCommHook(hook);
        r.markReady(0);
        r.finish();
      }
      check(at(grad, 0) == 2 && at(grad, 1) == 3 && at(grad, 2) == 4 && at(grad, 3) == 5, "reducer with fp16 hook");
      // A failing call throws DdpException with the status and the message.
      try (Tensor t = Tensor.wrap(floats(0), DType.FLOAT32, new long[] {1})) {
        g.broadcast(t, world);
        check(false, "broadcast from a rank that does not exist must fail");
      } catch (DdpException e) {
        check(e.status == ddpConstants.E_INVALID_ARGUMENT && e.getMessage().contains("src"), "exception");
      }
      // An all-reduce started, then waited on; the environment's facts.
      ByteBuffer started = floats(rank + 1);
      try (Tensor t = Tensor.wrap(started, DType.FLOAT32, new long[] {1}); Work w = g.allReduceAsync(t, ReduceOp.SUM)) {
        w.waitFor(10000);
        check(w.isCompleted() && at(started, 0) == 3, "allReduceAsync + waitFor");
      }
      try (Env e = Env.detect()) {
        check(e.rank() == rank && e.worldSize() == world && e.localRank() == rank, "Env " + e.name());
      }
      // A comm hook written in Java (the allreduce hook's algorithm: sum, then divide),
      // seeing the bucket's layout: DDP puts the last parameter first.
      ByteBuffer a = floats(rank + 1, rank + 1, rank + 1), b = floats(10 * (rank + 1), 10 * (rank + 1));
      long[][] layout = new long[1][];
      CommHook average = CommHook.custom((group, bucket) -> {
        layout[0] = new long[] {bucket.index, bucket.isLast ? 1 : 0, bucket.divisor, bucket.paramIndices[0],
                                bucket.offsets[1], bucket.shapes[0][0]};
        group.allReduce(bucket.buffer, ReduceOp.SUM);
        ByteBuffer data = ByteBuffer.allocateDirect((int) bucket.buffer.nbytes()).order(ByteOrder.nativeOrder());
        bucket.buffer.copyTo(data);
        for (int i = 0; i < bucket.buffer.numel(); ++i) data.putFloat(4 * i, data.getFloat(4 * i) / bucket.divisor);
        bucket.buffer.copyFrom(toBytes(data));
      });
      try (Tensor ta = Tensor.wrap(a, DType.FLOAT32, new long[] {3});
           Tensor tb = Tensor.wrap(b, DType.FLOAT32, new long[] {2});
           Reducer r = Reducer.create(g, new Tensor[] {ta, tb}, 25, 1, false)) {
        r.setCommHook(average);
        average.close(); // the reducer holds its own reference
        r.markReady(1);
        r.markReady(0);
        r.finish();
      }
      check(at(a, 0) == 1.5f && at(a, 2) == 1.5f && at(b, 0) == 15f && at(b, 1) == 15f, "Java comm hook averages");
      check(java.util.Arrays.equals(layout[0], new long[] {0, 1, world, 1, 2, 2}),
            "bucket layout " + java.util.Arrays.toString(layout[0]));
      System.out.println("rank " + rank + " OK");
      // Last: a hook that throws on rank 1 fails the step on both ranks, with its status and text.
      try (Tensor t = Tensor.wrap(floats(1, 1), DType.FLOAT32, new long[] {2});
           CommHook refusing = CommHook.custom((group, bucket) -> {
             if (group.rank() == 1) throw new DdpException(ddpConstants.E_INVALID_ARGUMENT, "refused by the test");
             group.allReduce(bucket.buffer, ReduceOp.SUM);
           });
           Reducer r = Reducer.create(g, new Tensor[] {t}, 25, 1, false)) {
        r.setCommHook(refusing);
        r.markReady(0);
        r.finish();
        check(false, "a failing hook must fail the step");
      } catch (DdpException e) {
        check(rank == 0 || (e.status == ddpConstants.E_INVALID_ARGUMENT && e.getMessage().contains("refused by the test")),
              "failing hook on rank 1: " + e.status + " " + e.getMessage());
        System.out.println("rank " + rank + " hook failure: " + e.getMessage());
      }
    }
  }

  static byte[] toBytes(ByteBuffer b) {
    byte[] out = new byte[b.capacity()];
    b.duplicate().clear().get(out);
    return out;
  }
}
