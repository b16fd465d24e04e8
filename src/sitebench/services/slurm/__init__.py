"""A private Slurm cluster on this machine: configuration, node namespaces, daemons."""
