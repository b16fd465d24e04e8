// sitebench's Java MPI ping-pong, following the OSU Micro-Benchmarks' method: for every
// message size from 1 B to the largest (powers of two), a number of warm-up round trips, then
// timed round trips between ranks 0 and 1; the latency is half the round-trip time, the
// bandwidth the message size over that one-way time (MB/s, 10^6 bytes). Every received
// message is checked (its first, middle and last byte carry the size and the iteration).
//
// The MPI calls sit behind Channel, so one source serves two Java MPI APIs: MPJ Express
// (mpiJava 1.2: Send/Recv/Wtime, MpjChannel) and Open MPI's Java bindings (send/recv/wtime,
// OmpiChannel); each is compiled against its own mpi.jar.
//
// Usage: <main class> [max_size] [small_warmup small_iters large_warmup large_iters]
// (defaults 4194304 100 10000 10 1000, OSU's; "large" is above 8192 B, as in OSU).

import java.util.Locale;

public final class JavaPingPong {
    /** The MPI calls the ping-pong needs. */
    public interface Channel {
        int rank() throws Exception;
        int size() throws Exception;
        void send(byte[] buf, int count, int dest, int tag) throws Exception;
        void recv(byte[] buf, int count, int source, int tag) throws Exception;
        void barrier() throws Exception;
        double wtime() throws Exception;
        void abort(int code) throws Exception;
        void finish() throws Exception;
    }

    static final int LARGE_ABOVE = 8192;

    private static void stamp(byte[] buf, int count, int it) {
        byte b = (byte) (31 * Integer.numberOfTrailingZeros(count) + it);
        buf[0] = b;
        buf[count / 2] = b;
        buf[count - 1] = b;
    }

    private static boolean stamped(byte[] buf, int count, int it) {
        byte b = (byte) (31 * Integer.numberOfTrailingZeros(count) + it);
        return buf[0] == b && buf[count / 2] == b && buf[count - 1] == b;
    }

    /** ``count`` round trips of ``size`` bytes; false (after MPI_Abort) on wrong content. */
    private static boolean pingpong(Channel ch, int rank, byte[] buf, int size, int count)
            throws Exception {
        for (int i = 0; i < count; i++) {
            int it = i & 0x3f;
            if (rank == 0) {
                stamp(buf, size, it);
                ch.send(buf, size, 1, 1);
                ch.recv(buf, size, 1, 1);
                if (!stamped(buf, size, it + 1)) {
                    System.out.printf(Locale.ROOT,
                        "# error: wrong content at %d B, iteration %d%n", size, i);
                    System.out.flush();
                    ch.abort(3);
                    return false;
                }
            } else {
                ch.recv(buf, size, 0, 1);
                if (!stamped(buf, size, it)) {
                    System.out.printf(Locale.ROOT,
                        "# error: wrong content at %d B, iteration %d%n", size, i);
                    System.out.flush();
                    ch.abort(3);
                    return false;
                }
                stamp(buf, size, it + 1);
                ch.send(buf, size, 0, 1);
            }
        }
        return true;
    }

    public static void run(Channel ch, String api, String[] args) throws Exception {
        int rank = ch.rank();
        int ranks = ch.size();
        int maxSize = args.length > 0 ? Integer.parseInt(args[0]) : 4194304;
        int smallWarmup = args.length > 4 ? Integer.parseInt(args[1]) : 100;
        int smallIters = args.length > 4 ? Integer.parseInt(args[2]) : 10000;
        int largeWarmup = args.length > 4 ? Integer.parseInt(args[3]) : 10;
        int largeIters = args.length > 4 ? Integer.parseInt(args[4]) : 1000;
        if (ranks != 2) {
            if (rank == 0) {
                System.out.println("# error: the ping-pong needs exactly 2 ranks, got " + ranks);
            }
            System.out.flush();
            ch.barrier(); // every rank waits for rank 0's line before the abort kills it
            ch.abort(2);
            return;
        }
        if (Integer.bitCount(maxSize) != 1) {
            if (rank == 0) {
                System.out.println("# error: max_size must be a power of two, got " + maxSize);
            }
            System.out.flush();
            ch.abort(2);
            return;
        }
        byte[] buf = new byte[maxSize];
        if (rank == 0) {
            System.out.println("# sitebench Java ping-pong v1.0");
            System.out.println("# MPI: " + api);
            System.out.println("# Java: " + System.getProperty("java.vm.name") + " "
                + System.getProperty("java.version"));
            System.out.printf(Locale.ROOT, "# Iterations: %d+%d up to %d B, %d+%d above%n",
                smallWarmup, smallIters, LARGE_ABOVE, largeWarmup, largeIters);
            System.out.println("# Size    Latency (us)    Bandwidth (MB/s)");
        }
        // Unlike OSU's C, the first sizes would otherwise time the JVM's interpreter and
        // its just-in-time compiler (85 us at 1 B after 200 warm-up round trips, 0.8 us at
        // 2 B, measured): one untimed pass over the small sizes first.
        for (int size = 1; size <= Math.min(maxSize, LARGE_ABOVE); size *= 2) {
            if (!pingpong(ch, rank, buf, size, smallWarmup)) {
                return;
            }
        }
        for (int size = 1; size <= maxSize; size *= 2) {
            boolean large = size > LARGE_ABOVE;
            int warmup = large ? largeWarmup : smallWarmup;
            int iters = large ? largeIters : smallIters;
            ch.barrier();
            if (!pingpong(ch, rank, buf, size, warmup)) {
                return;
            }
            double start = ch.wtime();
            if (!pingpong(ch, rank, buf, size, iters)) {
                return;
            }
            if (rank == 0) {
                double oneWay = (ch.wtime() - start) / (2.0 * iters);
                System.out.printf(Locale.ROOT, "%-10d%14.2f%20.2f%n",
                    size, oneWay * 1e6, size / oneWay / 1e6);
                System.out.flush();
            }
        }
        ch.barrier();
        if (rank == 0) {
            System.out.println("# done");
            System.out.flush();
        }
        ch.finish();
    }
}
