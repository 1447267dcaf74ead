"""Running the ASV suite the way hardware machines do: in the current environment, one commit at a
time, with stable machine and environment names (see asv_plugin.py) and an identity sidecar per
results file."""
