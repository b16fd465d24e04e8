"""A private Slurm cluster on this machine (munge, slurmdbd, slurmctld, slurmd), on
loopback and unix sockets only: to try or test sitebench through Slurm."""

import shlex

description = "start, inspect or stop a private Slurm cluster here"

section = "running"

example = """
  ./sitebench cluster start --nodes 2           # a private Slurm of 2 nodes (as root)
  ./sitebench run --site local-slurm            # the quick suite through it
  ./sitebench cluster stop
"""


def setup_parser(p):
    p.add_argument("action", choices=("start", "stop", "status", "env"))
    p.add_argument(
        "--nodes",
        type=int,
        default=1,
        help="slurmd nodes (>1: one network namespace and a share of the CPUs each; default 1)",
    )
    p.add_argument(
        "--cpus-per-node",
        type=int,
        default=None,
        help="with --nodes > 1: CPUs each node declares, more than its share of the host "
        "(ranks share cores: placement and traffic as on bigger nodes, timings meaningless)",
    )
    p.add_argument(
        "--accounting",
        choices=("slurmdbd", "none"),
        default="slurmdbd",
        help="slurmdbd on a private MariaDB (default; sacct works) or none",
    )
    p.add_argument("--port", type=int, default=None, help="first of 3 ports (default 6817)")
    p.add_argument(
        "--dir",
        default=None,
        help="where everything lives (default .sitebench/slurm, or $SITEBENCH_SLURM_DIR)",
    )


def command(args):
    from sitebench.common.errors import SitebenchError
    from sitebench.services.slurm.cluster import USE_ANOTHER, LocalCluster

    cluster = LocalCluster(args.dir)
    if args.action == "start":
        started = cluster.start(
            nodes=args.nodes,
            accounting=args.accounting,
            port=args.port,
            cpus_per_node=args.cpus_per_node,
        )
        nodes = ", ".join(f"{n.name} ({n.address}, {n.cpus} CPUs)" for n in started.nodes)
        print(f"Slurm cluster up in {cluster.layout.root}: {nodes}; accounting {args.accounting}")
        print(f"use it: export SLURM_CONF={cluster.layout.slurm_conf}")
    elif args.action == "stop":
        stopped = cluster.stop()
        print("stopped: " + (", ".join(stopped) if stopped else "nothing was running"))
    elif args.action == "status":
        running = cluster.running()
        if not running:
            print(f"no cluster running from {cluster.layout.root}")
            print(f"one started elsewhere: {USE_ANOTHER}")
            return 1
        for label, pid in running.items():
            print(f"{label}: pid {pid}")
        for node, state in cluster.sinfo().items():
            print(f"node {node}: {state}")
    else:  # env
        if "slurmctld" not in cluster.running():
            raise SitebenchError(
                f"no Slurm cluster is running from {cluster.layout.root}: there is no "
                "SLURM_CONF to point at",
                f"start one (`./sitebench cluster start`, as root), or use one started "
                f"elsewhere: {USE_ANOTHER}",
            )
        print(f"export SLURM_CONF={shlex.quote(str(cluster.layout.slurm_conf))}")
    return 0
