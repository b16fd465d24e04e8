/*
 * jacobi3d: 3D Jacobi sweeps of Laplace's equation on an nx x ny x nz grid of interior
 * points, decomposed over the MPI ranks with MPI_Dims_create/MPI_Cart_create, one halo
 * layer exchanged with every face neighbour per iteration (MPI_Sendrecv of subarray types).
 *
 * Known solution: the boundary and the start are u* = i + 2j + 3k (discretely harmonic, a
 * fixed point of the sweep) plus the lowest eigenmode e = sin(pi i/(nx+1)) sin(pi j/(ny+1))
 * sin(pi k/(nz+1)) in the interior. A Jacobi sweep maps e to mu e with
 * mu = (cos(pi/(nx+1)) + cos(pi/(ny+1)) + cos(pi/(nz+1))) / 3, so after n sweeps
 * u = u* + mu^n e exactly; the check compares every point with it (a wrong halo fails).
 *
 * Usage: jacobi3d [-n nx ny nz] [-i iterations] [-w warmup]
 * Prints MLUP/s, time per iteration, the neighbour count k and halo volume C (MB, 1e6 bytes,
 * sent per process per iteration; both the maximum over the ranks) and the check.
 * Exit status: 0 passed, 1 check failed, 2 bad input (a rank count or domain it cannot take).
 */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VERSION "1.0"

static int rank;

static void refuse(const char *msg)
{
    if (rank == 0)
        fprintf(stderr, "jacobi3d: error: %s\n", msg);
    MPI_Finalize();
    exit(2);
}

int main(int argc, char **argv)
{
    int size, n[3] = {64, 64, 64}, iters = 100, warmup = 5;
    char msg[256];

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "-n") && a + 3 < argc) {
            for (int d = 0; d < 3; d++)
                n[d] = atoi(argv[++a]);
        } else if (!strcmp(argv[a], "-i") && a + 1 < argc) {
            iters = atoi(argv[++a]);
        } else if (!strcmp(argv[a], "-w") && a + 1 < argc) {
            warmup = atoi(argv[++a]);
        } else {
            snprintf(msg, sizeof msg, "unknown argument '%s' (usage: jacobi3d [-n nx ny nz] "
                     "[-i iterations] [-w warmup])", argv[a]);
            refuse(msg);
        }
    }
    if (n[0] < 1 || n[1] < 1 || n[2] < 1 || iters < 1 || warmup < 0)
        refuse("grid sizes and iterations must be at least 1, warmup at least 0");

    int dims[3] = {0, 0, 0}, periods[3] = {0, 0, 0}, coords[3];
    MPI_Dims_create(size, 3, dims);
    for (int d = 0; d < 3; d++) {
        if (n[d] % dims[d]) {
            snprintf(msg, sizeof msg, "%d ranks decompose as %d x %d x %d, which does not "
                     "divide the grid %d x %d x %d (dimension %d: %d %% %d != 0); choose a rank "
                     "count whose factors divide the grid", size, dims[0], dims[1], dims[2],
                     n[0], n[1], n[2], d, n[d], dims[d]);
            refuse(msg);
        }
        if (n[d] / dims[d] < 2) {
            snprintf(msg, sizeof msg, "domain too small for %d ranks: %d points in dimension "
                     "%d over %d ranks leaves %d per rank (at least 2 needed)", size, n[d], d,
                     dims[d], n[d] / dims[d]);
            refuse(msg);
        }
    }
    MPI_Comm cart;
    MPI_Cart_create(MPI_COMM_WORLD, 3, dims, periods, 0, &cart);
    MPI_Cart_coords(cart, rank, 3, coords);

    int l[3], off[3], h[3];
    for (int d = 0; d < 3; d++) {
        l[d] = n[d] / dims[d];
        off[d] = coords[d] * l[d];
        h[d] = l[d] + 2;
    }
    size_t cells = (size_t)h[0] * h[1] * h[2];
    double *u = malloc(cells * sizeof(double)), *v = malloc(cells * sizeof(double));
    if (!u || !v) {
        snprintf(msg, sizeof msg, "cannot allocate 2 x %zu doubles per rank", cells);
        refuse(msg);
    }
