"""Drives echo_server (attach_test.sh): sends the same lines over and over on one connection
for --seconds (or until --stop-file exists), and checks that every reply to a line is byte-identical to the first one (the
server's checksum of it) and that no error happens. Prints "client replies=N errors=E" and
exits 1 on any difference or error. With --stats: sends STATS once and prints the answer."""
import argparse
import os
import socket
import sys
import time

parser = argparse.ArgumentParser()
parser.add_argument("port", type=int)
parser.add_argument("--seconds", type=float, default=0)
parser.add_argument("--stats", action="store_true")
parser.add_argument("--quit", action="store_true")
parser.add_argument("--stop-file", help="also stop once this file exists")
parser.add_argument("--ready-file", help="created after the first round of replies")
args = parser.parse_args()

connection = socket.create_connection(("127.0.0.1", args.port), timeout=30)
reader = connection.makefile("rb")


def ask(line):
    connection.sendall(line + b"\n")
    return reader.readline()


if args.stats:
    print(ask(b"STATS").decode().strip())
    sys.exit(0)
if args.quit:
    print(ask(b"QUIT").decode().strip())
    sys.exit(0)

lines = [b"line-%d-%s" % (i, b"x" * (i * 7 % 50)) for i in range(40)]
first = {}
replies = errors = 0
end = time.monotonic() + args.seconds
try:
    while time.monotonic() < end and not (args.stop_file and os.path.exists(args.stop_file)):
        for line in lines:
            reply = ask(line)
            replies += 1
            if not reply.endswith(b"\n") or not reply.startswith(line + b" "):
                errors += 1
                print("bad reply to %r: %r" % (line, reply), file=sys.stderr)
            elif first.setdefault(line, reply) != reply:
                errors += 1
                print("reply to %r changed: %r, first %r" % (line, reply, first[line]), file=sys.stderr)
        if args.ready_file and not os.path.exists(args.ready_file):
            open(args.ready_file, "w").close()
except OSError as error:
    errors += 1
    print("connection error: %s" % error, file=sys.stderr)
print("client replies=%d errors=%d" % (replies, errors))
sys.exit(1 if errors else 0)
