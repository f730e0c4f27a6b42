"""Where audit events are delivered: the Sink interface (base) and its implementations."""
