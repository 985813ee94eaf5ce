#!/usr/bin/env python3
"""Well-formed requests with arbitrary contents, against selectinferd on the
default model: every field of every request message that a client may set
(walked from the protocol's descriptors, so a field added later is covered
too) gets values from the edges of its type (NaN, infinities, 0, -1, the
largest integers, empty and long strings, JSON that is and is not a schema
or a tool list, task names that exist and do not), requests are pipelined
two or three at a time and some of them cancelled.

    test-daemon-random.py SELECTINFER_PB2_PY SELECTINFERD PROFILE

Requires of each request exactly one final reply with its id (done, error,
ack, tokens, embeddings, status or profiles) after any chunks, the
connection kept open, and at the end a daemon still running that answers
status and generates, within SI_RANDOM_TIMEOUT seconds (default 120, 4x
under a sanitizer) of silence for each reply. A fixed seed (SI_RANDOM_SEED,
default 1) and count (SI_RANDOM_REQUESTS, default 600; 200 under a
sanitizer) make a failure reproducible; the failing request is printed,
and with SI_RANDOM_VERBOSE every error reply's message.

Exit 0 pass, 1 fail, 77 skip (no protobuf module or no default model)."""
import math
import os
import random
import shutil
import subprocess
import sys
import tempfile

import si_test

SLOW = si_test.SLOW

pb2_path, daemon, profile = sys.argv[1:4]
pb = si_test.load_pb2(pb2_path)
from google.protobuf import descriptor as pbd  # noqa: E402 (after load_pb2's check)
model = si_test.model_or_skip()

SEED = int(os.environ.get("SI_RANDOM_SEED", "1"))
COUNT = int(os.environ.get("SI_RANDOM_REQUESTS", "200" if SLOW > 1 else "600"))
MAX_TOKENS = 12
# seconds without a byte from the daemon: a lost reply
REPLY_TIMEOUT = float(os.environ.get("SI_RANDOM_TIMEOUT", "120")) * SLOW
VERBOSE = bool(os.environ.get("SI_RANDOM_VERBOSE"))  # each error's message
rng = random.Random(SEED)
failures = []


def fail(what):
    failures.append(what)
    print("FAIL: " + what, file=sys.stderr)


def Conn(path):
    return si_test.Conn(path, pb, REPLY_TIMEOUT)


# ---- values from the edges of each type ----
FLOATS = [0.0, -0.0, 1.0, -1.0, 0.5, 0.4, 0.2, 0.05, 0.999, 1.0001, 2.0, 10.0, 100.0, 1e-30,
          1e30, 3.4e38, -3.4e38, math.inf, -math.inf, math.nan]
U32 = [0, 1, 2, 3, 7, 16, 255, 1024, 49151, 49152, 65535, 2**31 - 1, 2**31, 2**32 - 1]
U64 = U32 + [2**32, 2**63, 2**64 - 1]
I32 = [0, 1, -1, 2, 13, 49151, 49152, -49152, 2**31 - 1, -2**31]
WORDS = ["chat", "qa", "summarize", "translate-en-de", "dense", "*", "", "nope", "mean", "last",
         "json", "selectinfer", "coreinfer", "load-only", "random-load", "user", "system",
         "assistant", "tool", "wizard", "../../etc/passwd", "/dev/zero",
         "smollm2-135m-instruct.siprof"]
JSONS = ['{"type": "object"}', '{"type": "string", "maxLength": 3}', '{"type": "array"}',
         '{"enum": ["a", "b"]}', '{"type": "object", "properties": {"a": {"type": "integer"}}, '
         '"required": ["a"]}', '{', '[]', '{"type": 5}', '{"$ref": "#"}', 'null',
         '[{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]',
         '[{"type": "function"}]', '[{"function": {"name": ""}}]', '[1, 2]']
TEXTS = ["Hello", "What is the capital of France?", "2+2=", "<|im_start|>user\nhi<|im_end|>",
         "\u00e9t\u00e9 \u4e2d\u6587 \U0001F600", "a" * 2000, "word " * 300, "\n\n\n", " ",
         "<think>", "</s>", "{\"a\":"]


# values a client would send, per field name: a request built from these
# alone should mostly be served, so that the wild values in the others meet
# code past validation
SANE = {"temperature": (0.0, 1.5), "top_p": (0.05, 1.0), "min_p": (0.0, 0.3),
        "repeat_penalty": (1.0, 1.5), "frequency_penalty": (0.0, 1.0),
        "presence_penalty": (0.0, 1.0), "bias": (-5.0, 5.0), "phi": (0.3, 0.7),
        "alpha": (0.05, 0.5), "gamma": (0.5, 1.0), "delta": (0.0, 0.3)}
