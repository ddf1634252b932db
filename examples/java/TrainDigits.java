/*
 * The main job from Java: the digits MLP trained through libddp's strategy,
 * the same calls in the same order as examples/c/train_digits.c, so each
 * step's loss is the C job's to the bit (tests/bindings/
 * test_digits_every_language.sh checks it).
 *
 *   .venv/bin/python examples/digits/export_digits.py build/digits
 *   build/tools/ddprun --standalone --nproc-per-node 2 \
 *       java -cp build/bindings/java/libddp.jar examples/java/TrainDigits.java build/digits
 *
 * (libddp.jar carries its JNI library; -Djava.library.path=DIR takes DIR's instead.)
 *
 * Without a launcher, "--world N" lets the strategy start the other ranks
 * (it runs this command again). DIGITS_STEP_LOG=FILE: rank 0 writes each
 * step's loss there.
 */
import java.io.IOException;
import java.io.PrintWriter;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;

import org.libddp.CheckpointInfo;
import org.libddp.DType;
import org.libddp.Optimizer;
import org.libddp.ReduceOp;
import org.libddp.ScriptModule;
import org.libddp.Strategy;
import org.libddp.StrategyOptions;
import org.libddp.Tensor;
import org.libddp.ddp;

public final class TrainDigits {
  static final int FEATURES = 64, CLASSES = 10, BATCH = 32;

  /** A split's features (n x 64 float32) and labels (int64), in direct buffers of native order. */
  record Split(ByteBuffer x, ByteBuffer y, int n) {
    static Split load(Path dir, String which) throws IOException {
      ByteBuffer x = direct(Files.readAllBytes(dir.resolve(which + "_x.f32")));
      ByteBuffer y = direct(Files.readAllBytes(dir.resolve(which + "_y.i64")));
      return new Split(x, y, y.capacity() / Long.BYTES);
    }
  }

  static ByteBuffer direct(byte[] bytes) {
    ByteBuffer b = ByteBuffer.allocateDirect(Math.max(bytes.length, 1)).order(ByteOrder.nativeOrder());
    b.put(bytes).clear();
    return b;
  }

  static ByteBuffer buffer(long bytes) {
    return ByteBuffer.allocateDirect((int) Math.max(bytes, 1)).order(ByteOrder.nativeOrder());
  }

  /** Correct predictions (the first of equal maxima, as the C job's strict ">"). */
  static int countCorrect(Tensor logits, ByteBuffer labels, int n) {
    ByteBuffer out = buffer((long) n * CLASSES * Float.BYTES);
    logits.copyTo(out);
    int correct = 0;
    for (int i = 0; i < n; ++i) {
      int best = 0;
      for (int c = 1; c < CLASSES; ++c)
        if (out.getFloat((i * CLASSES + c) * Float.BYTES) > out.getFloat((i * CLASSES + best) * Float.BYTES)) best = c;
      if (best == labels.getLong(i * Long.BYTES)) ++correct;
    }
    return correct;
  }

