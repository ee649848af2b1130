#!/usr/bin/env python3
"""Writes a large report for `provision report`'s benchmarks (docs/benchmarks.md, "Reports and queries").

    python3 Tests/Fixtures/large_report.py SOURCE.json OUT.json 100000

SOURCE is a report written by `provision run` (the demo line's: 48 devices of about 4.6 KB each).
OUT has COUNT devices: SOURCE's records in turn, each with its own id (SN-000001, ...) and name,
written as `provision run` writes a report (pretty, keys sorted, devices first), streamed record by
record so that writing it does not need the whole report in memory.
"""
import json
import sys


def main():
    source, out, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with open(source) as f:
        report = json.load(f)
    records = report["devices"]
    with open(out, "w") as f:
        f.write('{\n  "devices" : [')
        for i in range(count):
            r = dict(records[i % len(records)])
            r["id"] = "SN-%06d" % (i + 1)
            r["name"] = "SNS-%06d" % (i + 1)
            text = json.dumps(r, indent=2, sort_keys=True, separators=(",", " : "), ensure_ascii=False)
            f.write(("," if i else "") + "\n    " + text.replace("\n", "\n    "))
        f.write("\n  ],\n")
        summary = dict(report["summary"])
        summary["total"] = count
        for key, value in (("run", report["run"]), ("schema", report["schema"]), ("summary", summary)):
            text = json.dumps(value, indent=2, sort_keys=True, separators=(",", " : "), ensure_ascii=False)
            f.write('  "%s" : %s%s\n' % (key, text.replace("\n", "\n  "), "" if key == "summary" else ","))
        f.write("}\n")


if __name__ == "__main__":
    main()