SANE_U32 = {"top_k": 50, "repeat_last_n": 64, "top_logprobs": 5, "max_tokens": MAX_TOKENS,
            "dense_first": 3, "dense_last": 3}
SANE_WORDS = {"role": ["user", "system", "assistant"], "task": ["chat", "qa", "summarize"],
              "name": ["chat", "qa", "dense", "summarize"], "pooling": ["mean", "last"],
              "mode": ["selectinfer", "coreinfer", "load-only", "dense"],
              "format": ["json", '{"type": "object", "properties": {"a": {"type": "integer"}}}'],
              "tools": ['[{"type": "function", "function": {"name": "f", "parameters": '
                        '{"type": "object"}}}]']}

SANE_ALWAYS = {"messages", "role", "content", "input"}  # what a served request has


def rand_float(field, wild):
    if not wild and field.name in SANE:
        return rng.uniform(*SANE[field.name])
    return rng.choice(FLOATS) if rng.random() < 0.7 else rng.uniform(-2, 2)


def rand_string(field, wild):
    r = rng.random()
    if not wild:
        if field.name in SANE_WORDS:
            return rng.choice(SANE_WORDS[field.name])
        if field.name in ("content", "prompt", "input", "stop"):
            return rng.choice(TEXTS[:5])
    if field.name in ("format", "tools", "arguments"):
        return rng.choice(JSONS) if r < 0.8 else rng.choice(WORDS)
    if field.name in ("content", "prompt", "input", "stop"):
        return rng.choice(TEXTS) if r < 0.8 else rng.choice(WORDS)
    if r < 0.8:
        return rng.choice(WORDS)
    return "".join(chr(rng.choice([rng.randrange(32, 127), rng.randrange(0x80, 0x3000)]))
                   for _ in range(rng.randrange(0, 40)))


def rand_scalar(field, wild):
    t = field.type
    if t in (pbd.FieldDescriptor.TYPE_FLOAT, pbd.FieldDescriptor.TYPE_DOUBLE):
        return rand_float(field, wild)
    if t == pbd.FieldDescriptor.TYPE_UINT32:
        if not wild and field.name in SANE_U32:
            return rng.randrange(0, SANE_U32[field.name] + 1)
        return rng.choice(U32)
    if t == pbd.FieldDescriptor.TYPE_UINT64:
        return rng.choice(U64)
    if t == pbd.FieldDescriptor.TYPE_INT32:
        return rng.choice(I32)
    if t == pbd.FieldDescriptor.TYPE_BOOL:
        return rng.random() < 0.5
    if t == pbd.FieldDescriptor.TYPE_STRING:
        return rand_string(field, wild)
    if t == pbd.FieldDescriptor.TYPE_BYTES:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(0, 16)))
    if t == pbd.FieldDescriptor.TYPE_ENUM:
        return rng.choice(field.enum_type.values).number
    raise ValueError("field type %d of %s" % (t, field.full_name))


def fill(msg, wild, depth=0):
    """Sets a random subset of msg's fields (one member of each oneof):
    wild, most of them from the edges of their types; else a few, from
    what clients send."""
    d = msg.DESCRIPTOR
    chosen = {o.name: rng.choice(o.fields) for o in d.oneofs}
    for f in d.fields:
        if f.containing_oneof is not None and chosen[f.containing_oneof.name] is not f:
            continue
        if f.containing_oneof is None and not (not wild and f.name in SANE_ALWAYS) and \
                rng.random() < (0.3 if wild else 0.75):
            continue
        repeated = f.label == pbd.FieldDescriptor.LABEL_REPEATED
        n = (rng.randrange(0, 4) if wild else rng.randrange(1, 4)) if repeated else 1
        for _ in range(n):
            if f.type == pbd.FieldDescriptor.TYPE_MESSAGE:
                if depth >= 3:
                    break
                sub = getattr(msg, f.name).add() if repeated else getattr(msg, f.name)
                sub.SetInParent()
                fill(sub, wild, depth + 1)
            elif repeated:
                getattr(msg, f.name).append(rand_scalar(f, wild))
            else:
                setattr(msg, f.name, rand_scalar(f, wild))


# kinds of request, weighted: generation most; never shutdown (the test
# needs the daemon), reload rarely (a whole model load)
BODIES = [("generate", 12), ("tokenize", 3), ("embed", 2), ("status", 1), ("list_profiles", 1),
          ("cancel", 2), ("use_profile", 2), ("reload", 0.2)]
FINAL = {"done", "error", "ack", "tokens", "embeddings", "status", "profiles"}