  public static void main(String[] args) throws IOException {
    if (args.length < 1) {
      System.err.println("usage: TrainDigits DATA_DIR [--world N] [--epochs E]");
      System.exit(2);
    }
    long started = System.nanoTime();
    Path dir = Path.of(args[0]);
    int world = 0, epochs = 20;
    for (int i = 1; i + 1 < args.length; i += 2) {
      if (args[i].equals("--world")) world = Integer.parseInt(args[i + 1]);
      else if (args[i].equals("--epochs")) epochs = Integer.parseInt(args[i + 1]);
      else throw new IllegalArgumentException("unknown argument " + args[i]);
    }
    Split train = Split.load(dir, "train"), test = Split.load(dir, "test");

    try (StrategyOptions options = new StrategyOptions()) {
      options.setDevices(world);
      options.setStateDictPrefix("net.");
      try (Strategy s = Strategy.fromOptions(options);
           ScriptModule m = ScriptModule.load(dir.resolve("mlp.pt").toString())) {
        s.setupEnvironment();
        int rank = s.globalRank();
        world = s.worldSize();
        s.setupModule(m);
        String logPath = System.getenv("DIGITS_STEP_LOG");
        try (Optimizer opt = Optimizer.sgd(m, 0.05, 0.9, 0, 0, false);
             PrintWriter stepLog = rank == 0 && logPath != null ? new PrintWriter(logPath) : null) {
          long perRank = ddp.samplerNumSamples(train.n(), world, false);
          long batches = (perRank + BATCH - 1) / BATCH, steps = 0;
          ByteBuffer bx = buffer((long) BATCH * FEATURES * Float.BYTES), by = buffer((long) BATCH * Long.BYTES);
          ByteBuffer order = buffer(perRank * Long.BYTES), lossValue = buffer(Float.BYTES);
          for (int epoch = 0; epoch < epochs; ++epoch) {
            long t0 = System.nanoTime();
            try (Tensor indices = ddp.samplerIndices(train.n(), world, rank, epoch, true, 0, false)) {
              indices.copyTo(order);
            }
            ByteBuffer sums = buffer(3 * Double.BYTES); // loss x samples, correct, samples
            for (int at = 0; at < perRank; at += BATCH) {
              int b = (int) Math.min(BATCH, perRank - at);
              for (int i = 0; i < b; ++i) {
                int k = (int) order.getLong((at + i) * Long.BYTES);
                for (int f = 0; f < FEATURES; ++f)
                  bx.putFloat((i * FEATURES + f) * Float.BYTES, train.x().getFloat((k * FEATURES + f) * Float.BYTES));
                by.putLong(i * Long.BYTES, train.y().getLong(k * Long.BYTES));
              }
              float loss;
              int correct;
              try (Tensor x = Tensor.wrap(bx.slice(0, b * FEATURES * Float.BYTES).order(ByteOrder.nativeOrder()),
                                          DType.FLOAT32, new long[] {b, FEATURES});
                   Tensor y = Tensor.wrap(by.slice(0, b * Long.BYTES).order(ByteOrder.nativeOrder()), DType.INT64,
                                          new long[] {b});
                   Tensor logits = s.forward(m, x);
                   Tensor l = ddp.crossEntropyLoss(logits, y)) {
                opt.zeroGrad();
                s.backward(l);
                s.optimizerStep(opt);
                ++steps;
                l.copyTo(lossValue);
                loss = lossValue.getFloat(0);
                correct = countCorrect(logits, by, b);
              }
              if (stepLog != null) stepLog.println(String.format("%.9g", (double) loss));
              sums.putDouble(0, sums.getDouble(0) + (double) loss * b);
              sums.putDouble(8, sums.getDouble(8) + correct);
              sums.putDouble(16, sums.getDouble(16) + b);
            }
            try (Tensor t = Tensor.wrap(sums, DType.FLOAT64, new long[] {3})) {
              s.reduce(t, ReduceOp.SUM); // Lightning's sync_dist
            }
            double seconds = (System.nanoTime() - t0) * 1e-9, n = sums.getDouble(16);
            if (rank == 0)
              System.out.printf("epoch %2d  loss %.4f  accuracy %.4f  %.0f samples/s  (%.0f ms)%n", epoch + 1,
                                sums.getDouble(0) / n, sums.getDouble(8) / n, n / seconds, seconds * 1000);
            try (CheckpointInfo info = new CheckpointInfo()) {
              info.setStep(steps);
              info.setEpoch(epoch + 1);
              info.setBatchesInEpoch(batches);
              s.saveCheckpointWith(dir.resolve("last.ckpt").toString(), m, opt, null, info);
            }
          }
        }
        m.train(false);
        int correct;
        try (Tensor x = Tensor.wrap(test.x(), DType.FLOAT32, new long[] {test.n(), FEATURES});
             Tensor logits = m.forward(x)) {
          correct = countCorrect(logits, test.y(), test.n());
        }
        s.teardown();
        if (rank == 0)
          System.out.printf("held-out accuracy %.4f (%d of %d), %d processes, %.2f s from launch to result%n",
                            (double) correct / test.n(), correct, test.n(), world, (System.nanoTime() - started) * 1e-9);
      }
    }
  }
}
