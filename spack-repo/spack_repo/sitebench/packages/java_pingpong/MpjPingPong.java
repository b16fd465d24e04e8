// JavaPingPong over MPJ Express (the mpiJava 1.2 API).

import mpi.MPI;

public final class MpjPingPong implements JavaPingPong.Channel {
    public int rank() throws Exception { return MPI.COMM_WORLD.Rank(); }
    public int size() throws Exception { return MPI.COMM_WORLD.Size(); }
    public void send(byte[] buf, int count, int dest, int tag) throws Exception {
        MPI.COMM_WORLD.Send(buf, 0, count, MPI.BYTE, dest, tag);
    }
    public void recv(byte[] buf, int count, int source, int tag) throws Exception {
        MPI.COMM_WORLD.Recv(buf, 0, count, MPI.BYTE, source, tag);
    }
    public void barrier() throws Exception { MPI.COMM_WORLD.Barrier(); }
    // MPJ Express 0.44's MPI.Wtime() read 0.00 us for every size under multicore: the
    // JVM's monotonic clock instead (rank 0 alone times, so one clock serves).
    public double wtime() { return System.nanoTime() * 1e-9; }
    public void abort(int code) throws Exception { MPI.COMM_WORLD.Abort(code); }
    public void finish() throws Exception { MPI.Finalize(); }

    public static void main(String[] args) throws Exception {
        String[] rest = MPI.Init(args);
        JavaPingPong.run(new MpjPingPong(), "MPJ Express", rest);
    }
}
