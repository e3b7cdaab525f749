package org.scoutarena.client;

import io.grpc.Status;

/**
 * The referee refused the bot for a reason reconnecting cannot fix: an unknown token
 * (UNAUTHENTICATED), a protocol problem (INVALID_ARGUMENT, FAILED_PRECONDITION), or another
 * process took over the token (ABORTED "superseded").
 */
public final class ConnectionRejectedException extends Exception {
  private static final long serialVersionUID = 1L;

  private final transient Status.Code code;

  /**
   * @param code the gRPC status code that ended the stream
   * @param details the status description
   * @param protocolError the referee's last ProtocolError message on that stream, or null
   */
  public ConnectionRejectedException(Status.Code code, String details, String protocolError) {
    super(message(code, details, protocolError));
    this.code = code;
  }

  /** The gRPC status code that ended the stream. */
  public Status.Code code() {
    return code;
  }

  private static String message(Status.Code code, String details, String protocolError) {
    String text = "the referee rejected the connection (" + code + "): "
        + (details == null || details.isBlank() ? "no details" : details);
    if (protocolError != null && !protocolError.isBlank() && !text.contains(protocolError)) {
      text += " [" + protocolError + "]";
    }
    return text.replaceAll("\\s+", " ").trim();
  }
}
