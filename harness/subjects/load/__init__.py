"""Loading a spyre-inference snapshot's modules in an isolated window, with stand-ins (or the real
vLLM) for what they import."""
