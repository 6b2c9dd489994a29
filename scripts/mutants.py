#!/usr/bin/env python3
"""Mutation testing of tl (docs/testing.md): does the suite fail when the code is wrong?

Makes mutants of chosen source files by rule (a comparison flipped, a bound off by one, a
constant changed, a statement dropped, a condition forced, && and || swapped, an
arithmetic operator swapped), draws a random sample of them (the seed is printed), builds
each in a scratch copy of the tree (ccache keeps the unchanged files' objects), runs the
tests that cover the mutated file and reports each mutant killed (a covering test fails,
crashes or runs past its time), survived, or not compiled (not counted). Survivors' diffs
are printed at the end: each needs a test that kills it, or a line on why it is
equivalent to the original.

Named mutants (--patch) are unified diffs, each read the same way: the issue's holes are
kept as patches under tests/mutants/ with the tests they must fail.

Run through scripts/mutants.sh, which prepares the scratch tree.
"""
import argparse
import difflib
import fnmatch
import glob
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time

# Each area: the files mutated, and the tests covering them as stages of (binary, gtest
# filter), run in order until one fails: the fast tests first, so a mutant they kill
# costs seconds; a survivor has run them all. "kernel_bounds" is tl_model_tests under
# Oclgrind (scripts/kernel_bounds.sh; "": its default filter), which also fails on an
# access past a buffer.
BOUNDS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kernel_bounds.sh")
KERNEL_TESTS = [
    ("tl_model_tests", "*Kernel.*:CausalMask.*:AllModels/RunModels.*:TlBenchCli.ProbeAlone:Generate.*-Schemes/QMatMulKernel.*"),
    ("tl_model_tests", "MatMulExtras.*:Views.*:AllModels/PlanModels.*"),
    ("tl_model_tests", "Schemes/QMatMulKernel.*:KvInPlace.*"),
    ("kernel_bounds", ""),  # its default filter
]
AREAS = {
    "sampler": (["libcore/sample/sampler.cpp"],
                [("tl_model_tests", "Sampler.*:TlCtxswapService.VerbsAndErrorsThroughTheSocket")]),
    "quant": (["libcore/quant/quant.cpp", "libcore/quant/quantize_model.cpp"],
              [("tl_unit_tests", "Quant.*"),
               ("tl_model_tests", "QuantizedModels.MatchTheirDequantizedTwins:OrtPeer.*:TlQuantCli.*:FuseQuantize.*:QuantGolden.*"),
               ("tl_model_tests", "QuantizedModels.*:Schemes/QMatMulKernel.*")]),
    # the launch table first: a lowering's mutant that changes a launch fails it in seconds
    "lowering": (["libcore/runtime/lower/*.cpp"], [("tl_model_tests", "LaunchGolden.*")] + KERNEL_TESTS),
    "kernels": (["kernels/*.cl"], KERNEL_TESTS),
    "shape": (["libcore/shape/rules.cpp", "libcore/shape/rule_context.cpp"],
              [("tl_unit_tests", "ShapeRules.*"),
               ("tl_model_tests", "AllModels/ShapeModels.*:ShapeText/Golden.*:ShapeModelsPresent.*:TlShapeCli.*:"
                                 "PipelineGolden.*")]),
    "fuse": (["libcore/fuse/*.cpp"],
             [("tl_model_tests", "Fuse*.*:MergeSlices.*:FoldConstants.*:TlFuseCli.*:CausalMask.*:RopeKernel.*:RmsNormKernel.*:"
                                 "PipelineGolden.*:SwiGluKernel.*:GeGluKernel.*:AttentionKernel.*:ConcatKernel.*:ElementwiseKernel.*:"
                                 "AllModels/FuseModels.*/*_all:KvInPlace.DecodeGemvMergesTheAttentionSplits"),
              ("tl_model_tests", "AllModels/FuseModels.*")]),
    "plan": (["libcore/plan/memory_plan.cpp"],
             [("tl_model_tests", "PlanMemory.*:TlPlanCli.*:PipelineGolden.*:AllModels/PlanModels.*")]),
    "ctxswap": (["libcore/ctxswap/kv_chunk.cpp", "libcore/ctxswap/chunk_file.cpp", "libcore/ctxswap/tolerance.cpp"],
                [("tl_unit_tests", "KvChunk.*:ChunkFile.*:Tolerance.*"),
                 ("tl_model_tests", "KvQuality.*:ContextStore.PoliciesUnderABudgetOfTwoContexts")]),
    "tokenizer": (["libcore/text/tokenizer.cpp"],
                  [("tl_model_tests", "TokenizerDecoders.*:TokenizerFiles.*:TokenizerModels.*:Components/TokenizerComponents.*:"
                                     "Families/TokenizerFamilies.*:TlRunCli.*Token*")]),
}

