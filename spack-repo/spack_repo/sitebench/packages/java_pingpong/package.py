# Copyright sitebench developers.
#
# SPDX-License-Identifier: (Apache-2.0 OR MIT)

import glob
import os
import shutil

from spack_repo.builtin.build_systems.generic import Package

from spack.package import (
    Executable,
    InstallError,
    depends_on,
    filter_file,
    install,
    maintainers,
    mkdirp,
    resource,
    variant,
    version,
    working_dir,
)

_HERE = os.path.dirname(os.path.abspath(__file__))

#: The digests of the sources beside this recipe. Spack's package hash leaves out directives
#: (version, resource), so a digest changed only inside them kept the hash: the binary cache
#: went on serving the mpj-niodev-run that hung as an ordinary user (issue 38) after it was
#: fixed. Kept here, outside the directives, a changed source changes the hash.
SOURCES_SHA256 = {
    "JavaPingPong.java": "e4630a38fe2f88159ec68531e96d454d5bdba48dc239dd3348308f1173f6bf6e",
    "MpjPingPong.java": "32b98b36bc6191531b434ee92f6af67610c96d3da4a28a9014f70515d2692419",
    "mpj-niodev-run": "be1ec3bb90b329cabfda923c1a9403b03cafc1a06c3acdb500a95d93a9f681f4",
    "java-pingpong.sh": "d4ef618122ebe43ed3eb1307989666834ae8ff018d8b632d49f19d0dd01a138d",
    "OmpiPingPong.java": "47ec3fba1e0afe60de664e920e5793e3cb687be8ffcc5b424a8d1f933b50ab77",
}

#: Open MPI's Java sources (``ompi/mpi/java/java/*.java`` and LICENSE) by Open MPI version:
#: a ``git archive`` of the release tag, gzip -n (``github:open-mpi/ompi`` tag v4.1.4 =
#: commit ffb0adcd), put in the source mirror as the build notes say. mpi.jar must match
#: the libmpi_java.so of the Open MPI it runs with.
OMPI_JAVA_SOURCES = {"4.1.4": "9abc2e7eefefa4ec0335c7a0fd6f35e9fd383d037743a5648b946c49f0d02751"}