def make_request(rid, in_flight):
    req = pb.Request(id=rid)
    kind = rng.choices([b for b, _ in BODIES], [w for _, w in BODIES])[0]
    body = getattr(req, kind)
    body.SetInParent()
    # one in three wild
    wild = rng.random() < 1 / 3
    fill(body, wild)
    if kind == "generate" and not wild and body.WhichOneof("input") != "chat":
        body.ClearField("tools")  # tools come with chat input
    if kind == "generate":
        # most generations short (wild values meet the daemon's cap of 64)
        if not body.HasField("max_tokens") or rng.random() < 0.5:
            body.max_tokens = rng.randrange(0, MAX_TOKENS + 1)
    if kind == "cancel" and rng.random() < 0.7:
        body.request_id = rng.choice(in_flight) if in_flight else rid - 1
    if kind == "embed" and rng.random() < 0.5:
        del body.input[:]
        body.input.extend(rng.choice(TEXTS)[:200] for _ in range(rng.randrange(1, 4)))
    return req, kind


tmp = tempfile.mkdtemp(prefix="si-random-")
sock = os.path.join(tmp, "s.sock")
log = open(os.path.join(tmp, "daemon.log"), "w")
proc = subprocess.Popen([daemon, "--config", "", "--model", model, "--socket", sock,
                         "--ctx-size", "256", "--slots", "2", "--max-tokens", "64",
                         "--threads", "2", "--profile", profile, "--task", "chat",
                         "--phi", "0.4", "--log-level", "debug"], stderr=log)


def greedy(c, rid):
    q = pb.Request(id=rid)
    q.generate.chat.messages.add(role="user", content="Name a color.")
    q.generate.max_tokens = 6
    q.generate.sampling.temperature = 0.0
    q.generate.stream = False
    c.send(q)
    try:
        r = c.recv()
    except TimeoutError:
        return None
    return r if r is not None and r.id == rid and r.WhichOneof("body") == "done" else None


try:
    if not si_test.wait_ready(sock, pb, 120 * SLOW):
        fail("daemon not ready")
        raise SystemExit
    c = Conn(sock)
    if greedy(c, 2) is None:
        fail("first greedy generation")
    counts = {}
    rid, sent = 100, 0
    while sent < COUNT and not failures:
        # one to three requests in flight at once, then their replies
        batch = []
        for _ in range(rng.choice([1, 1, 2, 3])):
            if sent == COUNT:
                break
            rid += 1
            req, kind = make_request(rid, [q.id for q, _ in batch])
            c.send(req)
            batch.append((req, kind))
            sent += 1
        waiting = {q.id: (q, k) for q, k in batch}
        while waiting:
            try:
                r = c.recv()
            except TimeoutError:
                fail("no reply within %.0f s to %s" %
                     (REPLY_TIMEOUT, [q for q, _ in waiting.values()]))
                break
            if r is None:
                fail("connection closed with %d requests unanswered; the last sent: %s" %
                     (len(waiting), batch[-1][0]))
                break
            body = r.WhichOneof("body")
            if r.id not in waiting:
                fail("reply %s to request %d, not in flight (%s)" % (body, r.id, list(waiting)))
                break
            if body == "chunk":
                continue
            if body not in FINAL:
                fail("reply %s to %s" % (body, waiting[r.id][0]))
                break
            req, kind = waiting.pop(r.id)
            counts[(kind, body)] = counts.get((kind, body), 0) + 1
            if body == "error" and VERBOSE:
                print("%s: %s" % (kind, r.error.message), file=sys.stderr)
            if body == "error" and not r.error.message:
                fail("error %d without a message for %s" % (r.error.code, req))
        if proc.poll() is not None:
            fail("daemon exited (%s) after request %d: %s" % (proc.returncode, rid, batch[-1][0]))
    print("replies by request kind:", file=sys.stderr)
    for (kind, body), n in sorted(counts.items()):
        print("  %-14s %-11s %d" % (kind, body, n), file=sys.stderr)
    # the arbitrary requests must have reached past validation too: some
    # generations ran to done, some were refused
    if not failures:
        for kind, body in (("generate", "done"), ("generate", "error"), ("tokenize", "tokens"),
                           ("use_profile", "ack")):
            if counts.get((kind, body), 0) == 0 and COUNT >= 100:
                fail("no %s request ended in %s" % (kind, body))
    # still serving: a fresh connection gets status and a generation
    if not failures:
        c2 = Conn(sock)
        c2.send(pb.Request(id=3, status=pb.StatusRequest()))
        r = c2.recv()
        if r is None or r.WhichOneof("body") != "status" or r.status.state != pb.STATE_READY:
            fail("status after the random requests: %s" % r)
        if greedy(c2, 4) is None:
            fail("greedy generation after the random requests")
        c2.close()
    c.close()
finally:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
    log.close()
    if failures:
        with open(os.path.join(tmp, "daemon.log")) as f:
            tail = f.read()[-4000:]
        print("--- daemon log (end) ---\n" + tail, file=sys.stderr)
    shutil.rmtree(tmp, ignore_errors=True)

sys.exit(1 if failures else 0)