REL = {"<": "<=", "<=": "<", ">": ">=", ">=": ">", "==": "!=", "!=": "=="}
ARITH = {"+": "-", "-": "+", "*": "/", "/": "*"}
DECL_START = re.compile(r"^\s*(return|break|continue|case|default|if|for|while|else|do|const|constexpr|auto|static|"
                        r"using|namespace|template|struct|class|typedef|enum|public|private|protected|"
                        r"int|float|double|bool|char|long|short|unsigned|size_t|int64_t|int32_t|uint\w*|void|"
                        r"std::|__kernel|__global|__local|__private|__constant|barrier|#)\b")


def masked(line):
    """The line with string and char literals' contents and its comment blanked (same
    length), so that rules match code only."""
    out, i, n = list(line), 0, len(line)
    while i < n:
        c = line[i]
        if c in "\"'":
            j = i + 1
            while j < n and line[j] != c:
                j += 2 if line[j] == "\\" else 1
            for k in range(i + 1, min(j, n)):
                out[k] = "_"
            i = j + 1
        elif line.startswith("//", i):
            for k in range(i, n):
                out[k] = " "
            break
        else:
            i += 1
    return "".join(out)


def balanced_paren(s, open_at):
    depth = 0
    for i in range(open_at, len(s)):
        depth += s[i] == "("
        depth -= s[i] == ")"
        if depth == 0:
            return i
    return -1


def line_mutants(line):
    """(rule, mutated line) pairs for one source line."""
    m = masked(line)
    code = m.strip()
    if not code or code.startswith("#") or code.startswith("*") or code.startswith("/*"):
        return []
    found = []
    for x in re.finditer(r"(?<= )(<=|>=|==|!=|<|>)(?= )", m):
        found.append(("comparison", line[:x.start()] + REL[x.group(1)] + line[x.end():]))
    for x in re.finditer(r"(?<= )(&&|\|\|)(?= )", m):
        found.append(("logic", line[:x.start()] + ("||" if x.group(1) == "&&" else "&&") + line[x.end():]))
    for x in re.finditer(r"(?<= )([-+*/])(?= )", m):
        found.append(("arithmetic", line[:x.start()] + ARITH[x.group(1)] + line[x.end():]))
    for x in re.finditer(r"(?<![\w.])(\d+\.\d*(?:e[-+]?\d+)?f?|\d+e[-+]?\d+f?)(?![\w.])", m):
        text = x.group(1)
        value = float(text.rstrip("f"))
        new = repr(value * 2 if value else 1.0) + ("f" if text.endswith("f") else "")
        found.append(("constant", line[:x.start()] + new + line[x.end():]))
    for x in re.finditer(r"(?<![\w.])(\d+)(?![\w.])", m):
        k = int(x.group(1))
        found.append(("bound", line[:x.start()] + str(k + 1 if k != 1 else 0) + line[x.end():]))
    for x in re.finditer(r"\bif \(", m):
        close = balanced_paren(m, x.end() - 1)
        if close > 0:
            for forced in ("true", "false"):
                found.append(("condition", line[:x.end()] + forced + line[close:]))
    for x in re.finditer(r"\breturn (true|false);", m):
        found.append(("condition", line[:x.start()] + "return " + ("false" if x.group(1) == "true" else "true") + ";" +
                      line[x.end():]))
    # an expression statement whole on its line: a call, an assignment, an increment
    if (code.endswith(";") and not DECL_START.match(m) and m.count("(") == m.count(")") and
            re.match(r"^\s*(\+\+|--)?[A-Za-z_][\w:.\->\[\]]*\s*(\(|=|\+=|-=|\*=|/=|\|=|&=|\+\+|--|<<=|>>=)", m) and
            not re.match(r"^\s*[A-Za-z_][\w:]*\s+[A-Za-z_]", m)):
        indent = line[:len(line) - len(line.lstrip())]
        found.append(("statement", indent + ";  // mutant: statement dropped\n"))
    return found


