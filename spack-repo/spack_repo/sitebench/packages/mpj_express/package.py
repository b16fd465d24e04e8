# Copyright sitebench developers.
#
# SPDX-License-Identifier: (Apache-2.0 OR MIT)

from spack_repo.builtin.build_systems.bundle import BundlePackage

from spack.package import maintainers, version


class MpjExpress(BundlePackage):
    """MPJ Express, a Java message-passing library (the mpiJava 1.2 API), taken from the
    distribution as an external: Debian's ``libmpj-java`` installs its jars in
    ``/usr/share/mpj/lib`` and its configuration in ``/usr/share/mpj/conf``, the prefix a
    site registers (``mpj-express@0.44`` with ``prefix: /usr/share/mpj``, ``buildable:
    false``).

    It is not built here: its sources are not in the sitebench mirror. The recipe exists so
    that packages can depend on it and record its version; ``java-pingpong`` checks that the
    prefix holds ``lib/starter.jar`` and ``lib/mpj.jar`` and says what to install otherwise.
    """

    homepage = "http://mpjexpress.org/"
    maintainers("sitebench")

    version("0.44")
