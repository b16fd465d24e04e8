// JavaPingPong over Open MPI's Java bindings (mpi.jar built from Open MPI's own sources,
// libmpi_java.so from the Open MPI install).

import mpi.MPI;

public final class OmpiPingPong implements JavaPingPong.Channel {
    public int rank() throws Exception { return MPI.COMM_WORLD.getRank(); }
    public int size() throws Exception { return MPI.COMM_WORLD.getSize(); }
    public void send(byte[] buf, int count, int dest, int tag) throws Exception {
        MPI.COMM_WORLD.send(buf, count, MPI.BYTE, dest, tag);
    }
    public void recv(byte[] buf, int count, int source, int tag) throws Exception {
        MPI.COMM_WORLD.recv(buf, count, MPI.BYTE, source, tag);
    }
    public void barrier() throws Exception { MPI.COMM_WORLD.barrier(); }
    // The same clock as MpjPingPong's, so the two measure alike.
    public double wtime() { return System.nanoTime() * 1e-9; }
    public void abort(int code) throws Exception { MPI.COMM_WORLD.abort(code); }
    public void finish() throws Exception { MPI.Finalize(); }

    public static void main(String[] args) throws Exception {
        MPI.Init(args);
        JavaPingPong.run(new OmpiPingPong(), "Open MPI Java bindings", args);
    }
}
