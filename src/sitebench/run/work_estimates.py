"""Seconds of work of each benchmark at floor rates, for its time limit (time_limits.py).

Each estimate counts the case's work from what sizes it (matrix order, array and grid sizes,
iterations, steps, rows, particles, NPB class) and divides it by the rate of the slowest
capture of that benchmark on the project's 2-core VM (named with each rate; some were taken
while the VM was busy), :data:`FLOOR_SLOWDOWN` times slower. HPL's and Gadget-2's rates are
per core (their 2-rank captures halved); the others are the capture's whole rate, which on
this VM was no faster on 2 ranks or threads than on 1. tests/test_work_estimates.py holds
every capture to its estimate. The load factor and start-up allowance are added by
``time_limits.launch_limit_s``.
"""

import math
import re

from sitebench.run import time_limits

#: How many times slower than one core of the project VM the floor is.
FLOOR_SLOWDOWN = 20

#: HPL: flop/s per core, reference BLAS built at -O0 (the slowest build measured),
#: N=5000 on 2 ranks: 11.7 Gflop/s (tests/fixtures/hpl/hpl-2.3_refblas_O0_*).
HPL_FLOPS_PER_CORE = 11.7e9 / 2
#: STREAM: bytes/s of one thread, Triad at 80M elements (tests/fixtures/stream, t1: 36.8 GB/s).
STREAM_BYTES_PER_S = 36.8e9
#: Bytes a STREAM iteration moves per array element: Copy 16, Scale 16, Add 24, Triad 24.
STREAM_BYTES_PER_ELEMENT = 80
#: STREAM's NTIMES (its default: "Each kernel will be executed 10 times").
STREAM_NTIMES = 10
#: Jacobi: lattice updates/s, 120^3 (tests/fixtures/jacobi: 653 MLUP/s on 1 rank, 223 on 2
#: ranks of a busy VM).
JACOBI_UPDATES_PER_S = 223e6
#: Jacobi's untimed warm-up iterations (its output: "warmup 5").
JACOBI_WARMUP = 5
#: Ring's warm-up steps before the timed ones ("warmup 100").
RING_WARMUP = 100
#: NPB-MPI at class A, seconds: the slowest of 1 and 2 ranks, NPB 3.4.2 and 3.4.3
#: (tests/fixtures/npb/npb-3.4.*-mpi_*.A_np*.txt).
NPB_CLASS_A_S = {"cg": 0.49, "ep": 2.86, "ft": 1.14, "is": 0.16, "lu": 13.45, "mg": 0.51}
#: NPB3.0-JAV at class A on 2 threads, seconds (reframe-checks/README.md, at load 6-10; LU
#: "ran over 100 s": 100), times 2 for one core.
NPB_JAVA_CLASS_A_S = {"cg": 3.0 * 2, "ft": 11.8 * 2, "is": 3.6 * 2, "mg": 6.0 * 2, "lu": 100 * 2}
#: NPB's classes grow about 4x in size from one to the next up to C, and about 16x from C on
#: (NAS's problem sizes page); S and W are measured (fixtures above) and counted as A.
NPB_GROWTH = {"S": 1, "W": 1, "A": 1, "B": 4, "C": 16, "D": 16 * 16, "E": 16**3, "F": 16**4}
#: PARSEC blackscholes: option prices/s, 2,000,000 options x 100 runs in 13.496 s of ROI
#: (tests/fixtures/parsec/sitebench-rfm_quick_blackscholes_t2.txt, 2 threads on a busy VM;
#: 9.459 s on 1 thread).
BLACKSCHOLES_PRICES_PER_S = 2_000_000 * 100 / 13.496
#: Runs blackscholes makes over its options (its output: "Num of Runs: 100").
BLACKSCHOLES_RUNS = 100
#: PARSEC fluidanimate: particle-frames/s, 102,850 particles x 80 frames in 20.645 s of ROI
#: (tests/fixtures/parsec/sitebench-rfm_quick_fluidanimate_t2.txt; 18.814 s on 1 thread).
FLUID_PARTICLE_FRAMES_PER_S = 102_850 * 80 / 20.645
#: Gadget-2: particle-steps/s per core, lcdm_gas (65,536 particles) to a = 1, 605 steps in
#: 196.9 s on 2 ranks (reframe-checks/README.md, load 2.7).
GADGET2_PARTICLE_STEPS_PER_S = 65_536 * 605 / 196.9 / 2
#: Gadget-2's timesteps per e-fold of the scale factor: lcdm_gas's 605 steps from 1/11 to 1
#: (its quick run, 9 steps to 0.11, takes fewer per e-fold).
GADGET2_STEPS_PER_EFOLD = 605 / math.log(11)
#: Particles of the problems whose size is known (gas and dark matter of lcdm_gas).
GADGET2_PARTICLES = {"lcdm_gas": 2 * 32_768}
#: sysbench's prepare: rows/s inserted, 100,000 rows in 1.64 s
#: (tests/fixtures/sysbench/stage-quick-t1/mariadb-status.json).
SYSBENCH_ROWS_PER_S = 100_000 / 1.64
#: memaccess: streaming bytes/s and seconds per dependent load on one core, 512 MiB
#: buffer, small pages (tests/fixtures/pages/memaccess-small.out: 19,970 MB/s, 254.7 ns).
MEMACCESS_BYTES_PER_S = 19_970e6
MEMACCESS_LOAD_S = 254.7e-9


