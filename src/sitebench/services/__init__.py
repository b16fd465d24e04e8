"""Private servers the loop runs against on one machine (a MariaDB, a Slurm cluster):
infrastructure below the stages, started and stopped by their owners."""
