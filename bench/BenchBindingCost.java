/* Java's side of bench/run_binding_cost.sh: the calls of bench_binding_cost.c through the SWIG binding. */
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;
import org.libddp.DType;
import org.libddp.Group;
import org.libddp.ReduceOp;
import org.libddp.Reducer;
import org.libddp.Tensor;

public final class BenchBindingCost {
  static final int GRADS = 4, GRAD_LEN = 256, CALLS = 2000, BLOCKS = 7, WARMUP = 200;

  static double medianUs(Group g, Runnable fn) {
    for (int i = 0; i < WARMUP; ++i) fn.run();
    double[] per = new double[BLOCKS];
    for (int b = 0; b < BLOCKS; ++b) {
      g.barrier();
      long t0 = System.nanoTime();
      for (int i = 0; i < CALLS; ++i) fn.run();
      per[b] = (System.nanoTime() - t0) / 1e3 / CALLS;
    }
    Arrays.sort(per);
    return per[BLOCKS / 2];
  }

  static ByteBuffer floats(int n) {
    return ByteBuffer.allocateDirect(n * Float.BYTES).order(ByteOrder.nativeOrder());
  }

  public static void main(String[] args) {
    try (Group g = Group.fromEnvironment()) {
      ByteBuffer one = floats(1);
      one.putFloat(0, 1f);
      Tensor scalar = Tensor.wrap(one, DType.FLOAT32, new long[] {1});
      Tensor[] grads = new Tensor[GRADS];
      for (int i = 0; i < GRADS; ++i) grads[i] = Tensor.wrap(floats(GRAD_LEN), DType.FLOAT32, new long[] {GRAD_LEN});
      try (Reducer r = Reducer.create(g, grads, 25, 1, false)) {
        double ar = medianUs(g, () -> g.allReduce(scalar, ReduceOp.SUM));
        double st = medianUs(g, () -> {
          for (int i = GRADS - 1; i >= 0; --i) r.markReady(i);
          r.finish();
        });
        if (g.rank() == 0)
          System.out.printf("{\"lang\": \"java\", \"allreduce_us\": %.3f, \"reducer_step_us\": %.3f}%n", ar, st);
      }
    }
  }
}
