#!/usr/bin/env python3
"""Compare two genfence reports (run.json and junit.xml) for what a change
must keep: every result's id, backend, verdict, reason, checks (name, passed,
detail), metrics, seeds, artifacts, the backends, case files and summary;
timings, dates, paths of the checkout and the genfence commit aside.

  report_diff.py BEFORE_DIR AFTER_DIR     (each holding run.json, junit.xml)

Prints each difference; exit 0 when there is none, 1 otherwise."""
import json, re, sys
import xml.etree.ElementTree as ET

TIMING = re.compile(r"(^|_)(seconds|time|started|timestamp|duration|elapsed|tokens_per_s|per_s|ms)$")
DROP_TOP = {"started", "seconds", "genfence", "command", "invocation", "environment", "audit"}


def norm_str(s, roots):
    for r in roots:
        s = s.replace(r, "<ROOT>")
    s = re.sub(r"\d+\.\d+ ?s\b", "<T>s", s)  # "0.27 s" in texts
    return s


def clean(v, roots, key=""):
    if isinstance(v, dict):
        return {k: clean(x, roots, k) for k, x in v.items() if not TIMING.search(k) and k not in ("stderr_tail",)}
    if isinstance(v, list):
        return [clean(x, roots) for x in v]
    if isinstance(v, str):
        return norm_str(v, roots)
    return v


def roots_of(doc):
    inv = doc.get("invocation", {})
    rs = []
    for k in ("cwd",):
        if inv.get(k):
            rs.append(inv[k])
    b = inv.get("binary", "")
    if b.endswith("/build/genfence"):
        rs.append(b[: -len("/build/genfence")])
    rd = doc.get("options", {}).get("report_dir")
    if rd:
        rs.append(rd)
    return sorted(set(rs), key=len, reverse=True)


def diff(a, b, path, out):
    if type(a) != type(b):
        out.append(f"{path}: {a!r} != {b!r}")
    elif isinstance(a, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                out.append(f"{path}.{k}: only in {'after' if k in b else 'before'}")
            else:
                diff(a[k], b[k], f"{path}.{k}", out)
    elif isinstance(a, list):
        if len(a) != len(b):
            out.append(f"{path}: {len(a)} entries before, {len(b)} after")
        for i, (x, y) in enumerate(zip(a, b)):
            diff(x, y, f"{path}[{i}]", out)
    elif a != b:
        out.append(f"{path}: {a!r} != {b!r}")


def run_json(d):
    doc = json.load(open(d + "/run.json"))
    r = roots_of(doc)
    doc = {k: v for k, v in doc.items() if k not in DROP_TOP}
    if "options" in doc:
        doc["options"].pop("report_dir", None)
    return clean(doc, r)


def junit(d, roots):
    t = ET.parse(d + "/junit.xml").getroot()

    def el(e):
        attrs = {k: norm_str(v, roots) for k, v in e.attrib.items() if k not in ("time", "timestamp", "hostname")}
        if e.tag == "property" and attrs.get("name") in ("genfence.commit", "genfence.started"):
            attrs.pop("value", None)
        text = norm_str((e.text or "").strip(), roots)
        text = re.sub(r"(seconds|child_seconds)\W+[0-9.e+-]+", r"\1 <T>", text)
        return [e.tag, attrs, text, [el(c) for c in e]]

    return el(t)


def main():
    a, b = sys.argv[1], sys.argv[2]
    out = []
    ra, rb = run_json(a), run_json(b)
    # results keyed by (id, backend), order kept as a check of its own
    ka = [(x["id"], x.get("backend_requested")) for x in ra.get("results", [])]
    kb = [(x["id"], x.get("backend_requested")) for x in rb.get("results", [])]
    if ka != kb:
        out.append(f"results: order or set differs ({len(ka)} before, {len(kb)} after)")
    diff(ra, rb, "run.json", out)
    rootsa = roots_of(json.load(open(a + "/run.json")))
    rootsb = roots_of(json.load(open(b + "/run.json")))
    diff(junit(a, rootsa), junit(b, rootsb), "junit.xml", out)
    for line in out:
        print(line)
    n = len(json.load(open(b + "/run.json")).get("results", []))
    print(f"report_diff: {n} results compared, {len(out)} difference(s)")
    return 1 if out else 0


if __name__ == "__main__":
    sys.exit(main())
