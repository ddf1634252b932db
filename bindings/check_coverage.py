#!/usr/bin/env python3
"""Which functions of the C API each binding reaches: every public function
of capi/include/ddp/*.h must be called by the SWIG interface (Python and
Java), by the safe Rust crate and by LibDDP.jl, or be listed with its reason
in bindings/not_wrapped.txt. A listed function that a binding now calls
fails too, so the list stays true. Prints each binding's count.
    check_coverage.py <source dir>"""
import fnmatch
import glob
import os
import re
import sys

src = sys.argv[1]
BINDINGS = {
    "swig": ["bindings/swig/**/*.i"],
    "rust": ["bindings/rust/ddp/src/**/*.rs"],
    "julia": ["bindings/julia/LibDDP/src/**/*.jl"],
}


def without_comments(binding, text):
    """The code only: a function named in a comment or docstring is not called."""
    if binding == "julia":
        return re.sub(r"#[^\n]*", "", re.sub(r'""".*?"""', "", text, flags=re.S))
    return re.sub(r"//[^\n]*", "", re.sub(r"/\*.*?\*/", "", text, flags=re.S))


def read(patterns):
    return "".join(open(f).read() for p in patterns for f in glob.glob(os.path.join(src, p), recursive=True))


header = read(["capi/include/ddp/*.h"])
functions = sorted(set(re.findall(r"DDP_API\s[^;(]*?\b(ddp_\w+)\s*\(", header)))
if len(functions) < 100:
    sys.exit(f"only {len(functions)} functions found in the headers: the pattern no longer matches them")

# not_wrapped.txt: "<binding or *> <function or fnmatch pattern>  <reason>"; '#' starts a comment.
exemptions = []
for n, line in enumerate(open(os.path.join(src, "bindings", "not_wrapped.txt")), 1):
    line = line.split("#", 1)[0].strip()
    if not line:
        continue
    parts = line.split(None, 2)
    if len(parts) < 3 or parts[0] not in list(BINDINGS) + ["*"]:
        sys.exit(f"not_wrapped.txt:{n}: expected '<swig|rust|julia|*> <function> <reason>'")
    exemptions.append((parts[0], parts[1], n))

failures = []
for binding, patterns in BINDINGS.items():
    text = without_comments(binding, read(patterns))
    called = {f for f in functions if re.search(r"\b" + f + r"\b", text)}
    used_lines = set()
    missing = []
    for f in functions:
        rules = [(p, n) for b, p, n in exemptions if b in (binding, "*") and fnmatch.fnmatchcase(f, p)]
        if f in called:
            # A rule naming exactly this function is stale; a pattern may cover called ones too.
            failures += [f"not_wrapped.txt:{n}: {binding} calls {f} now" for p, n in rules if p == f]
        elif rules:
            used_lines.update(n for _, n in rules)
        else:
            missing.append(f)
    for b, p, n in exemptions:
        if b == binding and n not in used_lines and p not in called and not any(
                fnmatch.fnmatchcase(f, p) and f not in called for f in functions):
            failures.append(f"not_wrapped.txt:{n}: {p} matches nothing {binding} leaves out")
    failures += [f"{binding}: {f} is neither called nor listed in bindings/not_wrapped.txt" for f in missing]
    print(f"{binding}: calls {len(called)} of {len(functions)} functions, "
          f"{len(functions) - len(called) - len(missing)} listed as not wrapped")

if failures:
    print("\n".join(failures))
    sys.exit(1)
