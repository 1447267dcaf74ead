"""The embedded reference subject: spyre-inference's ladder policies and kernels, in pure Python
(its exact path never imports torch)."""
