#!/usr/bin/env python3
"""Checks that ddp-sys declares exactly what the C header declares: every
function (parameter and return types), struct (fields), type alias and
constant, compared item by item with Debian's bindgen run on
capi/include/ddp/ddp.h. Parameter names and formatting do not matter.
    check_sys.py <source dir>   (exit 1 and a diff when they differ)"""
import re
import shutil
import subprocess
import sys



def header_items(src):
    """The header as bindgen sees it, as items() of its output. Without
    bindgen on this machine, exits with 77: CTest's "skipped", with the reason."""
    if shutil.which("bindgen") is None:
        print("skipped: bindgen not found (Debian's bindgen package; scripts/bootstrap.sh installs it)")
        sys.exit(77)
    cmd = ["bindgen", f"{src}/capi/include/ddp/ddp.h", "--allowlist-function", "ddp_.*", "--allowlist-type",
           "ddp_.*", "--allowlist-var", "DDP_.*", "--no-layout-tests", "--no-doc-comments", "--",
           f"-I{src}/capi/include"]
    return items(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)


def normalize(text):
    text = re.sub(r"//[^\n]*|/\*.*?\*/|#\[[^\]]*\]", "", text, flags=re.S)
    text = text.replace("::std::os::raw::", "").replace("::std::option::Option", "Option")
    text = text.replace("std::os::raw::", "")
    text = re.sub(r"\bsize_t\b", "usize", text)
    # bindgen names enum constants <enum>_<CONST>; ddp-sys uses the C names.
    text = re.sub(r"\bddp_[a-z_]+?_(DDP_[A-Z0-9_]+)\b", r"\1", text)
    text = re.sub(r"\b_bindgen_ty_\d+\b", "c_int", text)
    return re.sub(r"\s+", " ", text)


def items(text):
    t = normalize(text)
    out = {}
    for name, args, ret in re.findall(r"pub fn (\w+)\s*\((.*?)\)\s*(?:->\s*([^;{]+?))?\s*;", t):
        types = [re.sub(r"^\s*\w+\s*:\s*", "", a).strip() for a in args.split(",") if a.strip()]
        out["fn " + name] = f"({', '.join(types)}) -> {(ret or '()').strip()}"
    for name, body in re.findall(r"pub struct (\w+)\s*\{(.*?)\}", t):
        fields = [f.strip() for f in body.split(",") if f.strip()]
        out["struct " + name] = "; ".join(fields)
    for name, value in re.findall(r"pub type (\w+)\s*=\s*(.*?);(?=\s*(?:pub|extern|$))", t):
        if not name.startswith("__") and name not in ("usize", "c_int"):
            out["type " + name] = re.sub(r"\s+", " ", value.strip())
    for name, typ, value in re.findall(r"pub const (\w+)\s*:\s*(\w+)\s*=\s*([^;]+);", t):
        out["const " + name] = value.strip()
    return out




def main(src):
    want = header_items(src)
    have = items(open(f"{src}/bindings/rust/ddp-sys/src/lib.rs").read())
    missing = sorted(set(want) - set(have))
    extra = sorted(set(have) - set(want))
    differ = sorted(k for k in set(want) & set(have) if want[k] != have[k])
    for k in missing:
        print(f"missing in ddp-sys: {k} {want[k]}")
    for k in extra:
        print(f"not in the header: {k} {have[k]}")
    for k in differ:
        print(f"differs: {k}\n  header:  {want[k]}\n  ddp-sys: {have[k]}")
    fns = sum(k.startswith("fn ") for k in want)
    print(f"{len(want)} items ({fns} functions) in the header; {len(missing)} missing, {len(extra)} extra, "
          f"{len(differ)} differ")
    return 1 if missing or extra or differ else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
