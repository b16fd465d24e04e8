#!/bin/bash
# java-pingpong DEVICE [MAX_SIZE SMALL_WARMUP SMALL_ITERS LARGE_WARMUP LARGE_ITERS]
#
# Runs sitebench's Java ping-pong (installed by Spack's java-pingpong; the recipe fills in
# the paths below) on one of three Java message-passing set-ups:
#   multicore  MPJ Express, both ranks as threads of one JVM (run it once, no mpirun)
#   niodev     MPJ Express over TCP, its daemon private to the run (mpj-niodev-run; once)
#   ompi       Open MPI's Java bindings: ONE RANK, started by Open MPI's mpirun -np 2
# JAVA_HOME, if set, overrides the JDK the package was built with.
set -u

prefix="@PREFIX@"
java_home="${JAVA_HOME:-@JAVA_HOME@}"
ompi_lib="@OMPI_LIB@"

die() {
    echo "java-pingpong: $*" >&2
    exit 2
}

[ -x "$java_home/bin/java" ] || die "no JVM at $java_home ($java_home/bin/java missing): install a JDK (Debian: apt-get install default-jdk-headless) or set JAVA_HOME to one"
export JAVA_HOME="$java_home"
export PATH="$java_home/bin:$PATH"
export MPJ_HOME="$prefix/mpj"

[ $# -ge 1 ] || die "usage: java-pingpong multicore|niodev|ompi [max_size small_warmup small_iters large_warmup large_iters]"
device=$1
shift
case "$device" in
multicore)
    exec java -jar "$MPJ_HOME/lib/starter.jar" -np 2 -dev multicore -jar "$prefix/lib/pingpong-mpj.jar" "$@"
    ;;
niodev)
    exec "$prefix/bin/mpj-niodev-run" -np 2 -jar "$prefix/lib/pingpong-mpj.jar" "$@"
    ;;
ompi)
    [ -f "$prefix/lib/pingpong-ompi.jar" ] || die "built without Open MPI's Java bindings (java-pingpong~ompi)"
    [ -e "$ompi_lib/libmpi_java.so" ] || die "no libmpi_java.so in $ompi_lib: Open MPI without its Java bindings"
    exec java -Djava.library.path="$ompi_lib" -cp "$prefix/lib/pingpong-ompi.jar:$prefix/lib/mpi.jar" OmpiPingPong "$@"
    ;;
*)
    die "unknown device '$device' (multicore, niodev, ompi)"
    ;;
esac
