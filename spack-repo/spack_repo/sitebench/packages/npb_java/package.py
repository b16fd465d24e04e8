# Copyright sitebench developers.
#
# SPDX-License-Identifier: (Apache-2.0 OR MIT)

import os

from spack_repo.builtin.build_systems.generic import Package

from spack.package import Executable, depends_on, find, maintainers, mkdirp, version


class NpbJava(Package):
    """NASA's NAS Parallel Benchmarks 3.0, Java version (NPB3.0-JAV: Java threads, a
    translation of NPB3.0-SER), as a substitute for the ARM-cluster study's NPB-MPJ, which is
    on no public repository.

    Source: ``github:josevnz/NPB3.0-JAV-FORK`` at commit f08380c3 (its README: the Java code
    is NASA's NPB3.0.tar.gz unchanged, a Gradle build added); the tarball is
    ``git archive --format=tar --prefix=npb-java-3.0/ f08380c3 NPB3.0-JAV/src NPB3.0-JAV/README
    | gzip -n``, in the source mirror (no upstream serves it at the URL below). Built with
    plain javac, no Gradle. Installs ``lib/npb-java.jar`` and ``bin/npb-java BENCHMARK
    -npTHREADS CLASS=X`` (BT, CG, FT, IS, LU, MG, SP; no EP in the Java version).
    """

    homepage = "https://www.nas.nasa.gov/software/npb.html"
    url = "https://github.com/josevnz/NPB3.0-JAV-FORK/archive/f08380c3/npb-java-3.0.tar.gz"
    maintainers("sitebench")

    version("3.0", sha256="c2602b29e9e7280c110c31810948faf1bc4b4aa5d4627619ef7aeea0f5e6de6b")

    depends_on("java@8:", type=("build", "run"))

    def install(self, spec, prefix):
        java_home = spec["java"].prefix
        javac = Executable(os.path.join(java_home, "bin", "javac"))
        jar = Executable(os.path.join(java_home, "bin", "jar"))
        sources = sorted(find(os.path.join("NPB3.0-JAV", "src", "main", "java"), "*.java"))
        mkdirp("classes", prefix.lib, prefix.bin)
        javac("-nowarn", "-d", "classes", *sources)
        jar("cf", prefix.lib.join("npb-java.jar"), "-C", "classes", ".")
        launcher = prefix.bin.join("npb-java")
        with open(launcher, "w") as fp:
            fp.write(
                "#!/bin/sh\n"
                "# npb-java BENCHMARK [-npTHREADS] CLASS=X: one NPB3.0-JAV benchmark.\n"
                f'java_home="${{JAVA_HOME:-{java_home}}}"\n'
                'if [ ! -x "$java_home/bin/java" ]; then\n'
                '    echo "npb-java: no JVM at $java_home ($java_home/bin/java missing): '
                "install a JDK (Debian: apt-get install default-jdk-headless) or set "
                'JAVA_HOME" >&2\n'
                "    exit 2\n"
                "fi\n"
                "if [ $# -lt 1 ]; then\n"
                '    echo "usage: npb-java BENCHMARK [-npN] CLASS=X" >&2\n'
                "    exit 2\n"
                "fi\n"
                'name=$(echo "$1" | tr a-z A-Z)\n'
                "shift\n"
                f'exec "$java_home/bin/java" -cp {prefix.lib.join("npb-java.jar")} '
                '"NPB3_0_JAV.$name" "$@"\n'
            )
        os.chmod(launcher, 0o755)
