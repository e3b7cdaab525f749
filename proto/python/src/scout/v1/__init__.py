"""Generated from proto/scout/v1; never edit."""
