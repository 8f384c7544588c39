"""Wire codecs: framing, request/response glue, record batches, error codes."""