#define IDX(i, j, k) (((size_t)(i) * h[1] + (j)) * h[2] + (k))
    const double pi = acos(-1.0);
    for (int i = 0; i < h[0]; i++)
        for (int j = 0; j < h[1]; j++)
            for (int k = 0; k < h[2]; k++) {
                int gi = off[0] + i, gj = off[1] + j, gk = off[2] + k;
                double e = sin(pi * gi / (n[0] + 1)) * sin(pi * gj / (n[1] + 1)) *
                           sin(pi * gk / (n[2] + 1));
                u[IDX(i, j, k)] = v[IDX(i, j, k)] = gi + 2.0 * gj + 3.0 * gk + e;
            }

    /* One send and one receive subarray per face: 0/1 = low/high side of dimension d. */
    MPI_Datatype send[3][2], recv[3][2];
    int nb[3][2], k_neigh = 0;
    double halo_bytes = 0;
    for (int d = 0; d < 3; d++) {
        MPI_Cart_shift(cart, d, 1, &nb[d][0], &nb[d][1]);
        int sub[3] = {l[0], l[1], l[2]};
        sub[d] = 1;
        for (int s = 0; s < 2; s++) {
            int so[3] = {1, 1, 1}, ro[3] = {1, 1, 1};
            so[d] = s ? l[d] : 1;
            ro[d] = s ? l[d] + 1 : 0;
            MPI_Type_create_subarray(3, h, sub, so, MPI_ORDER_C, MPI_DOUBLE, &send[d][s]);
            MPI_Type_create_subarray(3, h, sub, ro, MPI_ORDER_C, MPI_DOUBLE, &recv[d][s]);
            MPI_Type_commit(&send[d][s]);
            MPI_Type_commit(&recv[d][s]);
            if (nb[d][s] != MPI_PROC_NULL) {
                k_neigh++;
                halo_bytes += 8.0 * sub[0] * sub[1] * sub[2];
            }
        }
    }

    double t0 = 0;
    for (int it = 0; it < warmup + iters; it++) {
        if (it == warmup) {
            MPI_Barrier(cart);
            t0 = MPI_Wtime();
        }
        for (int d = 0; d < 3; d++) {
            MPI_Sendrecv(u, 1, send[d][0], nb[d][0], 2 * d, u, 1, recv[d][1], nb[d][1], 2 * d,
                         cart, MPI_STATUS_IGNORE);
            MPI_Sendrecv(u, 1, send[d][1], nb[d][1], 2 * d + 1, u, 1, recv[d][0], nb[d][0],
                         2 * d + 1, cart, MPI_STATUS_IGNORE);
        }
        for (int i = 1; i <= l[0]; i++)
            for (int j = 1; j <= l[1]; j++)
                for (int k = 1; k <= l[2]; k++)
                    v[IDX(i, j, k)] = (u[IDX(i - 1, j, k)] + u[IDX(i + 1, j, k)] +
                                       u[IDX(i, j - 1, k)] + u[IDX(i, j + 1, k)] +
                                       u[IDX(i, j, k - 1)] + u[IDX(i, j, k + 1)]) / 6.0;
        double *t = u;
        u = v;
        v = t;
    }
    double elapsed = MPI_Wtime() - t0, slowest;
    MPI_Reduce(&elapsed, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, cart);

    double mu = (cos(pi / (n[0] + 1)) + cos(pi / (n[1] + 1)) + cos(pi / (n[2] + 1))) / 3.0;
    double amp = pow(mu, warmup + iters), err = 0, worst, scale = n[0] + 2.0 * n[1] + 3.0 * n[2];
    for (int i = 1; i <= l[0]; i++)
        for (int j = 1; j <= l[1]; j++)
            for (int k = 1; k <= l[2]; k++) {
                int gi = off[0] + i, gj = off[1] + j, gk = off[2] + k;
                double e = sin(pi * gi / (n[0] + 1)) * sin(pi * gj / (n[1] + 1)) *
                           sin(pi * gk / (n[2] + 1));
                double diff = fabs(u[IDX(i, j, k)] - (gi + 2.0 * gj + 3.0 * gk + amp * e));
                if (diff > err)
                    err = diff;
            }
    MPI_Reduce(&err, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, cart);
    int k_max;
    double c_max;
    MPI_Reduce(&k_neigh, &k_max, 1, MPI_INT, MPI_MAX, 0, cart);
    MPI_Reduce(&halo_bytes, &c_max, 1, MPI_DOUBLE, MPI_MAX, 0, cart);

    int failed = 0;
    if (rank == 0) {
        double tol = 1e-12 * scale * (warmup + iters), per_it = slowest / iters;
        double updates = (double)n[0] * n[1] * n[2];
        failed = !(worst <= tol);
        printf("jacobi3d %s\n", VERSION);
        printf("grid: %d %d %d\n", n[0], n[1], n[2]);
        printf("ranks: %d\n", size);
        printf("dims: %d %d %d\n", dims[0], dims[1], dims[2]);
        printf("local grid: %d %d %d\n", l[0], l[1], l[2]);
        printf("iterations: %d (warmup %d)\n", iters, warmup);
        printf("neighbours k: %d\n", k_max);
        printf("halo per process per iteration: %.6f MB\n", c_max / 1e6);
        printf("time: %.6f s\n", slowest);
        printf("time per iteration: %.9f s\n", per_it);
        printf("MLUP/s: %.3f\n", updates / per_it / 1e6);
        printf("check: max error %.3e against the known solution (mode factor %.6e, "
               "tolerance %.3e): %s\n", worst, amp, tol, failed ? "FAILED" : "PASSED");
    }
    MPI_Bcast(&failed, 1, MPI_INT, 0, cart);
    for (int d = 0; d < 3; d++)
        for (int s = 0; s < 2; s++) {
            MPI_Type_free(&send[d][s]);
            MPI_Type_free(&recv[d][s]);
        }
    free(u);
    free(v);
    MPI_Comm_free(&cart);
    MPI_Finalize();
    return failed;
}
