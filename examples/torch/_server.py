"""Starting and stopping `kbsim serve` for the examples (not part of the kbsim package)."""
import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(TOP, "python"))


def find_kbsim(given=None):
    # a --kbsim that does not exist ran another kbsim without a word
    if given and not os.access(given, os.X_OK):
        raise SystemExit("--kbsim %s: %s" % (given, "not executable" if os.path.exists(given)
                                             else "no such file"))
    for p in (given, os.environ.get("KBSIM"), os.path.join(TOP, "build", "kbsim"),
              shutil.which("kbsim")):
        if p and os.path.exists(p):
            return os.path.abspath(p)
    raise SystemExit("kbsim not found: build it (./setup.sh) or pass --kbsim PATH")


# argparse types for the examples' options: a bad value is argparse's usage
# error naming the option (exit 2), not a traceback from deep in the run
def _number(convert, what, low, multiple=1, above=False):
    """above: the value must be > low (else >= low)."""
    def parse(text):
        try:
            v = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError("'%s' is not %s" % (text, what)) from None
        if not (v > low if above else v >= low) or (multiple > 1 and v % multiple) \
                or v != v or v == float("inf"):
            raise argparse.ArgumentTypeError("'%s': expected %s %s %s%s" % (
                text, what, ">" if above else ">=", low,
                " and a multiple of %d" % multiple if multiple > 1 else ""))
        return v
    return parse


def int_at_least(low, multiple=1):
    return _number(int, "an integer", low, multiple)


positive_int = _number(int, "an integer", 1)
non_negative_int = _number(int, "an integer", 0)
positive_float = _number(float, "a number", 0, above=True)


def int_list(low=0, multiple=1):
    """A comma-separated list of integers >= low (and multiples of `multiple`)."""
    one = _number(int, "an integer", low, multiple)

    def parse(text):
        if not text or "" in text.split(","):
            raise argparse.ArgumentTypeError("'%s' has an empty item" % text)
        return [one(x) for x in text.split(",")]
    return parse


class Server:
    """`kbsim serve ARGS` on a fresh Unix socket; .address; stop() ends it (Ctrl-C)."""

    def __init__(self, kbsim, *args):
        self.dir = tempfile.mkdtemp(prefix="kbsim-ex")
        self.address = os.path.join(self.dir, "s.sock")
        self.proc = subprocess.Popen([kbsim, "serve", "-q", "--listen", self.address, *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     cwd=self.dir)
        line = self.proc.stdout.readline()
        if "listening on" not in line:
            self.proc.kill()
            raise SystemExit("kbsim serve did not start: %s%s" % (line, self.proc.stderr.read()))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            _, err = self.proc.communicate(timeout=120)
            if self.proc.returncode != 0:
                raise SystemExit("kbsim serve failed (%d): %s" % (self.proc.returncode, err))
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if exc[0] is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.stop()


def run_ranks(kbsim, server_args, rank_main, a, prefix):
    """Starts `kbsim serve SERVER_ARGS`, runs rank_main(rank, a, address, outdir)
    in a.ws processes (a.start_method), and returns what each rank wrote to
    OUTDIR/rankR.json, in rank order."""
    import json
    import torch.multiprocessing as mp
    outdir = tempfile.mkdtemp(prefix=prefix)
    try:
        with Server(kbsim, *server_args) as srv:
            if a.start_method == "spawn":
                mp.spawn(rank_main, args=(a, srv.address, outdir), nprocs=a.ws, join=True)
            else:  # fork: the ranks do not import torch again (the tests use it: time)
                mp.start_processes(rank_main, args=(a, srv.address, outdir), nprocs=a.ws,
                                   join=True, start_method=a.start_method)
        ranks = []
        for r in range(a.ws):
            with open(os.path.join(outdir, "rank%d.json" % r)) as f:
                ranks.append(json.load(f))
        return ranks
    finally:
        shutil.rmtree(outdir, ignore_errors=True)