class JavaPingpong(Package):
    """sitebench's Java MPI ping-pong (OSU's method: warm-up and timed round trips per
    message size, 1 B to 4 MiB; latency and bandwidth), for MPJ Express and for Open MPI's
    Java bindings.

    The sources sit beside this recipe and are fetched from there by their sha256:
    ``JavaPingPong.java`` (the benchmark, behind a small channel interface),
    ``MpjPingPong.java`` (MPJ Express's mpiJava 1.2 API), ``OmpiPingPong.java`` (Open
    MPI's API), ``java-pingpong.sh`` (the launcher) and ``mpj-niodev-run`` (runs an MPJ
    program on the niodev device with a private daemon in a network namespace of its own).

    Installs ``lib/pingpong-mpj.jar``; ``mpj/``, an MPJ_HOME with copies of MPJ's jars and
    configuration plus ``log4j-1.2.jar`` and ``commons-io.jar`` beside ``starter.jar``
    (Debian's libmpj-java lacks that link, so its starter dies with NoClassDefFoundError:
    org/apache/log4j/Layout; the jars are copied, since Java resolves a manifest's Class-Path
    from the jar's real location); ``bin/mpj-niodev-run``; ``bin/java-pingpong DEVICE``
    (multicore, niodev, ompi), which runs the program with the JDK and Open MPI it was
    built with. With ``+ompi``: ``lib/mpi.jar``, compiled from Open MPI's own Java sources
    (Debian ships libmpi_java.so and mpijavac but no mpi.jar), and ``lib/pingpong-ompi.jar``.
    """

    homepage = "https://github.com/sitebench/sitebench"
    url = f"file://{_HERE}/JavaPingPong.java"
    maintainers("sitebench")

    version(
        "1.0",
        sha256=SOURCES_SHA256["JavaPingPong.java"],
        url=f"file://{_HERE}/JavaPingPong.java",
        expand=False,
    )

    variant(
        "ompi",
        default=True,
        description="Also build for Open MPI's Java bindings (mpi.jar from Open MPI's sources)",
    )

    depends_on("java@8:", type=("build", "run"))
    depends_on("mpj-express@0.44", type=("build", "run"))
    depends_on("openmpi+java", when="+ompi", type=("build", "link", "run"))
    for _v in OMPI_JAVA_SOURCES:
        depends_on(f"openmpi@{_v}", when="+ompi")

    resource(
        name="MpjPingPong.java",
        url=f"file://{_HERE}/MpjPingPong.java",
        sha256=SOURCES_SHA256["MpjPingPong.java"],
        expand=False,
        placement="mpj",
    )
    resource(
        name="mpj-niodev-run",
        url=f"file://{_HERE}/mpj-niodev-run",
        sha256=SOURCES_SHA256["mpj-niodev-run"],
        expand=False,
        placement="niodev",
    )
    resource(
        name="java-pingpong.sh",
        url=f"file://{_HERE}/java-pingpong.sh",
        sha256=SOURCES_SHA256["java-pingpong.sh"],
        expand=False,
        placement="launcher",
    )
    resource(
        name="OmpiPingPong.java",
        url=f"file://{_HERE}/OmpiPingPong.java",
        sha256=SOURCES_SHA256["OmpiPingPong.java"],
        expand=False,
        placement="ompi",
        when="+ompi",
    )
    for _v, _sha256 in OMPI_JAVA_SOURCES.items():
        resource(
            name=f"ompi-java-{_v}",
            url=f"https://github.com/open-mpi/ompi/archive/v{_v}/ompi-java-{_v}.tar.gz",
            sha256=_sha256,
            destination="ompi-java",
            when=f"+ompi ^openmpi@{_v}",
        )

    def mpj_jars(self):
        """MPJ's lib/ and the folder beside it (Debian's /usr/share/java), or InstallError."""
        prefix = self.spec["mpj-express"].prefix
        lib = os.path.join(prefix, "lib")
        for jar in ("starter.jar", "mpj.jar", "daemon.jar"):
            if not os.path.isfile(os.path.join(lib, jar)):
                raise InstallError(
                    f"no MPJ Express at {prefix} ({lib}/{jar} missing): install it "
                    f"(Debian: apt-get install libmpj-java) and register it as the external "
                    f"mpj-express@0.44 with that prefix (Debian: /usr/share/mpj)"
                )
        return lib, os.path.normpath(os.path.join(prefix, "..", "java"))

    def install(self, spec, prefix):
        java_home = spec["java"].prefix
        javac = Executable(os.path.join(java_home, "bin", "javac"))
        jar = Executable(os.path.join(java_home, "bin", "jar"))
        mpj_lib, beside = self.mpj_jars()
        mkdirp(prefix.lib, prefix.bin)

        # An MPJ_HOME of real files, log4j and commons-io beside starter.jar.
        home = os.path.join(prefix, "mpj")
        mkdirp(os.path.join(home, "lib"), os.path.join(home, "conf"))
        for path in glob.glob(os.path.join(mpj_lib, "*.jar")):
            shutil.copyfile(path, os.path.join(home, "lib", os.path.basename(path)))
        for name in ("log4j-1.2.jar", "commons-io.jar"):
            found = [d for d in (mpj_lib, beside) if os.path.isfile(os.path.join(d, name))]
            if not found:
                raise InstallError(
                    f"{name} is neither in {mpj_lib} nor in {beside}: MPJ's starter and "
                    f"daemon need it (Debian: liblog4j1.2-java, libcommons-io-java)"
                )
            shutil.copyfile(os.path.join(found[0], name), os.path.join(home, "lib", name))
        conf = os.path.join(self.spec["mpj-express"].prefix, "conf", "mpjexpress.conf")
        shutil.copyfile(conf, os.path.join(home, "conf", "mpjexpress.conf"))
        install(os.path.join("niodev", "mpj-niodev-run"), prefix.bin)
        os.chmod(os.path.join(prefix.bin, "mpj-niodev-run"), 0o755)
        launcher = os.path.join(prefix.bin, "java-pingpong")
        install(os.path.join("launcher", "java-pingpong.sh"), launcher)
        ompi_lib = spec["openmpi"].prefix.lib if spec.satisfies("+ompi") else ""
        for key, value in (("PREFIX", prefix), ("JAVA_HOME", java_home), ("OMPI_LIB", ompi_lib)):
            filter_file(f"@{key}@", str(value), launcher, string=True)
        os.chmod(launcher, 0o755)

        def build(name, classpath, sources, main=None):
            classes = f"classes-{name}"
            mkdirp(classes)
            javac("-nowarn", "-d", classes, "-cp", classpath, *sources)
            # MPJ's multicore device loads the program only from a jar with a Main-Class
            # (``-jar``); with ``-cp <jar>`` it finds no class (and exits 0).
            entry = (
                ["cfe", os.path.join(prefix.lib, f"{name}.jar"), main]
                if main
                else ["cf", os.path.join(prefix.lib, f"{name}.jar")]
            )
            jar(*entry, "-C", classes, ".")

        build(
            "pingpong-mpj",
            os.path.join(home, "lib", "mpj.jar"),
            ["JavaPingPong.java", os.path.join("mpj", "MpjPingPong.java")],
            main="MpjPingPong",
        )
        if spec.satisfies("+ompi"):
            sources = glob.glob(os.path.join("ompi-java", "*", "ompi", "mpi", "java", "java"))
            if len(sources) != 1:
                raise InstallError(f"Open MPI's Java sources not found in {os.getcwd()}")
            with working_dir(sources[0]):
                build("mpi", ".", sorted(glob.glob("*.java")))
            build(
                "pingpong-ompi",
                prefix.lib.join("mpi.jar"),
                ["JavaPingPong.java", os.path.join("ompi", "OmpiPingPong.java")],
                main="OmpiPingPong",
            )
