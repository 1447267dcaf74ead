"""Finding a subject's code: git revisions, its source snapshot's attention closure and parts,
and kernels taken out of a module by parsing."""
