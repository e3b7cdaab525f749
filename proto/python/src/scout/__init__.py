"""Generated protobuf packages."""