def at_floor(seconds_here):
    """Seconds on one core of the project VM -> seconds at the floor."""
    return seconds_here * FLOOR_SLOWDOWN


def hpl(n):
    """HPL at order ``n``: HPL's own count, 2/3 n^3 + 2 n^2 flops (its Gflops line)."""
    return at_floor((2 / 3 * n**3 + 2 * n**2) / HPL_FLOPS_PER_CORE)


def stream(array_size, ntimes=STREAM_NTIMES):
    """STREAM over ``array_size`` elements per array, ``ntimes`` iterations of its four
    kernels; the arrays' initialisation and check are a few more passes (+3)."""
    passes = ntimes + 3
    return at_floor(STREAM_BYTES_PER_ELEMENT * array_size * passes / STREAM_BYTES_PER_S)


def jacobi(edge, iterations):
    """The 7-point Jacobi sweep over ``edge``^3 points, warm-up and timed iterations."""
    return at_floor(edge**3 * (iterations + JACOBI_WARMUP) / JACOBI_UPDATES_PER_S)


def ring(ranks, steps, message_size):
    """The ring: every step each rank sends one message each way (2 x ranks x steps in
    all, warm-up included), at the message-passing floor rates of time_limits."""
    messages = 2 * ranks * (steps + RING_WARMUP)
    return time_limits.message_work_s([(messages * message_size, messages)])


def npb_growth(npb_class):
    if npb_class not in NPB_GROWTH:
        raise ValueError(f"NPB class {npb_class!r} is not one of {' '.join(NPB_GROWTH)}")
    return NPB_GROWTH[npb_class]


def npb(benchmark, npb_class):
    """An NPB-MPI kernel at ``npb_class``, from its class A time; None if not measured."""
    if benchmark not in NPB_CLASS_A_S:
        return None
    return at_floor(NPB_CLASS_A_S[benchmark] * npb_growth(npb_class))


def npb_java(benchmark, npb_class):
    """An NPB3.0-JAV kernel at ``npb_class``, from its class A time; None if not measured."""
    if benchmark not in NPB_JAVA_CLASS_A_S:
        return None
    return at_floor(NPB_JAVA_CLASS_A_S[benchmark] * npb_growth(npb_class))


def blackscholes(options, runs=BLACKSCHOLES_RUNS):
    return at_floor(options * runs / BLACKSCHOLES_PRICES_PER_S)


def fluidanimate(fluid_input, frames):
    """fluidanimate over ``frames`` frames of an input named by its particles
    (``in_100K.fluid``: 100,000, its real count 102,850 rounded up); None for another name."""
    found = re.fullmatch(r"in_(\d+)K\.fluid", fluid_input)
    if not found:
        return None
    particles = int(found.group(1)) * 1100  # PARSEC's "100K" holds 102,850: 3 % up, 10 % room
    return at_floor(particles * frames / FLUID_PARTICLE_FRAMES_PER_S)


def gadget2(problem, time_begin, time_max):
    """Gadget-2 from scale factor ``time_begin`` to ``time_max``; None for a problem whose
    particle count is not known here (another problem's parameter file)."""
    particles = GADGET2_PARTICLES.get(problem)
    if particles is None or not 0 < time_begin < time_max:
        return None
    steps = math.ceil(GADGET2_STEPS_PER_EFOLD * math.log(time_max / time_begin))
    return at_floor(particles * steps / GADGET2_PARTICLE_STEPS_PER_S)


def sysbench(rows, run_time, start_timeout):
    """sysbench: the server's start (its own timeout), the prepare's rows at the floor and
    the run's fixed ``run_time`` seconds, which a slower machine does not lengthen."""
    return start_timeout + at_floor(rows / SYSBENCH_ROWS_PER_S) + run_time


def memaccess(buffer_mib, loads, passes):
    """memaccess: filling the buffer and ``passes`` streaming passes, then ``loads``
    dependent random loads."""
    streamed = buffer_mib * 2**20 * (passes + 1) / MEMACCESS_BYTES_PER_S
    return at_floor(streamed + loads * MEMACCESS_LOAD_S)
