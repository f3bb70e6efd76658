"""Code generated from protos/v0_3/a2a.proto (A2A 0.3, package a2a.v1) by scripts/gen-protos. Do not edit."""
