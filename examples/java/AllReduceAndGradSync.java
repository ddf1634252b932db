import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.util.Arrays;
import org.libddp.*;

/**
 * The 2-rank all-reduce and a gradient-sync step from Java (org.libddp; direct ByteBuffers are
 * reduced in place):
 *   javac -cp build/bindings/java/libddp.jar -d /tmp/ex examples/java/AllReduceAndGradSync.java
 *   build/tools/ddprun --standalone --nproc-per-node 2 java -Djava.library.path=build/bindings/java \
 *       -cp build/bindings/java/libddp.jar:/tmp/ex AllReduceAndGradSync
 */
public class AllReduceAndGradSync {
  static ByteBuffer floats(int n) { return ByteBuffer.allocateDirect(4 * n).order(ByteOrder.nativeOrder()); }

  static String show(ByteBuffer b) {
    FloatBuffer f = b.asFloatBuffer();
    float[] v = new float[f.remaining()];
    f.get(v);
    return Arrays.toString(v);
  }

  public static void main(String[] args) {
    try (Group g = Group.fromEnvironment()) {
      int rank = g.rank();
      ByteBuffer x = floats(3);
      x.asFloatBuffer().put(new float[] {rank, rank + 1, rank + 2});
      try (Tensor t = Tensor.wrap(x, DType.FLOAT32, new long[] {3})) {
        g.allReduce(t, ReduceOp.SUM);
      }
      System.out.println("[rank " + rank + "] all_reduce SUM: " + show(x));

      ByteBuffer weight = floats(12), bias = floats(4);
      try (Tensor tw = Tensor.wrap(weight, DType.FLOAT32, new long[] {4, 3});
           Tensor tb = Tensor.wrap(bias, DType.FLOAT32, new long[] {4});
           CommHook hook = CommHook.fp16Compress();
           Reducer reducer = Reducer.create(g, new Tensor[] {tw, tb}, 25, 1, false)) {
        reducer.setCommHook(hook);
        for (int i = 0; i < 4; ++i) bias.putFloat(4 * i, rank + i);
        reducer.markReady(1);
        for (int i = 0; i < 12; ++i) weight.putFloat(4 * i, 10 * rank + i);
        reducer.markReady(0);
        reducer.finish();
      }
      System.out.println("[rank " + rank + "] averaged bias grad: " + show(bias));
    }
  }
}
