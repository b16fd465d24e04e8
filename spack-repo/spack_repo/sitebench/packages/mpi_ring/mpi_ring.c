/*
 * mpi_ring: every rank exchanges one message with each of its two neighbours around a ring
 * (rank-1 and rank+1 modulo the size) per ring step: two MPI_Irecv, two MPI_Isend, one
 * MPI_Waitall. The time per step is the slowest rank's, over the timed steps.
 *
 * Verification: every message carries (sender, step, direction); each rank counts the
 * messages it received whose contents are the expected ones, and rank 0 checks the sum
 * against 2 x ranks x steps (warm-up included).
 *
 * Usage: mpi_ring [-s bytes] [-n steps] [-w warmup]
 * Exit status: 0 passed, 1 message count wrong, 2 bad input.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VERSION "1.0"

int main(int argc, char **argv)
{
    int rank, size, bytes = 16, steps = 1000, warmup = 100;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "-s") && a + 1 < argc)
            bytes = atoi(argv[++a]);
        else if (!strcmp(argv[a], "-n") && a + 1 < argc)
            steps = atoi(argv[++a]);
        else if (!strcmp(argv[a], "-w") && a + 1 < argc)
            warmup = atoi(argv[++a]);
        else
            bytes = -1;
    }
    if (bytes < 3 * (int)sizeof(int) || steps < 1 || warmup < 0) {
        if (rank == 0)
            fprintf(stderr, "mpi_ring: error: usage: mpi_ring [-s bytes (at least %d)] "
                    "[-n steps (at least 1)] [-w warmup (at least 0)]\n", 3 * (int)sizeof(int));
        MPI_Finalize();
        return 2;
    }
    int left = (rank + size - 1) % size, right = (rank + 1) % size;
    char *out[2], *in[2];
    for (int s = 0; s < 2; s++) {
        out[s] = calloc(bytes, 1);
        in[s] = calloc(bytes, 1);
        if (!out[s] || !in[s]) {
            fprintf(stderr, "mpi_ring: error: cannot allocate %d bytes\n", bytes);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    long good = 0;
    double t0 = 0;
    MPI_Request req[4];
    for (int step = 0; step < warmup + steps; step++) {
        if (step == warmup) {
            MPI_Barrier(MPI_COMM_WORLD);
            t0 = MPI_Wtime();
        }
        /* direction 0: sent to the right (received from the left); 1: sent to the left */
        int head[2][3] = {{rank, step, 0}, {rank, step, 1}};
        memcpy(out[0], head[0], sizeof head[0]);
        memcpy(out[1], head[1], sizeof head[1]);
        MPI_Irecv(in[0], bytes, MPI_BYTE, left, 0, MPI_COMM_WORLD, &req[0]);
        MPI_Irecv(in[1], bytes, MPI_BYTE, right, 1, MPI_COMM_WORLD, &req[1]);
        MPI_Isend(out[0], bytes, MPI_BYTE, right, 0, MPI_COMM_WORLD, &req[2]);
        MPI_Isend(out[1], bytes, MPI_BYTE, left, 1, MPI_COMM_WORLD, &req[3]);
        MPI_Waitall(4, req, MPI_STATUSES_IGNORE);
        int got[2][3];
        memcpy(got[0], in[0], sizeof got[0]);
        memcpy(got[1], in[1], sizeof got[1]);
        good += got[0][0] == left && got[0][1] == step && got[0][2] == 0;
        good += got[1][0] == right && got[1][1] == step && got[1][2] == 1;
    }
    double elapsed = MPI_Wtime() - t0, slowest;
    long total;
    MPI_Reduce(&elapsed, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&good, &total, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    int failed = 0;
    if (rank == 0) {
        long expected = 2L * size * (warmup + steps);
        failed = total != expected;
        printf("mpi_ring %s\n", VERSION);
        printf("ranks: %d\n", size);
        printf("message size: %d B\n", bytes);
        printf("steps: %d (warmup %d)\n", steps, warmup);
        printf("time: %.6f s\n", slowest);
        printf("time per step: %.4f us\n", slowest / steps * 1e6);
        printf("messages: %ld received intact of %ld expected: %s\n", total, expected,
               failed ? "FAILED" : "PASSED");
    }
    MPI_Bcast(&failed, 1, MPI_INT, 0, MPI_COMM_WORLD);
    for (int s = 0; s < 2; s++) {
        free(out[s]);
        free(in[s]);
    }
    MPI_Finalize();
    return failed;
}