# Kernel code built only for NVIDIA (inline PTX, tensor cores): this machine's device
# (PoCL) never runs it, so its mutants are left to the device's runs.
DEVICE_ONLY = re.compile(r"\b(TL_MMA|TL_PTX|TL_NV)\b")


def all_mutants(root, files):
    out = []
    for rel in files:
        with open(os.path.join(root, rel)) as f:
            lines = f.readlines()
        in_block = False
        skipping = []  # per open #if: whether its branch is device-only
        for no, line in enumerate(lines):
            directive = re.match(r"^\s*#\s*(if|ifdef|ifndef|elif|else|endif)\b(.*)", line)
            if directive:
                kind, cond = directive.groups()
                if kind in ("if", "ifdef"):
                    skipping.append(bool(DEVICE_ONLY.search(cond)))
                elif kind == "ifndef":
                    skipping.append(False)
                elif kind == "elif" and skipping:
                    skipping[-1] = bool(DEVICE_ONLY.search(cond))
                elif kind == "else" and skipping:
                    skipping[-1] = False  # the branch every other device builds
                elif kind == "endif" and skipping:
                    skipping.pop()
                continue
            if any(skipping):
                continue
            if in_block:
                in_block = "*/" not in line
                continue
            if line.lstrip().startswith("/*"):
                in_block = "*/" not in line
                continue
            for rule, new in line_mutants(line):
                if new != line:
                    out.append((rel, no, rule, new))
    return out


def run(cmd, cwd, timeout):
    """(exit code, output), or (None, output so far) past `timeout` seconds. The command
    runs in a session of its own, killed whole at its time-out: a shell's child (a test
    binary a mutant sent into a loop) would otherwise run on, orphaned, taking a core from
    every mutant after it. Bytes that are not UTF-8 (a mutant's garbled text) read as U+FFFD."""
    with subprocess.Popen(cmd, cwd=cwd, shell=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          errors="replace", start_new_session=True) as p:
        try:
            out, _ = p.communicate(timeout=timeout)
            return p.returncode, out
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, _ = p.communicate()
            return None, out


def build(build_dir, targets, jobs):
    targets = {"tl_model_tests" if t == "kernel_bounds" else t for t in targets}
    return run("make -j%d %s" % (jobs, " ".join(sorted(targets))), build_dir, 1800)


def run_tests(build_dir, tests, budgets, fail_fast=True, env=""):
    """(killed, what failed) for the covering tests, stage by stage until one fails; a
    crash kills too, and so does a time-out, but only once the later stages have run and
    none failed (a stage slowed by a busy machine is not a hang: seed 6's #3 ran past its
    time while CI shared the cores, and a later stage's test named what it broke).
    `env`: assignments put before each command."""
    failed, timeouts = [], []
    for binary, flt in tests:
        if failed and fail_fast:
            break
        limit = budgets.get((binary, flt), 900)
        if binary == "kernel_bounds":
            cmd = "%ssh %s ./bin/tl_model_tests '%s'" % (env, BOUNDS, flt)
        else:  # with guard bytes, as ctest runs them (tests/CMakeLists.txt)
            cmd = "%sTL_GUARD_BYTES=256 ./bin/%s --gtest_filter='%s' --gtest_brief=1%s" % (
                env, binary, flt, " --gtest_fail_fast" if fail_fast else "")
        code, out = run(cmd, build_dir, limit)
        if code is None:
            timeouts.append("%s: time-out past %ds" % (binary, limit))
        elif code != 0:
            names = re.findall(r"^\[  FAILED  \] (\S+?)(?:,| \(|$)", out, re.M)
            names = sorted(set(n for n in names if "." in n))
            names += sorted(set("Oclgrind: %s in %s" % m for m in re.findall(r"^(Invalid \w+).*\n\s*Kernel: (\S+)", out, re.M)))
            failed.append("%s: %s" % (binary, " ".join(names) if names else "exit %d" % code))
    return bool(failed or timeouts), failed + timeouts


