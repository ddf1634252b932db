package org.libddp;

/** A libddp call failed: {@link #status} is the libddp status code, the message says what went wrong. */
public class DdpException extends RuntimeException {
  public final int status;

  public DdpException(int status, String message) {
    super(message);
    this.status = status;
  }
}
