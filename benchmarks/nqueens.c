/* Sequential N-Queens bitmask counter: the same iterative explicit-stack
 * algorithm as count_from in examples/nqueens_kernels.py.
 *
 * Build: cc -O3 -march=native -o nqueens nqueens.c
 * Usage: ./nqueens N    -> prints "<count> <seconds for the count only>"
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define STACK 64

static int64_t count_from(int n, int64_t cols, int64_t d1, int64_t d2)
{
    const int64_t full = ((int64_t)1 << n) - 1;
    if (cols == full)
        return 1;
    int64_t st_cols[STACK], st_d1[STACK], st_d2[STACK], st_avail[STACK];
    int64_t count = 0;
    int sp = 0;
    int64_t avail = full & ~(cols | d1 | d2);
    for (;;) {
        if (avail) {
            int64_t bit = avail & -avail;
            avail ^= bit;
            int64_t nc = cols | bit;
            if (nc == full) {
                count++;
                continue;
            }
            int64_t nd1 = ((d1 | bit) << 1) & full;
            int64_t nd2 = (d2 | bit) >> 1;
            int64_t na = full & ~(nc | nd1 | nd2);
            if (na) { /* descend only into rows with a free square */
                st_cols[sp] = cols;
                st_d1[sp] = d1;
                st_d2[sp] = d2;
                st_avail[sp] = avail;
                sp++;
                cols = nc;
                d1 = nd1;
                d2 = nd2;
                avail = na;
            }
        } else {
            if (sp == 0)
                break;
            sp--;
            cols = st_cols[sp];
            d1 = st_d1[sp];
            d2 = st_d2[sp];
            avail = st_avail[sp];
        }
    }
    return count;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s N\n", argv[0]);
        return 2;
    }
    int n = atoi(argv[1]);
    if (n < 1 || n > 62) {
        fprintf(stderr, "N must be in 1..62\n");
        return 2;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int64_t c = count_from(n, 0, 0, 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    printf("%lld %.6f\n", (long long)c, s);
    return 0;
}
