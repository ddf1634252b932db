/**
 * A stand-in for JavaCPP's PyTorch presets (which cannot be installed here):
 * at::Tensor objects made in C++ (tests/torch/aten_helper.cpp), known to Java
 * by their address, as a JavaCPP Tensor's address() gives it.
 */
final class AtenHelper {
  static native long newTensor(float[] data, boolean requiresGrad);
  static native void read(long address, float[] out);
  static native void free(long address);

  /** Loads the helper named by the ddp.atenHelper property; false when it is not set. */
  static boolean load() {
    String path = System.getProperty("ddp.atenHelper", "");
    if (path.isEmpty()) return false;
    System.load(path);
    return true;
  }

  private AtenHelper() {}
}
