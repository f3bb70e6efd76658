"""Code generated from protos/a2a.proto by scripts/gen-protos. Do not edit."""
