#!/usr/bin/env python3
"""Connections held at once and memory per idle job of `hark serve`.

Starts `hark serve` on a private socket, opens idle probe connections (each
sends a Hello and then nothing, as a rank blocked in MPI_Recv), and reads
the service's RSS, threads and descriptors from /proc after each step.
Usage: scripts/bench-serve.py HARK_BINARY
"""
import os, socket, struct, subprocess, sys, tempfile, time

def s(x):
    b = x.encode()
    return struct.pack("<I", len(b)) + b

def hello(job, rank, pid):
    p = b"HARK" + struct.pack("<H", 4) + s("app") + struct.pack("<I", 1) + s("./app")
    p += s("node0") + struct.pack("<Iii", pid, rank, 1 << 20) + s(job)
    p += struct.pack("<B", 2) + struct.pack("<QQI", 1000, time.time_ns(), 1 << 20) + s("") + struct.pack("<I", 0)
    return struct.pack("<II", 1, len(p)) + p

def proc(pid):
    st = open(f"/proc/{pid}/status").read()
    rss = int([l for l in st.splitlines() if l.startswith("VmRSS:")][0].split()[1])
    return rss, len(os.listdir(f"/proc/{pid}/task")), len(os.listdir(f"/proc/{pid}/fd"))

def settle(pid, want_threads):
    for _ in range(400):
        r = proc(pid)
        if r[1] >= want_threads:
            return r
        time.sleep(0.025)
    return proc(pid)

def main():
    hark = sys.argv[1]
    d = tempfile.mkdtemp(prefix="hark-bench-serve-")
    sock = os.path.join(d, "s")
    import resource
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    srv = subprocess.Popen([hark, "serve", "--listen", "unix:" + sock, "--runs", d + "/runs",
                            "--max-jobs", "5000", "--linger", "60"], stderr=subprocess.DEVNULL)
    while not os.path.exists(sock + ".ctl"):
        time.sleep(0.05)
    base = proc(srv.pid)
    print(f"idle service: RSS {base[0]} KiB, {base[1]} threads, {base[2]} fds")
    conns = []
    print("\none job, N idle ranks (connections held at once)")
    print(f"{'N':>6} {'RSS KiB':>9} {'threads':>8} {'fds':>6} {'KiB/conn':>9}")
    for n in [250, 500, 1000, 2000, 4000]:
        while len(conns) < n:
            c = socket.socket(socket.AF_UNIX)
            c.connect(sock)
            c.sendall(hello("wide", len(conns), 100000 + len(conns)))
            conns.append(c)
        r = settle(srv.pid, base[1] + n)
        print(f"{n:>6} {r[0]:>9} {r[1]:>8} {r[2]:>6} {(r[0]-base[0])/n:>9.1f}")
    t0 = time.time()
    for c in conns:
        c.close()
    after = proc(srv.pid)
    while (after[1] > base[1] or after[2] > base[2]) and time.time() - t0 < 120:
        time.sleep(0.1)
        after = proc(srv.pid)
    print(f"{time.time() - t0:.1f} s after closing them: RSS {after[0]} KiB, {after[1]} threads, {after[2]} fds")
    srv.terminate(); srv.wait()

    srv = subprocess.Popen([hark, "serve", "--listen", "unix:" + sock, "--runs", d + "/runs2",
                            "--max-jobs", "5000", "--linger", "60"], stderr=subprocess.DEVNULL)
    while not os.path.exists(sock + ".ctl"):
        time.sleep(0.05)
    base = proc(srv.pid)
    print("\nN idle jobs of one rank each (memory per idle job)")
    print(f"{'jobs':>6} {'RSS KiB':>9} {'threads':>8} {'KiB/job':>9}")
    conns = []
    for n in [100, 200, 400, 800]:
        while len(conns) < n:
            c = socket.socket(socket.AF_UNIX)
            c.connect(sock)
            c.sendall(hello(f"job-{len(conns)}", 0, 200000 + len(conns)))
            conns.append(c)
        r = settle(srv.pid, base[1] + n)
        print(f"{n:>6} {r[0]:>9} {r[1]:>8} {(r[0]-base[0])/n:>9.1f}")
    for c in conns:
        c.close()
    srv.terminate(); srv.wait()

main()
