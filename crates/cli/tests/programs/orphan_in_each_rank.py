"""Each rank leaves a process behind: a double fork whose middle process
ends at once, so that the last is reparented before it starts a new
`python3` (with the rank's variables), which writes 100 bytes and ends. No
parent links that process to its rank any more; it is still the rank's
child, not a rank."""
import os
import sys
import time

if __name__ == "__main__":
    out = f"orphan-{os.getpid()}.out"
    middle = os.fork()
    if middle == 0:
        middle = os.getpid()
        if os.fork() == 0:
            # Reparented once the middle process has ended.
            while os.getppid() == middle:
                time.sleep(0.001)
            code = f"open({out!r}, 'wb').write(b'z' * 100)"
            os.execv(sys.executable, [sys.executable, "-c", code])
        os._exit(0)
    os.waitpid(middle, 0)
    # The rank outlives the process it left behind.
    for _ in range(5000):
        if os.path.exists(out) and os.path.getsize(out) == 100:
            break
        time.sleep(0.002)
    print("ok" if os.path.getsize(out) == 100 else "no output")
