import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import org.libddp.*;

/**
 * ddp.spawn from Java: 2 workers (popen re-runs this program up to the spawn call), each
 * all-reduces its rank + 1; rank 0 returns the sum and the argument it got as the result.
 */
public class SpawnMain {
  public static void main(String[] args) {
    byte[] result = ddp.spawn((worker, arg) -> {
      try (Group g = Group.fromEnvironment()) {
        ByteBuffer x = ByteBuffer.allocateDirect(4).order(ByteOrder.nativeOrder());
        x.putFloat(0, worker.rank() + 1);
        try (Tensor t = Tensor.wrap(x, DType.FLOAT32, new long[] {1})) {
          g.allReduce(t, ReduceOp.SUM);
        }
        if (worker.rank() == 0) {
          String r = "sum=" + x.getFloat(0) + " world=" + worker.worldSize() + " arg="
              + new String(arg, StandardCharsets.UTF_8);
          worker.setResult(r.getBytes(StandardCharsets.UTF_8));
        }
      }
      return 0;
    }, 2, "hello".getBytes(StandardCharsets.UTF_8), StartMethod.START_POPEN, 120000);
    System.out.println("spawn result: " + new String(result, StandardCharsets.UTF_8));
  }
}
