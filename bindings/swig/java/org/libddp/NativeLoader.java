package org.libddp;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;

/**
 * Loads libddp_java.so, the binding's JNI library: from java.library.path
 * when it is there (-Djava.library.path=...), else the copy libddp.jar
 * carries (org/libddp/native/libddp_java.so), written to a temporary file
 * first since a library inside a jar cannot be loaded in place. Either way
 * libddp_java.so finds libddp.so by its run path (the build's or install's
 * lib directory) or the system's loader path.
 */
final class NativeLoader {
  private static final String BUNDLED = "/org/libddp/native/libddp_java.so";

  private NativeLoader() {}

  static void load() {
    try {
      System.loadLibrary("ddp_java");
    } catch (UnsatisfiedLinkError notOnPath) {
      loadBundled(notOnPath);
    }
  }

  private static void loadBundled(UnsatisfiedLinkError notOnPath) {
    try (InputStream in = NativeLoader.class.getResourceAsStream(BUNDLED)) {
      if (in == null) throw notOnPath;
      Path file = Files.createTempFile("libddp_java", ".so");
      file.toFile().deleteOnExit();
      Files.copy(in, file, StandardCopyOption.REPLACE_EXISTING);
      System.load(file.toAbsolutePath().toString());
    } catch (IOException e) {
      UnsatisfiedLinkError err =
          new UnsatisfiedLinkError("libddp_java.so is not on java.library.path and the jar's copy cannot be written: " + e);
      err.initCause(notOnPath);
      throw err;
    }
  }
}