def area_of(rel):
    for name, (globs, tests) in AREAS.items():
        if any(fnmatch.fnmatch(rel, g) for g in globs):
            return name, tests
    return None, []


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--src", required=True, help="the scratch copy of the tree")
    ap.add_argument("--build", required=True, help="its build folder (configured)")
    ap.add_argument("--areas", default=",".join(AREAS), help="areas to mutate: " + ", ".join(AREAS))
    ap.add_argument("--sample", type=int, default=0, help="mutants that compile to run (0: none)")
    ap.add_argument("--seed", type=int, default=None, help="the sample's seed (printed; default: random)")
    ap.add_argument("--start", type=int, default=0, help="skip the sample's first mutants (resume a run: same seed)")
    ap.add_argument("--patch", nargs="+", action="extend", default=[], help="named mutants: unified diffs")
    ap.add_argument("--list", action="store_true", help="count the mutants per area and rule, and exit")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--report", default="", help="also write the report to this file")
    ap.add_argument("--baselines", default="",
                    help="a log of an earlier run on this same tree: its stages' unmutated times ('baseline:' "
                         "lines) bound the mutants' without running the stages again (a resumed run on a fresh "
                         "machine saves their 40 minutes); only for a tree whose tests pass (CI), since a stage "
                         "failing unmutated would count every mutant it covers as killed")
    ap.add_argument("--require-killed", action="store_true",
                    help="exit 1 when a mutant survives (CI: the named mutants must all be killed)")
    a = ap.parse_args()

    areas = [x for x in a.areas.split(",") if x]
    for x in areas:
        if x not in AREAS:
            sys.exit("mutants: unknown area '%s' (%s)" % (x, ", ".join(AREAS)))
    files = sorted({os.path.relpath(p, a.src) for x in areas for g in AREAS[x][0] for p in glob.glob(os.path.join(a.src, g))})
    pool = all_mutants(a.src, files)
    if a.list:
        counts = {}
        for rel, _, rule, _ in pool:
            key = (area_of(rel)[0], rule)
            counts[key] = counts.get(key, 0) + 1
        for (area, rule), n in sorted(counts.items()):
            print("%-10s %-11s %5d" % (area, rule, n))
        print("%d mutants in %d files" % (len(pool), len(files)))
        return 0

    report = []

    def say(s):
        print(s, flush=True)
        report.append(s)

    patches = []  # (name, text, files, tests)
    for patch in a.patch:
        text = open(patch).read()
        rels = re.findall(r"^\+\+\+ b/(\S+)", text, re.M)
        tests = [(m.group(1), m.group(2)) for m in re.finditer(r"^# tests: (\S+) (\S+)", text, re.M)]
        for rel in rels if not tests else []:
            tests += [t for t in area_of(rel)[1] if t not in tests]
        patches.append((os.path.abspath(patch), text, rels, tests))

    started = time.time()
    budgets = {}
    if a.baselines:
        for m in re.finditer(r"^baseline: (\S+) (.*?) passes unmutated in (\d+) s$", open(a.baselines).read(), re.M):
            budgets[(m.group(1), m.group(2))] = 3 * int(m.group(3)) + 60
            say(m.group(0))  # (this log serves a later resumption in turn)
        say("baselines: %d stages' times from %s, not run again" % (len(budgets), a.baselines))

    def baseline(tests):
        """Each covering test passes unmutated (else every mutant would look killed), and
        its time bounds a mutant's: measured on the first mutant that needs it."""
        todo = [t for t in dict.fromkeys(tests) if t not in budgets]
        if not todo:
            return
        code, out = build(a.build, {b for b, _ in todo}, a.jobs)
        if code != 0:
            sys.exit("mutants: the unmutated tree does not build:\n" + out[-3000:])
        for test in todo:
            # With an empty kernel cache: a mutated kernel rebuilds every program holding it,
            # which must not pass for a hang (PoCL's cache; other drivers keep their own).
            t0 = time.time()
            with tempfile.TemporaryDirectory() as cold:
                killed, failed = run_tests(a.build, [test], {}, env="POCL_CACHE_DIR=%s " % cold)
            if killed:
                sys.exit("mutants: covering tests fail unmutated: %s" % failed)
            budgets[test] = int(3 * (time.time() - t0)) + 60
            say("baseline: %s %s passes unmutated in %.0f s" % (test[0], test[1], time.time() - t0))

    results = {"killed": 0, "survived": 0, "not compiled": 0}
    survivors = []

    def trial(label, rel_files, apply, tests, named=False):
        baseline(tests)
        originals = {rel: open(os.path.join(a.src, rel)).read() for rel in rel_files}
        try:
            diff = apply()
            code, out = build(a.build, {b for b, _ in tests}, a.jobs)
            if code != 0:
                results["not compiled"] += 1
                say("not compiled  %s" % label)
                return None
            killed, failed = run_tests(a.build, tests, budgets, fail_fast=not named)
            results["killed" if killed else "survived"] += 1
            say("%-13s %s%s" % ("killed" if killed else "SURVIVED", label, ("  <- " + "; ".join(failed)) if killed else ""))
            if not killed:
                survivors.append((label, diff))
            return killed
        finally:
            for rel, text in originals.items():
                with open(os.path.join(a.src, rel), "w") as f:
                    f.write(text)

    for path, text, rels, tests in patches:
        def apply_patch(path=path, text=text):
            code, out = run("patch -p1 --quiet < '%s'" % path, a.src, 60)
            if code != 0:
                raise SystemExit("mutants: %s does not apply: %s" % (path, out))
            return text
        trial(os.path.basename(path), rels, apply_patch, tests, named=True)

    if a.sample:
        seed = a.seed if a.seed is not None else random.randrange(1 << 30)
        say("sample: %d of %d mutants in %d files, seed %d" % (a.sample, len(pool), len(files), seed))
        # round robin over the areas, each drawn in its own shuffled order, so that the
        # kernels' many lines do not crowd out the sampler's few
        rng = random.Random(seed)
        queues = []
        for x in areas:
            q = [i for i, m in enumerate(pool) if area_of(m[0])[0] == x]
            rng.shuffle(q)
            queues.append(q)
        order = [q[k] for k in range(max(map(len, queues), default=0)) for q in queues if k < len(q)]
        ran = 0
        for n, i in enumerate(order):
            if ran >= a.sample:
                break
            if n < a.start:
                continue
            rel, no, rule, new = pool[i]
            path = os.path.join(a.src, rel)

            def apply_line(path=path, no=no, new=new, rel=rel):
                with open(path) as f:
                    lines = f.readlines()
                old = lines[no]
                lines[no] = new
                with open(path, "w") as f:
                    f.writelines(lines)
                return "".join(difflib.unified_diff([old], [new], "a/%s:%d" % (rel, no + 1), "b/%s:%d" % (rel, no + 1)))
            if trial("#%d %s:%d %s" % (n, rel, no + 1, rule), [rel], apply_line, area_of(rel)[1]) is not None:
                ran += 1

    counted = results["killed"] + results["survived"]
    say("\n%d killed, %d survived, %d not compiled; %.1f%% killed; %.0f s" %
        (results["killed"], results["survived"], results["not compiled"],
         100.0 * results["killed"] / counted if counted else 0, time.time() - started))
    for label, diff in survivors:
        say("\nsurvived: %s\n%s" % (label, diff.rstrip()))
    if a.report:
        with open(a.report, "w") as f:
            f.write("\n".join(report) + "\n")
    # rebuild the unmutated tree, so the scratch build is left as it was found
    build(a.build, {b for b, _ in budgets}, a.jobs)
    return 1 if a.require_killed and results["survived"] else 0


if __name__ == "__main__":
    sys.exit(main())
