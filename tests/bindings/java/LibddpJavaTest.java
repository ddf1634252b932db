import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.concurrent.TimeUnit;
import org.junit.Test;
import org.libddp.*;

/** The SWIG Java binding (org.libddp). System properties: ddprun, classpath, library path. */
public class LibddpJavaTest {
  /** Runs `prefix... java <this classpath and library path> mainClass`; returns its output once it exited 0. */
  static String runJava(String mainClass, String... prefix) throws Exception {
    java.util.List<String> cmd = new java.util.ArrayList<>(java.util.Arrays.asList(prefix));
    cmd.addAll(java.util.Arrays.asList(System.getProperty("java.home") + "/bin/java",
        "-Djava.library.path=" + System.getProperty("java.library.path"), "-cp", System.getProperty("java.class.path"),
        mainClass));
    ProcessBuilder pb = new ProcessBuilder(cmd);
    pb.redirectErrorStream(true);
    pb.environment().put("OMP_NUM_THREADS", "1");
    Process p = pb.start();
    StringBuilder out = new StringBuilder();
    try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream()))) {
      for (String line; (line = r.readLine()) != null;) out.append(line).append('\n');
    }
    assertTrue(mainClass + " did not finish", p.waitFor(120, TimeUnit.SECONDS));
    assertEquals(out.toString(), 0, p.exitValue());
    return out.toString();
  }

  @Test
  public void strategyKeepsTwoRanksReplicasEqual() throws Exception {
    String model = System.getProperty("ddp.model", "");
    org.junit.Assume.assumeTrue("skipped: no torch in .venv to export the TorchScript module", !model.isEmpty());
    String out = runJava("StrategyWorker", "env", "DDP_TEST_MODEL=" + model, System.getProperty("ddp.ddprun"),
        "--standalone", "--nproc-per-node", "2");
    assertTrue(out, out.contains("rank 0 OK") && out.contains("rank 1 OK"));
  }

  @Test
  public void twoRanksThroughDdprun() throws Exception {
    String out = runJava("TwoRankWorker", System.getProperty("ddp.ddprun"), "--standalone", "--nproc-per-node", "2");
    assertTrue(out, out.contains("rank 0 OK") && out.contains("rank 1 OK"));
    // The hook that throws on rank 1: both ranks' steps fail, rank 0's naming rank 1.
    assertTrue(out, out.contains("rank 1 hook failure: ") && out.contains("refused by the test"));
    assertTrue(out, java.util.regex.Pattern.compile("rank 0 hook failure: .*rank 1").matcher(out).find());
  }

  @Test
  public void spawnRunsAJavaCallbackOnTwoRanks() throws Exception {
    String out = runJava("SpawnMain");
    assertTrue(out, out.contains("spawn result: sum=3.0 world=2 arg=hello"));
  }

  @Test
  public void errorsCarryTheStatusAndTheMessage() {
    try {
      CommHook.powersgd(1, 1, 2, true, true, 0, 0, false, false);
      fail("start_powersgd_iter 1 with error feedback must be refused");
    } catch (DdpException e) {
      assertEquals(ddpConstants.E_INVALID_ARGUMENT, e.status);
      assertTrue(e.getMessage(), e.getMessage().contains("start_powersgd_iter"));
    }
    try {
      Tensor.wrap(ByteBuffer.allocate(8), DType.FLOAT32, new long[] {2});
      fail("a heap ByteBuffer has no address to share");
    } catch (IllegalArgumentException expected) {
    }
  }

  @Test
  public void oneRankPowerSgdCountsItsCompression() {
    try (Group g = new Group(0, 1, "127.0.0.1", 0, null, 0);
         CommHook h = CommHook.powersgd(1, 2, 2, true, true, 0, 0, false, false)) {
      ByteBuffer w = ByteBuffer.allocateDirect(4 * 16 * 8).order(ByteOrder.nativeOrder());
      for (int i = 0; i < 16 * 8; ++i) w.putFloat(i * 4, (float) Math.sin(i));
      ByteBuffer b = ByteBuffer.allocateDirect(4 * 8).order(ByteOrder.nativeOrder());
      try (Tensor tw = Tensor.wrap(w, DType.FLOAT32, new long[] {16, 8});
           Tensor tb = Tensor.wrap(b, DType.FLOAT32, new long[] {8});
           Reducer r = Reducer.create(g, new Tensor[] {tw, tb}, 25, 1, false)) {
        r.setCommHook(h);
        for (int step = 0; step < 3; ++step) {
          r.markReady(1);
          r.markReady(0);
          r.finish();
        }
      }
      long[] before = new long[1], after = new long[1], iters = new long[1];
      h.compressionStats(before, after, iters);
      assertEquals(3, iters[0]);
      assertEquals(16 * 8 + 8, before[0]);
      assertEquals((16 + 8) + 8, after[0]);
    }
  }
  @Test
  public void aLibTorchTensorByAddressIsSharedAndAnotherLibTorchIsRefused() {
    org.junit.Assume.assumeTrue("skipped: the at::Tensor helper library was not built (ddp.atenHelper unset)",
        AtenHelper.load());
    String version = Tensor.torchVersion();
    long w = AtenHelper.newTensor(new float[] {1, 2, 3, 4, 5, 6}, true);
    long rm = AtenHelper.newTensor(new float[] {0, 0}, false);
    try {
      try {
        Tensor.fromAtenAddress(w, "1.13.1");
        fail("a tensor of another LibTorch must be refused");
      } catch (DdpException e) {
        assertEquals(ddpConstants.E_UNSUPPORTED, e.status);
        assertTrue(e.getMessage(), e.getMessage().contains("1.13.1") && e.getMessage().contains(version));
      }
      try {
        Tensor.fromAtenAddress(0, version);
        fail("a null address must be refused");
      } catch (DdpException e) {
        assertEquals(ddpConstants.E_INVALID_ARGUMENT, e.status);
      }
      try (Tensor tw = Tensor.fromAtenAddress(w, version);
           Tensor trm = Tensor.fromAtenAddress(rm, version);
           ScriptModule m = ScriptModule.fromTensors(new String[] {"fc.weight", "norm.running_mean"},
               new Tensor[] {tw, trm}, 1)) {
        assertEquals(1, m.numParameters());
        assertEquals(6, tw.numel());
        // Shared, not copied: what libddp writes is in the C++ tensor.
        ByteBuffer nines = ByteBuffer.allocate(24).order(ByteOrder.nativeOrder());
        for (int i = 0; i < 6; ++i) nines.putFloat(i * 4, 9f);
        tw.copyFrom(nines.array());
        float[] back = new float[6];
        AtenHelper.read(w, back);
        for (float v : back) assertEquals(9f, v, 0f);
      }
    } finally {
      AtenHelper.free(w);
      AtenHelper.free(rm);
    }
  }

  /** Java's own naming: no public method of the binding's classes has C's snake_case. */
  @Test
  public void methodsAreLowerCamelCase() throws Exception {
    Class<?>[] classes = {Tensor.class, Group.class, Reducer.class, CommHook.class, ModelAverager.class,
                          ScriptModule.class, Optimizer.class, LrScheduler.class, Strategy.class, StrategyOptions.class,
                          ReducerOptions.class, SamplerOptions.class, CheckpointInfo.class, Worker.class, ddp.class};
    int seen = 0;
    for (Class<?> c : classes)
      for (java.lang.reflect.Method m : c.getDeclaredMethods())
        if (java.lang.reflect.Modifier.isPublic(m.getModifiers())) {
          assertFalse(c.getSimpleName() + "." + m.getName(), m.getName().contains("_"));
          ++seen;
        }
    assertTrue("only " + seen + " public methods", seen > 100);
    Group.class.getMethod("allReduce", Tensor.class, ReduceOp.class);
    Reducer.class.getMethod("markReady", long.class);
    StrategyOptions.class.getMethod("setBucketCapMb", double.class);
  }

  /** Option objects start at the C API's defaults; a bad value is refused with its name. */
  @Test
  public void optionsHoldTheCDefaults() {
    try (StrategyOptions o = new StrategyOptions()) {
      assertEquals(0, o.getDevices());
      assertEquals(25.0, o.getBucketCapMb(), 0);
      assertEquals(1, o.getBroadcastBuffers());
      assertEquals(StrategyKind.STRATEGY_DDP, o.getKind());
      o.setPrecision("bf16-mixed");
      o.setPrecision("fp12");
      assertEquals("fp12", o.getPrecision());
      DdpException e = assertThrows(DdpException.class, () -> Strategy.fromOptions(o));
      assertEquals(ddpConstants.E_INVALID_ARGUMENT, e.status);
      assertTrue(e.getMessage(), e.getMessage().contains("fp12"));
    }
    try (CheckpointInfo info = new CheckpointInfo()) {
      info.setStep(1L << 40);  // 64-bit counters
      assertEquals(1L << 40, info.getStep());
    }
    assertEquals(6, ddp.samplerNumSamples(11, 2, false));
  }

  static Tensor floats(float... values) {
    ByteBuffer b = ByteBuffer.allocateDirect(values.length * 4).order(ByteOrder.nativeOrder());
    b.asFloatBuffer().put(values);
    return Tensor.wrap(b, DType.FLOAT32, new long[] {values.length});
  }

  static float[] values(Tensor t) {
    ByteBuffer b = ByteBuffer.allocateDirect((int) t.nbytes()).order(ByteOrder.nativeOrder());
    t.copyTo(b);
    float[] out = new float[(int) t.numel()];
    b.asFloatBuffer().get(out);
    return out;
  }

  /** The training surface: arithmetic with gradients, losses, the grad mode, metric, parameter groups, Env. */
  @Test
  public void trainingSurfaceInJava() {
    try (Tensor a = floats(1f, 2f, 3f).clone()) {
      a.setRequiresGrad(true);
      Tensor y = a.binary(BinaryOp.OP_MUL, a).binaryScalar(BinaryOp.OP_ADD, 1).sum(new long[0], false);
      assertEquals(1 + 1 + 4 + 1 + 9 + 1, y.item(), 1e-6);
      y.backward();
      assertEquals(java.util.Arrays.toString(new float[] {2f, 4f, 6f}), java.util.Arrays.toString(values(a.grad())));
      assertEquals(2.0, a.mean(new long[] {0}, false).item(), 1e-6);
      assertEquals(1.0, a.softmax(-1, false).sum(new long[0], false).item(), 1e-6);
      try (LossOptions o = new LossOptions(LossKind.LOSS_HUBER)) {
        o.setDelta(0.5);  // huber with delta 0.5 against 0: 0.5 * (|x| - 0.25) for |x| > 0.5
        assertEquals((0.5 * 0.75 + 0.5 * 1.75 + 0.5 * 2.75) / 3, ddp.loss(o, a, floats(0f, 0f, 0f)).item(), 1e-6);
      }
      DdpException e = assertThrows(DdpException.class, () -> a.binary(BinaryOp.OP_ADD, floats(1f, 2f)));
      assertTrue(e.getMessage(), e.getMessage().contains("[3]") && e.getMessage().contains("[2]"));
      assertTrue(ddp.setGradEnabled(false));
      assertFalse(a.unary(UnaryOp.OP_EXP).requiresGrad());
      ddp.setGradEnabled(true);
    }
    assertEquals("float32", ddp.dtypeName(DType.FLOAT32));
    assertEquals(42, ddp.seedEverything(42, false));
    try (Metric m = new Metric(MetricReduce.METRIC_MEAN)) {
      m.update(1.0, 2);
      m.update(4.0, 1);
      assertEquals(2.0, m.compute(null), 1e-9);
    }
    try (Tensor w = floats(1f, 2f).clone(); Tensor b = floats(0f).clone()) {
      w.setRequiresGrad(true);
      b.setRequiresGrad(true);
      try (ScriptModule m = ScriptModule.fromTensors(new String[] {"net.weight", "net.bias"}, new Tensor[] {w, b}, 0);
           ParamGroups groups = new ParamGroups(); SgdOptions sgd = new SgdOptions()) {
        groups.add(new String[] {"*.bias"}, 0.5, 0.0, -1);
        groups.add(new String[0], -1, -1, -1);
        sgd.setLr(0.1);
        try (Optimizer opt = Optimizer.sgdGroups(m, sgd, groups)) {
          assertEquals(2, opt.numGroups());
          assertEquals(0.5, opt.groupLr(0), 0);
          assertEquals(0.1, opt.groupLr(1), 0);
        }
      }
    }
    try (Env env = Env.fromVars(new String[] {"RANK=1", "WORLD_SIZE=2", "LOCAL_RANK=1", "LOCAL_WORLD_SIZE=2",
                                               "GROUP_RANK=0", "MASTER_ADDR=h", "MASTER_PORT=1"}, "torchelastic")) {
      assertEquals(1, env.rank());
      assertEquals(2, env.worldSize());
    }
    // The caller's own optimizer step inside the strategy's; its exception comes back unchanged.
    try (Strategy s = Strategy.withDevices(1); Tensor w = floats(1f, 2f).clone()) {
      s.setupEnvironment();
      w.setRequiresGrad(true);
      try (ScriptModule m = ScriptModule.fromTensors(new String[] {"w"}, new Tensor[] {w}, 0)) {
        s.setupModule(m);
        int[] calls = {0};
        assertTrue(s.optimizerStepFn(() -> calls[0]++));
        assertEquals(1, calls[0]);
        IllegalStateException thrown = assertThrows(IllegalStateException.class,
            () -> s.optimizerStepFn(() -> { throw new IllegalStateException("my optimizer refused"); }));
        assertEquals("my optimizer refused", thrown.getMessage());
      }
      s.teardown();
    }
    String model = System.getProperty("ddp.model", "");
    if (!model.isEmpty()) {
      try (ScriptModule m = ScriptModule.load(model); Tensor x = Tensor.zeros(DType.FLOAT32, new long[] {2, 8});
           Outputs out = m.call(null, new Tensor[] {x})) {
        assertEquals(1, out.count());
        assertEquals(2 * 3, out.at(0).numel());
      }
    }
  }

  /** Lightning's CheckpointIO and ClusterEnvironment written in Java. */
  @Test
  public void checkpointIoAndClusterEnvironmentInJava() throws Exception {
    java.util.Map<String, byte[]> files = new java.util.HashMap<>();
    java.util.List<String> calls = new java.util.ArrayList<>();
    CheckpointIO io = new CheckpointIO() {
      public void save(String path, byte[] data) { calls.add("save " + path); files.put(path, data); }
      public byte[] load(String path) {
        calls.add("load " + path);
        byte[] b = files.get(path);
        if (b == null) throw new IllegalArgumentException("no " + path);
        return b;
      }
      public void remove(String path) { calls.add("remove " + path); files.remove(path); }
    };
    int port;
    try (java.net.ServerSocket free = new java.net.ServerSocket(0)) { port = free.getLocalPort(); }
    final int mainPort = port;
    ClusterEnvironment one = new ClusterEnvironment() {
      public int worldSize() { return 1; }
      public int globalRank() { return 0; }
      public int localRank() { return 0; }
      public int localWorldSize() { return 1; }
      public int nodeRank() { return 0; }
      public String mainAddress() { return "127.0.0.1"; }
      public int mainPort() { return mainPort; }
    };
    try (StrategyOptions o = new StrategyOptions(); Tensor w = floats(1f, 2f).clone()) {
      o.setDevices(1);
      o.useCheckpointIo(io);
      o.useClusterEnvironment(one);
      w.setRequiresGrad(true);
      try (Strategy s = Strategy.fromOptions(o);
           ScriptModule m = ScriptModule.fromTensors(new String[] {"w"}, new Tensor[] {w}, 0)) {
        s.setupEnvironment();
        s.setupModule(m);
        s.saveCheckpoint("mem://j.ckpt", m, null, 3, 1);
        assertEquals('P', files.get("mem://j.ckpt")[0]);  // torch.save's zip archive
        long[] step = new long[1], epoch = new long[1];
        s.loadCheckpoint("mem://j.ckpt", m, null, step, epoch);
        assertEquals(3, step[0]);
        s.removeCheckpoint("mem://j.ckpt");
        assertEquals(java.util.Arrays.asList("save mem://j.ckpt", "load mem://j.ckpt", "remove mem://j.ckpt"), calls);
        DdpException e = assertThrows(DdpException.class, () -> s.loadCheckpoint("mem://j.ckpt", m, null, step, epoch));
        assertEquals(ddpConstants.E_IO, e.status);
        assertTrue(e.getMessage(), e.getMessage().contains("mem://j.ckpt"));
        s.teardown();
      }
    }
  }
}
