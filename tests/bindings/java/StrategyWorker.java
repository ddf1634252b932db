import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import org.libddp.*;

/**
 * One rank of DDPStrategy from Java (started by ddprun): five SGD steps of a
 * TorchScript MLP ($DDP_TEST_MODEL) on data that differs per rank. The
 * gradients are averaged, so both replicas stay equal: the ranks' outputs
 * for one probe input, gathered, must be the same, and differ from the
 * untrained module's. Prints "rank R OK".
 */
public class StrategyWorker {
  static ByteBuffer direct(int bytes) { return ByteBuffer.allocateDirect(bytes).order(ByteOrder.nativeOrder()); }

  static Tensor floats(int rows, int cols, int seed) {
    ByteBuffer b = direct(4 * rows * cols);
    for (int i = 0; i < rows * cols; ++i) b.putFloat(4 * i, (float) Math.sin(seed * 31 + i * 0.37));
    return Tensor.wrap(b, DType.FLOAT32, new long[] {rows, cols});
  }

  static Tensor labels(int rows, int seed) {
    ByteBuffer b = direct(8 * rows);
    for (int i = 0; i < rows; ++i) b.putLong(8 * i, (seed + i) % 3);
    return Tensor.wrap(b, DType.INT64, new long[] {rows});
  }

  static float[] values(Tensor t) {
    ByteBuffer b = direct((int) t.nbytes());
    t.copyTo(b);
    float[] v = new float[(int) t.numel()];
    for (int i = 0; i < v.length; ++i) v[i] = b.getFloat(4 * i);
    return v;
  }

  static void check(boolean ok, String what) {
    if (!ok) throw new AssertionError(what);
  }

  public static void main(String[] args) {
    String path = System.getenv("DDP_TEST_MODEL");
    try (Strategy s = Strategy.withDevices(2); ScriptModule m = ScriptModule.load(path);
         ScriptModule untrained = ScriptModule.load(path)) {
      s.setupEnvironment();
      int rank = s.globalRank();
      check(s.worldSize() == 2 && s.isGlobalZero() == (rank == 0), "rank facts");
      try (Optimizer opt = Optimizer.sgd(m, 0.1, 0.9, 0, 0, false)) {
        s.setupModule(m);
        for (int step = 0; step < 5; ++step) {
          try (Tensor x = floats(8, 8, 10 * step + rank); Tensor y = labels(8, step + rank)) {
            opt.zeroGrad();
            try (Tensor out = s.forward(m, x); Tensor loss = ddp.crossEntropyLoss(out, y)) {
              s.backward(loss);
              s.optimizerStep(opt);
              check(Float.isFinite(values(loss)[0]), "finite loss");
            }
          }
        }
      }
      try (Tensor probe = floats(1, 8, 99); Tensor mine = m.forward(probe); Tensor before = untrained.forward(probe);
           Tensor all = s.allGather(mine)) {
        float[] both = values(all), own = values(mine), old = values(before);
        for (int i = 0; i < own.length; ++i) check(both[i] == both[own.length + i], "replicas differ at " + i);
        boolean moved = false;
        for (int i = 0; i < own.length; ++i) moved |= own[i] != old[i];
        check(moved, "training changed nothing");
      }
      s.teardown();
      System.out.println("rank " + rank + " OK");
    }
  }
}
