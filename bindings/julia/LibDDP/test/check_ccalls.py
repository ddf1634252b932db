#!/usr/bin/env python3
"""Static check of the Julia binding (no Julia needed): every ccall in
LibDDP.jl names a function of the C header with the same number of
arguments and matching argument and return types, and every Julia struct
marked `# C: <name>` has the C struct's fields in order with matching
types. The header is read through Debian's bindgen, as for ddp-sys.
    check_ccalls.py <source dir>"""
import os
import re
import sys

src = sys.argv[1]
sys.path.insert(0, os.path.join(src, "bindings", "rust"))
from check_sys import header_items  # noqa: E402

header = header_items(src)
aliases = {k[5:]: v for k, v in header.items() if k.startswith("type ")}
PRIM = {"Cint": "c_int", "Cuint": "c_uint", "Csize_t": "usize", "Int64": "i64", "UInt64": "u64", "UInt32": "u32",
        "Int32": "i32", "Cdouble": "f64", "Cvoid": "()", "UInt8": "u8", "Cchar": "c_char"}
SAME = {"i32": "c_int", "u32": "c_uint"}


def base(t):
    """A C type with typedefs resolved (enums are unsigned ints, ddp_status is i32)."""
    t = t.strip()
    while t in aliases and not aliases[t].startswith("Option<"):
        t = aliases[t]
    return SAME.get(t, t)


def strip_pointer(c):
    m = re.match(r"\*(mut|const)\s+(.*)", c.strip())
    return m.group(2) if m else None


def jl_matches(jl, c, structs):
    """Whether Julia type `jl` passes/returns what C type `c` is."""
    jl, c = jl.strip(), c.strip()
    if c.startswith("Option< unsafe extern \"C\" fn"):  # a C callback: a @cfunction pointer
        return jl == "Ptr{Cvoid}"
    if jl == "Cstring":
        return strip_pointer(c) == "c_char"
    m = re.match(r"(Ptr|Ref)\{(.*)\}$", jl)
    if m:
        inner, pointee = m.group(2), strip_pointer(c)
        if pointee is None:
            return False
        if inner == "Cvoid":  # an opaque handle or untyped memory
            return pointee == "c_void" or pointee.startswith("ddp_") and base(pointee) == pointee and \
                f"struct {pointee}" in header and "_unused" in header[f"struct {pointee}"] or pointee == "c_void"
        if inner in structs:
            return pointee == structs[inner]
        if strip_pointer(pointee) is not None or inner.startswith(("Ptr{", "Ref{")):
            return jl_matches(inner, pointee, structs)
        return pointee == "c_void" or base(pointee) == base(PRIM.get(inner, inner))
    if jl in structs:
        return c == structs[jl]
    return base(PRIM.get(jl, jl)) == base(c)


def split_top(s):
    parts, depth, cur = [], 0, ""
    for ch in s:
        if ch in "({[":
            depth += 1
        elif ch in ")}]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur.strip())
    return parts


def balanced(s, i):
    """The text of the bracketed group starting at s[i] and the index after it."""
    depth = 0
    for j in range(i, len(s)):
        depth += s[j] in "({[" and 1 or 0
        depth -= s[j] in ")}]" and 1 or 0
        if depth == 0:
            return s[i + 1:j], j + 1
    raise ValueError("unbalanced")


text = "\n".join(open(os.path.join(d, f)).read() for d, _, fs in os.walk(os.path.join(src, "bindings/julia/LibDDP/src"))
                 for f in fs if f.endswith(".jl"))
failures, checked = [], 0

structs = {}  # Julia struct -> C struct
for cname, jname, body in re.findall(r"# C: (\w+)\n(?:mutable )?struct (\w+)\n(.*?)\nend", text, re.S):
    structs[jname] = cname
    cfields = header.get(f"struct {cname}")
    if cfields is None:
        failures.append(f"struct {jname}: no C struct {cname}")
        continue
    # Split at the top level only: a callback field's type holds "; " itself.
    fields, depth, cur = [], 0, ""
    for part in cfields.split("; "):
        cur = f"{cur}; {part}" if cur else part
        depth += part.count("<") + part.count("(") - part.count(">") + part.count("->") - part.count(")")
        if depth == 0:
            fields.append(cur)
            cur = ""
    cf = [re.match(r"pub (\w+?)_?: (.*)", f, re.S).groups() for f in fields]
    jf = re.findall(r"^\s*(\w+)::(\S+)", body, re.M)
    if [n for n, _ in jf] != [n for n, _ in cf]:
        failures.append(f"struct {jname}: fields {[n for n, _ in jf]} != C {cname} {[n for n, _ in cf]}")
    for (jn, jt), (cn, ct) in zip(jf, cf):
        if not jl_matches(jt, ct, structs):
            failures.append(f"struct {jname}.{jn}: Julia {jt} vs C {ct}")
    checked += 1

for m in re.finditer(r"ccall\(\(:(\w+),\s*libddp\),", text):
    name, rest = m.group(1), text[m.end():]
    ret, _, after = rest.partition(",")
    argstart = after.index("(")
    args, _ = balanced(after, argstart)
    jl_args = split_top(args)
    c = header.get(f"fn {name}")
    checked += 1
    if c is None:
        failures.append(f"ccall {name}: not a function of the header")
        continue
    cargs_text, cret = re.match(r"\((.*)\) -> (.*)", c).groups()
    cargs = split_top(cargs_text)
    if len(cargs) != len(jl_args):
        failures.append(f"ccall {name}: {len(jl_args)} arguments, the header has {len(cargs)}")
        continue
    for i, (j, ct) in enumerate(zip(jl_args, cargs)):
        if not jl_matches(j, ct, structs):
            failures.append(f"ccall {name}: argument {i + 1} is {j} in Julia, {ct} in C")
    if not jl_matches(ret.strip(), cret, structs):
        failures.append(f"ccall {name}: returns {ret.strip()} in Julia, {cret} in C")

for f in failures:
    print(f)
print(f"{checked} ccalls and structs checked against the header, {len(failures)} mismatches")
sys.exit(1 if failures or checked == 0 else 0)
