/* The peak loops' accumulators, for the machine limits (machine_limits.c) and the benchmarks that time
 * instructions beside a peak loop (bench/bench_vnni_ports.c). */
#ifndef WOOLLY_PEAK_LOOP_H
#define WOOLLY_PEAK_LOOP_H

/* Twelve (eight for AVX2) independent accumulators: more than latency x throughput, so the ports are
 * the limit. They are named variables, not an array: GCC keeps an array of vectors that an asm
 * statement touches in memory, and a load and a store around every instruction would measure the
 * store-to-load latency instead of the multiply-adds. The empty asm keeps the loop from being folded. */
#define PEAK_ACCS_12(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
#define PEAK_ACCS_8(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)
#define PEAK_KEEP_12(a)                                                                                      \
    __asm__(""                                                                                               \
            : "+v"(a##0), "+v"(a##1), "+v"(a##2), "+v"(a##3), "+v"(a##4), "+v"(a##5), "+v"(a##6),            \
              "+v"(a##7), "+v"(a##8), "+v"(a##9), "+v"(a##10), "+v"(a##11))

#endif
