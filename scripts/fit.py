"""Least squares for the benchmark scripts' cost models (bench_analysers.py, bench_replay.py)."""


def solve(a, b):
    """The least-squares solution of a x = b (normal equations, Gauss-Jordan)."""
    m = len(a[0])
    g = [[sum(r[i] * r[j] for r in a) for j in range(m)] + [sum(r[i] * y for r, y in zip(a, b))]
         for i in range(m)]
    for i in range(m):
        p = max(range(i, m), key=lambda k: abs(g[k][i]))
        g[i], g[p] = g[p], g[i]
        for k in range(m):
            if k != i:
                f = g[k][i] / g[i][i]
                g[k] = [x - f * y for x, y in zip(g[k], g[i])]
    return [g[i][m] / g[i][i] for i in range(m)]
